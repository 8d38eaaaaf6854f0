"""The PostgreSQL journal's decision log apart from settling: ``note`` stores a decision that
settles nothing, ``note_again`` counts the newest one once more (only while it is still the
one given), and ``decisions`` reads the newest first. Each is one autocommit statement from
``statements``.

Kept apart from ``PostgresJournal`` for length; it works through the journal's own connections
(``_run``: the schema checked or migrated first, the driver's errors translated).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..._core.records import Decision
from ..journal import require_limit, require_settling
from ..rows import each
from .answers import _decision
from .statements import decision_args

if TYPE_CHECKING:
    from .backend import Connection
    from .statements import JournalStatements

__all__ = ["PostgresDecisions"]

_T = TypeVar("_T")


class PostgresDecisions:
    """``note``, ``note_again`` and ``decisions`` for ``PostgresJournal``, which provides
    ``_sql`` and ``_run``."""

    _sql: JournalStatements

    if TYPE_CHECKING:

        async def _run(
            self, work: Callable[[Connection], Awaitable[_T]], *, prepare: bool = True
        ) -> _T: ...

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)

        async def work(conn: Connection) -> None:
            await conn.execute(self._sql.note, *decision_args(decision))

        await self._run(work)

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again`` (the same
        decision, counted once more), only while it is still ``previous``; whether it was."""
        require_settling(again, settling=False)
        args = (previous.intent_id, previous.encode(), again.encode())

        async def work(conn: Connection) -> bool:
            return await conn.fetchval(self._sql.note_again, *args) is not None

        return await self._run(work)

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        sql = self._sql.decisions(session_id is not None, intent_id is not None)
        args: list[object] = [value for value in (session_id, intent_id) if value is not None]
        args.append(limit)

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        return each(await self._run(work), _decision, lambda row: ("decision", row[0], row[1]))

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        if not ids:
            return {}
        sql = self._sql.newest_decisions

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, ids)

        found = each(await self._run(work), _decision, lambda row: ("decision", row[0], row[1]))
        return {decision.intent_id: decision for decision in found}
