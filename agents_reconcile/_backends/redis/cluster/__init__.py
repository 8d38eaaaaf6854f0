"""The Redis journal on a Redis Cluster (``redis+cluster://``): the journal's keys in 256
buckets of one slot each (``layout``), intent ids claimed across buckets (``claims``), the
journal-wide reads, pages, effect reads and set-aside listing asked of every bucket at once
(``reads``, ``pages``, ``effects``, ``aside``), pruning and the schema bucket by bucket
(``retention``, ``schema``), all put together in ``journal.RedisClusterJournal``. The
revisioned Redis store needs nothing of this: its scripts touch one session's keys."""
