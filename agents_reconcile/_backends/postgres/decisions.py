"""The PostgreSQL journal's decision log apart from settling: ``note`` stores a decision that
settles nothing, ``note_again`` counts the newest one once more (only while it is still the
one given), and ``decisions`` reads the newest first. Each is one autocommit statement from
``statements``, run on the journal's database (``database.JournalDatabase``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..._core.records import Decision
from ..journal import require_limit, require_settling
from ..rows import each
from .answers import _decision
from .statements import decision_args

if TYPE_CHECKING:
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PostgresDecisions"]


class PostgresDecisions:
    """``note``, ``note_again`` and ``decisions`` for ``PostgresJournal``, over its
    database ``_db``."""

    _db: JournalDatabase

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)

        async def work(conn: Connection) -> None:
            await conn.execute(self._db.sql.note, *decision_args(decision))

        await self._db.run(work)

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again`` (the same
        decision, counted once more), only while it is still ``previous``; whether it was."""
        require_settling(again, settling=False)
        args = (previous.intent_id, previous.encode(), again.encode())

        async def work(conn: Connection) -> bool:
            return await conn.fetchval(self._db.sql.note_again, *args) is not None

        return await self._db.run(work)

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        sql = self._db.sql.decisions(session_id is not None, intent_id is not None)
        args: list[object] = [value for value in (session_id, intent_id) if value is not None]
        args.append(limit)

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        return each(await self._db.run(work), _decision, lambda row: ("decision", row[0], row[1]))

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        if not ids:
            return {}
        sql = self._db.sql.newest_decisions

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, ids)

        found = each(await self._db.run(work), _decision, lambda row: ("decision", row[0], row[1]))
        return {decision.intent_id: decision for decision in found}
