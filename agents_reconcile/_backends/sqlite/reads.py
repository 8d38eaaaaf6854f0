"""The SQLite journal's reads over many intents at once: the newest decision of each
(``newest_decisions``), for an operator's listing of every pending intent.

Kept apart from ``SQLiteJournal`` for length; it reads through the journal's own link
(``_run``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from ..._core.records import Decision
from ..rows import checked_decision, each

__all__ = ["SQLiteReads"]

_T = TypeVar("_T")

_CHUNK: Final = 500
"""Ids per statement: well under SQLite's limit on bound parameters."""


class SQLiteReads:
    """``newest_decisions`` for ``SQLiteJournal``, which provides ``_run``."""

    if TYPE_CHECKING:

        async def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T: ...

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))

        def read(conn: sqlite3.Connection) -> list[tuple[str, str, bytes]]:
            rows: list[tuple[str, str, bytes]] = []
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ", ".join("?" * len(chunk))
                rows += conn.execute(
                    "SELECT intent_id, session_id, record FROM decisions WHERE seq IN"
                    " (SELECT max(seq) FROM decisions"
                    f" WHERE intent_id IN ({marks}) GROUP BY intent_id)",
                    chunk,
                ).fetchall()
            return rows

        rows = await self._run(read) if ids else []
        found = each(
            rows, lambda row: checked_decision(*row), lambda row: ("decision", row[0], row[1])
        )
        return {decision.intent_id: decision for decision in found}
