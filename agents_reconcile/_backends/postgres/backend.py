"""What the PostgreSQL journal and the PostgreSQL store share: the driver, their pools, and
their schemas' migrations.

Each lives in a PostgreSQL schema of its own choosing, with a version table naming the steps
applied. Steps run in one transaction that holds an advisory lock named after the schema (the
same key for the journal and the store, so the two never create one schema at the same
moment); each runner re-reads the version once it holds the lock, so workers starting
together apply a step once. A schema newer than this release is refused before any DDL runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import re
from collections.abc import Awaitable, Callable, Hashable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import ConfigurationError
from ..addresses import user_of
from ..connections import Opener
from ..registry import check_address
from ..schema import MIGRATE_HINT, Schema
from .lane import LanedPool

__all__ = [
    "SCHEMES",
    "Connection",
    "PostgresSchema",
    "ServerIdentity",
    "check_schema_name",
    "keep_session_state",
    "load_driver",
    "location",
    "on_live_connection",
    "pool_location",
    "pool_opener",
    "pool_user",
    "quote",
    "server_identity",
]

_T = TypeVar("_T")

SCHEMES: Final = ("postgresql", "postgres")
INSTALL_HINT: Final = "pip install 'agents-reconcile[postgres]'"
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Connection parameters that say where the database is (and nothing secret).
_PLACE_PARAMETERS: Final = ("host", "port", "dbname", "database")
DROP_ATTEMPTS: Final = 5
"""How many times a drop the server ended as a deadlock is made (see ``PostgresSchema.drop``)."""


class Connection(Protocol):
    """The part of ``asyncpg.Connection`` journals and stores use (asyncpg ships no types)."""

    async def execute(self, query: str, *args: object) -> str: ...

    async def fetch(self, query: str, *args: object) -> list[Any]: ...

    async def fetchrow(self, query: str, *args: object) -> Any: ...

    async def fetchval(self, query: str, *args: object) -> Any: ...

    def transaction(self, *, readonly: bool = False) -> AbstractAsyncContextManager[object]: ...


def load_driver(what: str) -> Any:
    """asyncpg, or a ``ConfigurationError`` saying what to install for ``what``."""
    try:
        # By name: asyncpg is optional and ships no type information.
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise ConfigurationError(f"{what} needs the asyncpg driver: {INSTALL_HINT}") from exc


async def on_live_connection(
    driver: Any, pool: Any, call: Callable[[], Awaitable[_T]], *, again: bool
) -> _T:
    """``call()``, through ``pool``, on a connection that is still there.

    A connection the server ended (a terminated backend, a restart) can be handed out again by
    the driver's pool, which then raises ``InternalClientError`` ("another operation is in
    progress"), an error that says nothing of the database. The pool's connections are then
    replaced (expired), and ``call`` made once more when it may be (``again``: a read, or a
    write that is the same whenever it lands); otherwise, or when it fails the same way again,
    it is raised as what it is, the driver's ``ConnectionDoesNotExistError``: whether a write
    landed is then unknown, as after any lost connection."""
    attempts = 2 if again else 1
    for attempt in range(attempts):
        try:
            return await call()
        except driver.InternalClientError as exc:
            await pool.expire_connections()
            if attempt + 1 == attempts:
                raise driver.ConnectionDoesNotExistError(
                    f"the connection was lost and left unusable by the driver ({exc})"
                ) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def check_schema_name(schema: object) -> str:
    """``schema`` if it can name a PostgreSQL schema of ours, else a ``ConfigurationError``."""
    if (
        not isinstance(schema, str)
        or not _IDENTIFIER.fullmatch(schema)
        or len(schema.encode()) > 63
    ):
        raise ConfigurationError(
            "schema must be an SQL identifier (letters, digits and underscores, not starting "
            f"with a digit, at most 63 bytes), not {schema!r}"
        )
    if schema.lower().startswith("pg_"):
        raise ConfigurationError(f"schema names starting with pg_ are reserved: {schema!r}")
    return schema


def check_scheme(url: str, what: str) -> None:
    """``url`` as a PostgreSQL ``what`` (journal, store) address: its scheme, then every part
    as asyncpg reads it (``addresses``); a ``ConfigurationError`` naming the wrong part."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        raise ConfigurationError(
            f"a PostgreSQL {what} URL starts with postgresql://, not {scheme or '(none)'}://"
        )
    check_address(url, what=what)


def location(url: str) -> str:
    """Which database ``url`` names: no user, no password, no parameter but those saying
    where it is. Part of a store's identity, so it must not change between releases."""
    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2].lower()
    kept = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() in _PLACE_PARAMETERS]
    return urlunsplit(("postgresql", hosts, parts.path, urlencode(kept), ""))


def pool_location(pool: Any) -> str:
    """Where a pool made by the caller connects, as far as it tells (best effort: a URL
    knows for sure)."""
    args = getattr(pool, "_connect_args", None) or ()
    kwargs = getattr(pool, "_connect_kwargs", None) or {}
    dsn = args[0] if args and isinstance(args[0], str) else kwargs.get("dsn")
    if isinstance(dsn, str) and dsn:
        return location(dsn)
    host, port, database = kwargs.get("host"), kwargs.get("port"), kwargs.get("database")
    netloc = "" if host is None else str(host) + ("" if port is None else f":{port}")
    return urlunsplit(("postgresql", netloc.lower(), f"/{database or ''}", "", ""))


def pool_user(pool: Any) -> str | None:
    """The role a pool made by the caller connects as, as far as it tells (its URL's user, or
    its ``user`` argument); never the password."""
    args = getattr(pool, "_connect_args", None) or ()
    kwargs = getattr(pool, "_connect_kwargs", None) or {}
    user = kwargs.get("user")
    if isinstance(user, str) and user:
        return user
    dsn = args[0] if args and isinstance(args[0], str) else kwargs.get("dsn")
    return user_of(dsn) if isinstance(dsn, str) else None


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    """Which server, database and role a connection reaches, as the server itself reports it.

    ``system`` is the cluster's system identifier (``pg_control_system()``), fixed when its data
    directory was made; ``started`` when its postmaster started, which tells apart clusters
    copied from one data directory (a restored backup, a promoted replica, containers of one
    image) that run side by side; ``database`` and ``role`` what the connection is in and is
    (``current_database()``, ``current_user``). Equal values reach one database as one role,
    so a statement sent through either connection can touch what the other's can, whatever
    the addresses, host names or client options that led there."""

    system: int
    started: datetime
    database: str
    role: str

    def restarted(self, other: ServerIdentity) -> bool:
        """Whether ``other`` is this same database and role on this cluster, started again
        since one of them was read."""
        return (self.system, self.database, self.role) == (other.system, other.database, other.role)


_IDENTITY: Final = (
    "SELECT c.system_identifier, pg_postmaster_start_time(), current_database(), current_user"
    " FROM pg_control_system() AS c"
)
# What a server answers when the identity cannot be read there (a role not allowed to read
# the control file's data, a server without the function): no identity, so never fused.
_NO_IDENTITY: Final = frozenset({"42501", "42883"})
_LEARNED_KEY: Final = "server-identity"


async def server_identity(
    pool: Any,
    learned: dict[Hashable, object],
    *,
    acquire_timeout: float | None = None,
    fresh: bool = False,
) -> ServerIdentity | None:
    """What ``pool``'s server reports of itself (``ServerIdentity``), read once per pool and
    kept in ``learned`` (the pool's share's, ``Connections.learned``; ``fresh``: read again);
    None when the server does not tell. A driver error goes up unchanged, for the caller to
    translate."""
    if fresh or _LEARNED_KEY not in learned:
        async with pool.acquire(timeout=acquire_timeout) as conn:
            try:
                row = await conn.fetchrow(_IDENTITY)
            except Exception as exc:
                if getattr(exc, "sqlstate", None) not in _NO_IDENTITY:
                    raise
                row = None
        learned[_LEARNED_KEY] = None if row is None else ServerIdentity(*row)
    found = learned[_LEARNED_KEY]
    assert found is None or isinstance(found, ServerIdentity)
    return found


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def advisory_key(schema: str) -> int:
    """The signed 64-bit ``pg_advisory_xact_lock`` key taken to change ``schema``."""
    digest = hashlib.blake2b(f"agents-reconcile/migrate/{schema}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


async def keep_session_state(connection: object) -> None:
    """The pools' reset on release. Journals and stores leave no session state behind (no
    SET, no LISTEN, no session-level advisory lock or cursor; their SET and locks are
    transaction-scoped), so a connection goes back without the default reset query, which
    would cost a round trip per operation. asyncpg still rolls back a transaction left open
    before calling this."""


def pool_opener(driver: Any, url: str, options: dict[str, Any]) -> Opener[Any]:
    """How to open, close and abandon an asyncpg pool on ``url`` (kept with a lane for
    back-to-back operations, ``lane.LanedPool``)."""

    async def open_pool() -> Any:
        return LanedPool(await driver.create_pool(url, **options))

    async def close_pool(pool: Any) -> None:
        await pool.close()

    return Opener(open_pool, close_pool, lambda pool: pool.terminate())


@dataclass(frozen=True, slots=True)
class _Status:
    """What a PostgreSQL schema holds, as a read of the catalog sees it."""

    exists: bool
    version: int | None
    """The highest step recorded; None when there is no version table."""
    tables: frozenset[str]


class PostgresSchema:
    """``schema`` (the model) kept in the PostgreSQL schema ``name``, its steps recorded in
    ``version_table``; ``tables`` are those the current version must hold. ``location`` (an
    address without credentials) names the database in messages; ``acquire_timeout`` bounds
    the wait for a pooled connection."""

    def __init__(
        self,
        schema: Schema,
        name: str,
        *,
        version_table: str,
        tables: tuple[str, ...],
        location: str,
        acquire_timeout: float | None = None,
    ) -> None:
        self.schema, self.name, self.tables = schema, name, frozenset(tables)
        self.acquire_timeout = acquire_timeout
        self.version_table, self.location = version_table, location
        self.where = f"schema {name} in {location}"
        self.key = (schema.component, name)
        self.quoted = quote(name)
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        q = self.quoted
        self._inspect = (
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1),"
            " to_regclass($2::text) IS NOT NULL,"
            " ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind IN ('r', 'p'))"
        )
        self._max_version = f"SELECT max(version) FROM {q}.{version_table}"
        self._add_version = (
            f"INSERT INTO {q}.{version_table} (version, name, applied_at) VALUES ($1, $2, now())"
        )
        self._create_versions = (
            f"CREATE TABLE IF NOT EXISTS {q}.{version_table} (version integer PRIMARY KEY,"
            " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )

    def _gate(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def _status(self, conn: Any) -> _Status:
        row = await conn.fetchrow(self._inspect, self.name, f"{self.quoted}.{self.version_table}")
        version: int | None = None
        if row[1]:
            found = await conn.fetchval(self._max_version)
            if found is not None and not isinstance(found, int):
                raise self.schema.unreadable(self.where, found)
            version = 0 if found is None else found
        return _Status(bool(row[0]), version, frozenset(row[2] or ()))

    def _problem(self, status: _Status) -> tuple[str | None, bool]:
        """Why the schema cannot be used (None when it can), and whether migrating fixes it."""
        if not status.exists:
            return (
                f"schema {self.name} does not exist in {self.location}, so it "
                f"has no {self.schema.noun}; {MIGRATE_HINT}",
                True,
            )
        if status.version is None:
            foreign = sorted(status.tables & self.tables)
            if foreign:
                return (
                    f"{self.where} has table {', '.join(foreign)} but no {self.version_table}: "
                    f"it is not a {self.schema.component} this release made",
                    False,
                )
        problem = self.schema.problem(self.where, status.version)
        if problem is not None:
            return problem, status.version is None or status.version < self.schema.version
        absent = sorted(self.tables - status.tables)
        if absent:
            return (
                f"{self.where} is at {self.schema.noun} version {status.version} but lacks "
                f"table {', '.join(absent)}: it was damaged",
                False,
            )
        return None, False

    async def inspect(self, conn: Any) -> tuple[str | None, bool]:
        """``_problem`` of the schema, read in a read-only transaction: no DDL, no write. One
        snapshot (repeatable read) for the tables and the version: read in two, a step another
        worker commits between them shows the new version without the step's tables, which
        would read as a damaged schema."""
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            status = await self._status(conn)
        return self._problem(status)

    async def version(self, conn: Any) -> int | None:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            return (await self._status(conn)).version

    async def apply(self, conn: Any) -> list[str]:
        """Apply the missing steps in one transaction under the schema's advisory lock."""
        applied: list[str] = []
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", advisory_key(self.name))
            status = await self._status(conn)
            problem, migratable = self._problem(status)
            if problem is None:
                return applied
            if not migratable:
                raise self.schema.error(problem)
            current = status.version or 0
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.quoted}")
            await conn.execute(self._create_versions)
            await conn.execute(f"SET LOCAL search_path TO {self.quoted}")
            for number, step in enumerate(self.schema.missing(current), start=current + 1):
                await conn.execute(self.schema.sql(step))
                await conn.execute(self._add_version, number, step)
                applied.append(self.schema.applied(number))
        return applied

    async def ensure(self, pool: Any, verified: set[Any], *, migrate: bool) -> None:
        """Check the schema once per ``verified`` (a store keeps one per pool, a journal one
        of its own), applying what is missing when ``migrate``; raise ``schema.error`` when
        it cannot be used."""
        if self.key in verified:
            return
        async with self._gate():
            if self.key in verified:
                return
            async with pool.acquire(timeout=self.acquire_timeout) as conn:
                problem, migratable = await self.inspect(conn)
                if problem is not None:
                    if not (migrate and migratable):
                        raise self.schema.error(problem)
                    await self.apply(conn)
            verified.add(self.key)

    async def migrate(self, pool: Any, verified: set[Any]) -> list[str]:
        async with pool.acquire(timeout=self.acquire_timeout) as conn:
            applied = await self.apply(conn)
        verified.add(self.key)
        return applied

    async def drop(self, pool: Any, verified: set[Any]) -> None:
        """Drop the schema and everything in it (for tests and operators).

        The drop locks the schema's tables one at a time. A statement still running on them
        (another worker's, or a clearing this process left in the background) may hold one it
        has not reached yet while it waits for one the drop holds: the server then ends one of
        the two as a deadlock. When it ends the drop, nothing was dropped, and the drop is
        made again once the other has gone on (at most ``DROP_ATTEMPTS`` times)."""
        deadlock = load_driver("dropping a PostgreSQL schema").exceptions.DeadlockDetectedError
        for attempt in range(1, DROP_ATTEMPTS + 1):
            try:
                async with pool.acquire(timeout=self.acquire_timeout) as conn, conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", advisory_key(self.name))
                    await conn.execute(f"DROP SCHEMA IF EXISTS {self.quoted} CASCADE")
                break
            except deadlock:
                if attempt == DROP_ATTEMPTS:
                    raise
        verified.discard(self.key)
        # Statements prepared against the dropped tables must not be reused.
        await pool.expire_connections()
