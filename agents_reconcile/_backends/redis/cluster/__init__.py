"""The Redis journal on a Redis Cluster (``redis+cluster://``): the journal's keys in 256
buckets of one slot each (``layout``), intent ids claimed across buckets (``claims``) and the
journal-wide reads asked of every bucket at once (``reads``), all put together in
``journal.RedisClusterJournal``. Its components (effects, aside, pages, retention, sealing)
are the Redis journal's own, given the bucket layout: each asks every bucket at once where a
server has one. The revisioned Redis store needs nothing of this: its scripts touch one
session's keys."""
