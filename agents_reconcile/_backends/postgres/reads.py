"""The PostgreSQL journal's reads: unresolved intents (of a session and backend, or all), one
intent, whether an intent is settled, a session's write count, and the pages of the listings
of unresolved intents and started effects (``pages``). Each is one statement from
``statements`` (or ``pages``) run on the journal's database (``database.JournalDatabase``);
records are decoded, and so checked, with the journal's keyring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ..._core.effect_records import Effect
from ..._core.records import BackendIdentity
from ..journal import JournalEntry, Page, require_limit
from ..pages import EFFECT_CURSOR, INTENT_CURSOR, page, read_cursor
from ..rows import checked_decision, checked_effect, each
from .answers import _count, _entry
from .pages import page_statements

if TYPE_CHECKING:
    from ..._core.sealing import Keyring
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PostgresReads"]


class PostgresReads:
    """``pending``, ``get``, ``is_settled``, ``write_count``, ``pending_page`` and
    ``started_effects_page`` for ``PostgresJournal``, over its database ``_db``."""

    keyring: Keyring
    _db: JournalDatabase

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        sql = self._db.sql.pending(session_id is not None, backend is not None)
        args = [value for value in (session_id, backend) if value is not None]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *(str(value) for value in args))

        keyring = self.keyring
        return each(
            await self._db.run(work),
            lambda row: _entry(row, keyring),
            lambda row: ("intent", row[0], row[1]),
        )

    async def get(self, intent_id: str) -> JournalEntry | None:
        async def work(conn: Connection) -> Any:
            return await conn.fetchrow(self._db.sql.get, intent_id)

        row = await self._db.run(work)
        return None if row is None else _entry(row, self.keyring)

    async def is_settled(self, intent_id: str) -> bool:
        async def work(conn: Connection) -> bool:
            return await conn.fetchval(self._db.sql.is_settled, intent_id) is not None

        return await self._db.run(work)

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        async def work(conn: Connection) -> int:
            # The session's count, or the journal's floor when it has none (never counted,
            # or pruned): one snapshot, so a count pruned meanwhile reads as the floor it
            # raised.
            return _count(await conn.fetchval(self._db.sql.write_count, session_id, str(backend)))

        return await self._db.run(work)

    async def pending_page(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        require_limit(limit)
        start = () if after is None else read_cursor(after, INTENT_CURSOR)
        sql = page_statements(self._db.sql.schema).intents(session_id is not None, bool(start))
        args = [*([] if session_id is None else [session_id]), *start, limit]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        rows = await self._db.run(work)
        keyring = self.keyring
        entries = each(
            rows,
            lambda row: _entry(tuple(row)[:9], keyring),
            lambda row: ("intent", row[0], row[1]),
        )
        last = rows[-1] if rows else None
        return _page(entries, rows, None if last is None else (last[1], last[2], last[9], last[0]))

    async def started_effects_page(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        require_limit(limit)
        start = () if after is None else read_cursor(after, EFFECT_CURSOR)
        sql = page_statements(self._db.sql.schema).effects(session_id is not None, bool(start))
        args = [*([] if session_id is None else [session_id]), *start, limit, overdue_before]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        rows = await self._db.run(work)
        keyring = self.keyring
        effects = each(
            rows,
            lambda row: checked_effect(
                row[0], row[1], row[2], row[3], row[4], keyring, age=row["age"]
            ),
            lambda row: ("effect", row[0], row[1]),
        )
        last = rows[-1] if rows else None
        return _page(effects, rows, None if last is None else (last[5], last[0]))


_R = TypeVar("_R")


def _page(found: list[_R], rows: list[Any], last: tuple[str | float, ...] | None) -> Page[_R]:
    """A page of ``found`` (the rows decoded; ``last``, the last row's sort key), with the
    newest decisions and counts its statement's ``rows`` carry (the first column the id, the
    last four the decision's session and record, the count of what follows and of those
    waiting)."""
    decided = [(row[0], row["decided_in"], row["decision"]) for row in rows if row["decision"]]
    newest = each(
        decided, lambda row: checked_decision(*row), lambda row: ("decision", row[0], row[1])
    )
    return page(
        found,
        {decision.intent_id: decision for decision in newest},
        more=int(rows[0]["more"]) if rows else 0,
        waiting=int(rows[0]["waiting"]) if rows else 0,
        last=last,
    )
