"""The SQLite journal's aside component (``JournalAside``): a damaged intent's row moved,
its bytes as they were, to the ``set_aside`` table, with the decision that settles it and its
session's write counted, in one transaction on the journal's file (``files.JournalFile``).
"""

from __future__ import annotations

import sqlite3

from ..._core.records import Decision
from ..aside import RawIntent, SetAside, as_bytes
from ..journal import require_limit, require_settling
from .files import JournalFile
from .statements import insert_decision, matching, remove_intent

__all__ = ["SQLiteAside"]


class SQLiteAside:
    """``JournalAside`` on a journal's file."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file

    async def raw(self, intent_id: str) -> RawIntent | None:
        sql = (
            "SELECT intent_id, session_id, backend, state, owner, updated_at, record"
            " FROM unresolved WHERE intent_id = ?"
        )
        row = await self._file.run(lambda conn: conn.execute(sql, (intent_id,)).fetchone())
        return None if row is None else RawIntent.of_row(row)

    async def set_aside(self, raw: RawIntent, aside: SetAside, decision: Decision) -> bool:
        require_settling(decision, settling=True)

        def write(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            # The values as read, compared as stored (IS: a column of another type matches too).
            gone = remove_intent(
                conn,
                raw.intent_id,
                only_if=" AND record IS ? AND state IS ? AND owner IS ? AND updated_at IS ?",
                args=raw.stored,
            )
            if not gone:
                conn.execute("ROLLBACK")
                return False
            insert_decision(conn, decision)
            conn.execute(
                "INSERT INTO set_aside (intent_id, session_id, set_aside_at, meta, record)"
                " VALUES (?, ?, ?, ?, ?)",
                (raw.intent_id, raw.session_id, aside.set_aside_at, aside.encode(), raw.stored[0]),
            )
            conn.execute("COMMIT")
            return True

        return await self._file.run(write)

    async def entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        require_limit(limit)
        args: list[object] = []
        sql = "SELECT meta FROM set_aside WHERE 1 = 1"
        sql += matching(args, session_id=session_id, intent_id=intent_id)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        rows = await self._file.run(lambda conn: conn.execute(sql, args).fetchall())
        return [SetAside.decode(row[0]) for row in rows]

    async def kept(self, intent_id: str) -> bytes | None:
        sql = "SELECT record FROM set_aside WHERE intent_id = ? ORDER BY seq DESC LIMIT 1"
        row = await self._file.run(lambda conn: conn.execute(sql, (intent_id,)).fetchone())
        return None if row is None else as_bytes(row[0])
