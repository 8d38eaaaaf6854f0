"""SQLite: the embedded journal (``journal``, its file handling in ``files``), the revisioned
store (``store``), their schema steps (``journal_schema/``, ``store_schema/``), and the
addresses that open them (``backend``)."""
