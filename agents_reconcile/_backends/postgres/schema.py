"""The PostgreSQL journal's schema half: migrating and checking it, the version it records,
dropping it, and what the database holds for an operator told there is no journal (the tables
of the journal's schema, the schemas holding a journal). The steps themselves are applied by
``backend.PostgresSchema``.

Kept apart from ``PostgresJournal`` for length; it works through the journal's own pool and
connections, with the driver's errors translated.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from .backend import Connection, PostgresSchema

__all__ = ["PostgresSchemaSteps"]

_T = TypeVar("_T")
# What a schema holds: one row per table (the schema alone, a NULL name, when it is empty); no
# row when there is no such schema.
_SCHEMA_TABLES: Final = (
    "SELECT c.relname::text FROM pg_catalog.pg_namespace n LEFT JOIN pg_catalog.pg_class c"
    " ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p') WHERE n.nspname = $1"
    " ORDER BY 1"
)
_JOURNAL_SCHEMAS: Final = (
    "SELECT n.nspname::text FROM pg_catalog.pg_namespace n WHERE"
    " EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid"
    " AND c.relname = $1 AND c.relkind IN ('r', 'p'))"
    " AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid"
    " AND c.relname = $2 AND c.relkind IN ('r', 'p'))"
    " ORDER BY 1 LIMIT $3"
)


class PostgresSchemaSteps:
    """The schema half of ``PostgresJournal``, which provides what is declared here."""

    schema: str
    _schema: PostgresSchema

    if TYPE_CHECKING:

        async def _run(
            self, work: Callable[[Connection], Awaitable[_T]], *, prepare: bool = True
        ) -> _T: ...

        async def _on_pool(self, work: Callable[[Any, set[Any]], Awaitable[_T]]) -> _T: ...

    async def migrate(self) -> list[str]:
        """Apply the missing migration steps; return what was applied (empty when current).

        Refuses (``JournalCorrupt``) a schema newer than this release, or one whose version
        is current but whose tables are missing."""
        return await self._on_pool(self._schema.migrate)

    async def check(self) -> str | None:
        """None when the schema is at this release's version; otherwise a sentence saying
        what is missing or newer. Runs no DDL and writes nothing (a read-only transaction)."""
        problem, _ = await self._run(self._schema.inspect, prepare=False)
        return problem

    async def schema_tables(self) -> list[str] | None:
        """The tables the journal's schema holds, sorted (None when there is no such schema),
        for an operator told there is no journal. Only reads."""

        async def work(conn: Connection) -> list[str] | None:
            async with conn.transaction(readonly=True):
                rows = await conn.fetch(_SCHEMA_TABLES, self.schema)
            return None if not rows else [row[0] for row in rows if row[0] is not None]

        return await self._run(work, prepare=False)

    async def journal_schemas(self, *, most: int = 20) -> list[str]:
        """The schemas of this database holding a journal (its intents table and its version
        table), sorted, up to ``most``. Only reads."""

        async def work(conn: Connection) -> list[str]:
            async with conn.transaction(readonly=True):
                rows = await conn.fetch(
                    _JOURNAL_SCHEMAS, "intents", self._schema.version_table, most
                )
            return [str(row[0]) for row in rows]

        return await self._run(work, prepare=False)

    async def schema_version(self) -> int | None:
        """The version recorded in the schema (None when it holds none); writes nothing."""
        return await self._run(self._schema.version, prepare=False)

    async def drop(self) -> None:
        """Drop this journal's schema and everything in it (for tests and operators)."""
        await self._on_pool(self._schema.drop)
