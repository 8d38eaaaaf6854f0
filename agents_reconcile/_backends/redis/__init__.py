"""Redis: the shared journal (``journal``, its key layout, replies, effects and set-aside; on a
Redis Cluster ``cluster``, through the cluster client of ``nodes``), the revisioned store
(``store``), the fused append of both on one server (``fused``), their Lua scripts
(``scripts/``) and schema version keys (``schema``), and the addresses that open them
(``backend``). Needs ``agents-reconcile[redis]``."""
