"""The SQLite journal's sealing component (``JournalSealing``): the ids of the keys its
deployment seals under, rows of the ``sealing_keys`` table of the journal's file."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Final

from .files import JournalFile

__all__ = ["SQLiteSealing"]

_SEALING_KEYS: Final = "SELECT key_id FROM sealing_keys ORDER BY key_id"
_MARK_SEALING: Final = "INSERT OR IGNORE INTO sealing_keys (key_id, marked_at) VALUES (?, ?)"


class SQLiteSealing:
    """``JournalSealing`` in a journal's file."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file

    async def keys(self) -> frozenset[str]:
        await self._file.refuse_older()
        rows = await self._file.run(lambda conn: conn.execute(_SEALING_KEYS).fetchall())
        return frozenset(row[0] for row in rows)

    async def mark(self, key_ids: Sequence[str]) -> None:
        rows = [(key_id, time.time()) for key_id in key_ids]

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_MARK_SEALING, rows)
            conn.execute("COMMIT")

        await self._file.run(write)
