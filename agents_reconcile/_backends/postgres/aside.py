"""The PostgreSQL journal's aside component (``JournalAside``): damaged intents set aside
(``_backends/aside.py``) in the ``set_aside`` table. ``set_aside`` is one transaction under the
session's lock: the row goes only while it holds the bytes, state and owner read, then the
write is counted, the decision stored and the bytes kept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._core.records import Decision
from ..aside import RawIntent, SetAside
from ..journal import require_limit, require_settling
from .answers import _count
from .statements import decision_args

if TYPE_CHECKING:
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PostgresAside"]


class PostgresAside:
    """``JournalAside`` in a journal's database."""

    def __init__(self, db: JournalDatabase) -> None:
        self._db = db

    async def raw(self, intent_id: str) -> RawIntent | None:
        async def work(conn: Connection) -> Any:
            return await conn.fetchrow(self._db.sql.raw_intent, intent_id)

        row = await self._db.run(work)
        return None if row is None else RawIntent.of_row(tuple(row), row["age"])

    async def set_aside(self, raw: RawIntent, aside: SetAside, decision: Decision) -> bool:
        require_settling(decision, settling=True)
        sql = self._db.sql

        async def work(conn: Connection) -> bool:
            async with conn.transaction():
                _count(await conn.fetchval(sql.lock_session, raw.session_id, raw.backend))
                gone = await conn.fetchval(sql.remove_raw, raw.intent_id, *raw.stored)
                if gone is None:
                    return False
                await conn.fetchval(sql.count_write, raw.session_id, raw.backend)
                await conn.execute(sql.note, *decision_args(decision))
                await conn.execute(
                    sql.keep_aside,
                    raw.intent_id,
                    raw.session_id,
                    aside.set_aside_at,
                    aside.encode(),
                    raw.record,
                )
                return True

        return await self._db.run(work)

    async def entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        require_limit(limit)
        sql = self._db.sql.aside_entries[session_id is not None, intent_id is not None]
        args: list[object] = [value for value in (session_id, intent_id) if value is not None]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args, limit)

        return [SetAside.decode(bytes(row[0])) for row in await self._db.run(work)]

    async def kept(self, intent_id: str) -> bytes | None:
        async def work(conn: Connection) -> Any:
            return await conn.fetchval(self._db.sql.aside_kept, intent_id)

        found = await self._db.run(work)
        return None if found is None else bytes(found)
