"""The PostgreSQL journal's reads: unresolved intents (of a session and backend, or all), one
intent, whether an intent is settled, and a session's write count. Each is one statement from
``statements``; intents are decoded, and so checked, with the journal's keyring.

Kept apart from ``PostgresJournal`` for length; it works through the journal's own connections
(``_run``: the schema checked or migrated first, the driver's errors translated).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..._core.records import BackendIdentity
from ..journal import JournalEntry
from ..rows import each
from .answers import _count, _entry

if TYPE_CHECKING:
    from ..._core.sealing import Keyring
    from .backend import Connection
    from .statements import JournalStatements

__all__ = ["PostgresReads"]

_T = TypeVar("_T")


class PostgresReads:
    """``pending``, ``get``, ``is_settled`` and ``write_count`` for ``PostgresJournal``, which
    provides ``keyring``, ``_sql`` and ``_run``."""

    keyring: Keyring
    _sql: JournalStatements

    if TYPE_CHECKING:

        async def _run(
            self, work: Callable[[Connection], Awaitable[_T]], *, prepare: bool = True
        ) -> _T: ...

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        sql = self._sql.pending(session_id is not None, backend is not None)
        args = [value for value in (session_id, backend) if value is not None]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *(str(value) for value in args))

        keyring = self.keyring
        return each(
            await self._run(work),
            lambda row: _entry(row, keyring),
            lambda row: ("intent", row[0], row[1]),
        )

    async def get(self, intent_id: str) -> JournalEntry | None:
        async def work(conn: Connection) -> Any:
            return await conn.fetchrow(self._sql.get, intent_id)

        row = await self._run(work)
        return None if row is None else _entry(row, self.keyring)

    async def is_settled(self, intent_id: str) -> bool:
        async def work(conn: Connection) -> bool:
            return await conn.fetchval(self._sql.is_settled, intent_id) is not None

        return await self._run(work)

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        async def work(conn: Connection) -> int:
            found = await conn.fetchval(self._sql.write_count, session_id, str(backend))
            return 0 if found is None else _count(found)

        return await self._run(work)
