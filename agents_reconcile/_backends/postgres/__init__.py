"""PostgreSQL: the shared journal (``journal``, its ``statements``, effects and set-aside), the
revisioned store (``store``), their schema steps (``journal_schema/``, ``store_schema/``), and
the addresses that open them (``backend``). Needs ``agents-reconcile[postgres]``."""
