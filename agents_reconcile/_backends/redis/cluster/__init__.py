"""The Redis journal on a Redis Cluster (``redis+cluster://``): the journal's keys in 256
buckets of one slot each (``layout``), which the cluster's topology (``redis/topology.py``)
gives to the Redis journal (``redis/journal.py``'s ``RedisClusterJournal``). The journal and its
components (effects, aside, pages, retention, sealing) are the Redis journal's own, given the
bucket layout: each asks every bucket at once where a server has one, and intent ids are claimed
across buckets (``homes``). The revisioned Redis store needs nothing of this: its scripts touch
one session's keys."""
