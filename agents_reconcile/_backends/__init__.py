"""Every engine a journal or a revisioned store runs on, one folder each, and what they share.

- ``sqlite/``, ``redis/``, ``postgres/``, ``memory/``: one engine each: its journal, its
  revisioned store, its schema steps and its scripts, and (``backend.py``) how its addresses
  open them.
- ``registry``: each engine, one line, by the schemes of its addresses; ``open_journal``,
  ``migrate``, the CLI, the self-test and the test fixtures all find engines there.
- ``journal``: the ``IntentJournal`` protocol and the capabilities a journal declares;
  ``rows``, ``aside``, ``store_items``: the row shapes the engines share.
- ``schema``: versioned schemas, one model for SQL files and Redis version keys; ``migrate``
  applies them.
- ``addresses``, ``redaction``, ``connections``, ``lua``: checking and printing an address
  (never with a credential), the client a caller passes in or one shared per address, and Lua
  scripts run as one command each.
"""
