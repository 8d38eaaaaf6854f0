"""The PostgreSQL journal's sealing component (``JournalSealing``): the ids of the keys its
deployment seals under, rows of the ``sealing_keys`` table of the journal's schema."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .backend import quote

if TYPE_CHECKING:
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PostgresSealing"]


class PostgresSealing:
    """``JournalSealing`` in a journal's database."""

    def __init__(self, db: JournalDatabase) -> None:
        self._db = db
        table = f"{quote(db.schema)}.sealing_keys"
        self._read = f"SELECT key_id FROM {table}"
        self._mark = (
            f"INSERT INTO {table} (key_id) SELECT unnest($1::text[])"
            " ON CONFLICT (key_id) DO NOTHING"
        )

    async def keys(self) -> frozenset[str]:
        async def work(conn: Connection) -> list[Any]:
            return list(await conn.fetch(self._read))

        return frozenset(row[0] for row in await self._db.run(work))

    async def mark(self, key_ids: Sequence[str]) -> None:
        async def work(conn: Connection) -> None:
            await conn.execute(self._mark, list(key_ids))

        await self._db.run(work)
