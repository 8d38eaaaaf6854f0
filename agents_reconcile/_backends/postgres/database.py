"""The PostgreSQL journal's database (``JournalDatabase``): where the journal is (the address,
its schema), the pool its operations run on, the driver and what its errors mean, the journal's
statements, and its schema steps (migrated on first use or checked, dropped), with what an
operator told there is no journal is shown (the tables of the journal's schema, the schemas
holding a journal). The journal and each of its components run their statements through it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs, urlsplit

from ...errors import ConfigurationError, JournalCorrupt, JournalError, JournalUnavailable
from ..connections import Connections
from ..redaction import Redacted
from ..schema import Schema
from .backend import (
    Connection,
    PostgresSchema,
    ServerIdentity,
    check_schema_name,
    check_scheme,
    keep_session_state,
    load_driver,
    pool_location,
    pool_opener,
    quote,
    server_identity,
)
from .lane import run_on
from .statements import JournalStatements

__all__ = [
    "DEFAULT_SCHEMA",
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMAS_HOLDING",
    "SCHEMA_TABLES",
    "SCHEMA_VERSION",
    "JournalDatabase",
]

SCHEMA: Final = Schema(
    "journal",
    ("0001_initial", "0002_pruning", "0003_sealing", "0004_slots"),
    JournalCorrupt,
    package="agents_reconcile._backends.postgres",
    folder="journal_schema",
)
MIGRATIONS: Final = SCHEMA.steps
"""The schema's migration steps, oldest first: files ``journal_schema/<name>.sql``."""
SCHEMA_VERSION: Final = SCHEMA.version
"""The schema version this release reads and writes."""
DEFAULT_SCHEMA: Final = "agents_reconcile"

_T = TypeVar("_T")
_TABLES: Final = (
    "decisions",
    "effects",
    "sealing_keys",
    "set_aside",
    "slots",
    "write_floor",
)
# What a schema holds: one row per table (the schema alone, a NULL name, when it is empty); no
# row when there is no such schema.
SCHEMA_TABLES: Final = (
    "SELECT c.relname::text FROM pg_catalog.pg_namespace n LEFT JOIN pg_catalog.pg_class c"
    " ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p') WHERE n.nspname = $1"
    " ORDER BY 1"
)
"""The tables of a schema (``$1``): a row each (one row, NULL, for an empty schema; none for
no such schema)."""
SCHEMAS_HOLDING: Final = (
    "SELECT n.nspname::text FROM pg_catalog.pg_namespace n WHERE"
    " EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid"
    " AND c.relname = $1 AND c.relkind IN ('r', 'p'))"
    " AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid"
    " AND c.relname = $2 AND c.relkind IN ('r', 'p'))"
    " ORDER BY 1 LIMIT $3"
)
"""The schemas holding both tables named (``$1``, ``$2``), up to a number (``$3``)."""


def _pool_options(
    url: str, connect_timeout: float, command_timeout: float | None
) -> dict[str, Any]:
    """The asyncpg pool a journal on ``url`` opens: one to four connections, statements kept
    prepared, the application named and read committed unless the URL says otherwise."""
    query = parse_qs(urlsplit(url).query)
    settings = {} if "application_name" in query else {"application_name": "agents-reconcile"}
    if "default_transaction_isolation" not in query:
        # As the store's: a one-step append (``fused``) runs its compare-and-swap here.
        settings["default_transaction_isolation"] = "read committed"
    return {
        "min_size": 1,
        "max_size": 4,
        "timeout": connect_timeout,
        "command_timeout": command_timeout,
        "max_inactive_connection_lifetime": 60.0,
        # The journal's statements are a fixed set: keep them prepared for as long as the
        # connection lives, rather than re-preparing every five minutes.
        "max_cached_statement_lifetime": 0,
        "reset": keep_session_state,
        "server_settings": settings,
    }


class JournalDatabase:
    """One journal's schema in a PostgreSQL database, and the pool that reaches it.

    Connections come from ``pool`` when given (the caller's: ``close()`` leaves it open), else
    from a small asyncpg pool (one to four connections) shared by the journals of one URL and
    settings in an event loop, opened on first use and closed when the last of them closes.
    ``connect_timeout`` bounds connecting and waiting for a free connection, ``command_timeout``
    each statement (None for no limit). With ``migrate`` the schema is migrated on first use,
    else only checked."""

    def __init__(
        self,
        url: str | None,
        *,
        schema: str,
        migrate: bool,
        connect_timeout: float,
        command_timeout: float | None,
        pool: Any,
    ) -> None:
        if url is None and pool is None:
            raise ConfigurationError("a PostgreSQL journal needs a URL or a pool")
        if url is not None:
            check_scheme(url, "journal")
        check_schema_name(schema)
        if connect_timeout <= 0:
            raise ConfigurationError(f"connect_timeout must be positive, not {connect_timeout}")
        if command_timeout is not None and command_timeout <= 0:
            raise ConfigurationError(f"command_timeout must be positive, not {command_timeout}")
        self.driver = load_driver("the PostgreSQL journal")
        self._errors: tuple[type[BaseException], ...] = (
            self.driver.PostgresError,
            self.driver.InterfaceError,
            self.driver.InternalClientError,
            OSError,
            TimeoutError,
        )
        self.address = Redacted.of(url) if url is not None else Redacted(pool_location(pool))
        self.schema = schema
        self.migrate_on_use = migrate
        self.connect_timeout = connect_timeout
        # Checked once per journal object, as a fresh worker would: a schema a newer release
        # upgraded meanwhile is refused by every journal made after it.
        self.verified: set[object] = set()
        self.sql = JournalStatements(quote(schema))
        self._steps = PostgresSchema(
            SCHEMA,
            schema,
            version_table="schema_version",
            tables=_TABLES,
            location=self.address.shown,
            acquire_timeout=connect_timeout,
        )
        if pool is not None:
            self.connections: Connections[Any] = Connections(pool)
            return
        assert url is not None
        options = _pool_options(url, connect_timeout, command_timeout)
        key = ("postgres-journal", url, repr(sorted(options.items())))
        self.connections = Connections(key=key, opener=pool_opener(self.driver, url, options))

    @property
    def location(self) -> str:
        """The database address without its password, fit for messages."""
        return self.address.shown

    async def run(self, work: Callable[[Connection], Awaitable[_T]], *, prepare: bool = True) -> _T:
        """Run ``work`` on a pooled connection (the schema checked or migrated first, unless
        not ``prepare``), with the driver's errors translated."""
        try:
            pool = self.connections.current()
            if pool is None:
                pool = await self.connections.get()
            if prepare and self._steps.key not in self.verified:
                await self._steps.ensure(pool, self.verified, migrate=self.migrate_on_use)
            return await run_on(pool, work, acquire_timeout=self.connect_timeout)
        except self._errors as exc:
            raise self.translate(exc) from exc

    async def on_pool(self, work: Callable[[Any, set[Any]], Awaitable[_T]]) -> _T:
        """Run ``work`` with the pool itself (and what it verified), errors translated."""
        try:
            return await work(await self.connections.get(), self.verified)
        except self._errors as exc:
            raise self.translate(exc) from exc

    def translate(self, exc: BaseException) -> JournalError:
        """The journal's own error for a driver's error (``JournalCorrupt`` where retrying
        cannot help)."""
        detail = self.address.scrub(f"{type(exc).__name__}: {exc}")
        state = getattr(exc, "sqlstate", None)
        where = f"PostgreSQL journal {self.address} (schema {self.schema})"
        if isinstance(state, str) and (
            state[:2] in ("22", "23", "3F") or (state[:2] == "42" and state != "42501")
        ):
            # A value, a table or a column is not what this release wrote: not a journal, or
            # one changed behind its back. Retrying will not help.
            return JournalCorrupt(f"{where} does not hold what this release expects: {detail}")
        return JournalUnavailable(f"{where} cannot be used: {detail}")

    async def server(self, *, fresh: bool = False) -> ServerIdentity | None:
        """Which server, database and role the pool reaches, as the server reports it
        (``backend.server_identity``: read once per pool; ``fresh``: read again)."""

        async def read(pool: Any, verified: set[Any]) -> ServerIdentity | None:
            learned = self.connections.learned
            return await server_identity(
                pool, learned, acquire_timeout=self.connect_timeout, fresh=fresh
            )

        return await self.on_pool(read)

    async def close(self) -> None:
        """Give back the pool (the last journal using it closes it; one passed in stays
        open); a later operation opens a new one."""
        self.verified.clear()
        await self.connections.release()

    # -- the schema ----------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Apply the missing migration steps; return what was applied (empty when current).

        Refuses (``JournalCorrupt``) a schema newer than this release, or one whose version
        is current but whose tables are missing."""
        return await self.on_pool(self._steps.migrate)

    async def check(self) -> str | None:
        """None when the schema is at this release's version; otherwise a sentence saying
        what is missing or newer. Runs no DDL and writes nothing (a read-only transaction)."""
        problem, _ = await self.run(self._steps.inspect, prepare=False)
        return problem

    async def schema_version(self) -> int | None:
        """The version recorded in the schema (None when it holds none); writes nothing."""
        return await self.run(self._steps.version, prepare=False)

    async def drop(self) -> None:
        """Drop the journal's schema and everything in it (for tests and operators)."""
        await self.on_pool(self._steps.drop)

    async def schema_tables(self) -> list[str] | None:
        """The tables the journal's schema holds, sorted (None when there is no such schema),
        for an operator told there is no journal. Only reads."""

        async def work(conn: Connection) -> list[str] | None:
            async with conn.transaction(readonly=True):
                rows = await conn.fetch(SCHEMA_TABLES, self.schema)
            return None if not rows else [row[0] for row in rows if row[0] is not None]

        return await self.run(work, prepare=False)

    async def journal_schemas(self, *, most: int = 20) -> list[str]:
        """The schemas of this database holding a journal (its decisions table, which every
        version has, and its version table), sorted, up to ``most``. Only reads."""

        async def work(conn: Connection) -> list[str]:
            async with conn.transaction(readonly=True):
                rows = await conn.fetch(
                    SCHEMAS_HOLDING, "decisions", self._steps.version_table, most
                )
            return [str(row[0]) for row in rows]

        return await self.run(work, prepare=False)
