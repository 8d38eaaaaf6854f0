"""``RevisionedPostgresSession``: a revisioned SDK session in a PostgreSQL schema.

Driver. asyncpg runs on the event loop itself (no thread pool in between), exchanges values
in PostgreSQL's binary format, and keeps each connection's statements prepared in a cache, so
the handful of statements this store runs are parsed and planned once per connection. A
statement with several data-changing parts (a CTE) goes out as one message and comes back as
one reply: the conditional append below costs one round trip. It is also the driver the SDK's
own SQLAlchemy session runs on for PostgreSQL, so comparing the two measures the storage
design, not two drivers.

Layout (schema ``agents_reconcile`` unless told otherwise; see ``postgres_schema/``):
``sessions`` holds each session's head revision and next item number, ``items`` the items as
JSON text (one row each, the way the SDK stores them), ``writes`` one record per write, and
``store_schema_version`` the migration steps applied.

Writes. Each write is one transaction. ``append_if`` and ``add_items`` are one statement: a
CTE whose ``UPDATE`` of the session row moves the head (only from the expected revision, for
``append_if``) and whose two ``INSERT``\\ s, the items and the write record, take their
revision and numbers from that ``UPDATE``'s ``RETURNING``: when the head differs, nothing is
inserted; when the write id is already recorded, the unique constraint fails the whole
statement. ``pop_item`` and ``clear_session`` lock the session row first, then change items,
head and record in one statement that sees everything committed before the lock.

Errors. A ``RevisionConflict`` means nothing was written. Anything the driver raises (a lost
connection, a terminated backend, a timeout) reaches the caller unchanged: such a write may
or may not have landed, and ``ReconcilingSession`` settles it by its write id.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ConfigurationError, RevisionConflict, SchemaMismatch
from ..revision import WriteRecord
from ._common import ANONYMOUS, decode_item, encode_item, new_write_id, valid_limit

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "RevisionedPostgresSession", "migration_steps"]

DEFAULT_SCHEMA: Final = "agents_reconcile_store"
_VERSION_TABLE: Final = "store_schema_version"
_TABLES: Final = ("sessions", "items", "writes", _VERSION_TABLE)
_WRITE_ID_CONSTRAINT: Final = "writes_write_id_key"
_STEP_FILE: Final = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_MIGRATE_HINT: Final = "run `agents-reconcile migrate`"
_INSTALL_HINT: Final = "pip install 'agents-reconcile[postgres]'"
_CLOSE_TIMEOUT: Final = 5.0
_REMEMBERED_ROWS: Final = 65536


@functools.cache
def migration_steps() -> tuple[tuple[str, str], ...]:
    """The schema's migration steps shipped in ``postgres_schema/``: (name, SQL), oldest
    first; step N is file ``000N_*.sql``."""
    folder = resources.files(__package__ or "agents_reconcile.stores").joinpath("postgres_schema")
    try:
        found = sorted(
            (int(match.group(1)), entry.name[: -len(".sql")], entry)
            for entry in folder.iterdir()
            if (match := _STEP_FILE.fullmatch(entry.name))
        )
        steps = tuple((name, entry.read_text(encoding="utf-8")) for _, name, entry in found)
    except OSError as exc:
        raise ConfigurationError(
            f"this installation of agents-reconcile lacks its PostgreSQL store schema: {exc}"
        ) from exc
    numbers = [number for number, _, _ in found]
    if not numbers or numbers != list(range(1, len(numbers) + 1)):
        raise ConfigurationError(
            f"the PostgreSQL store's migration steps are not numbered 1..N: {numbers}"
        )
    return steps


SCHEMA_VERSION: Final = len(migration_steps())
"""The store schema version this release reads and writes."""


def _driver() -> Any:
    try:
        # By name: asyncpg is an optional dependency and ships no type information.
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise ConfigurationError(
            f"RevisionedPostgresSession needs the asyncpg driver: {_INSTALL_HINT}"
        ) from exc


# -- shared pools --------------------------------------------------------------------------


async def _keep_session_state(connection: Any) -> None:
    """Pool reset for the pools this module opens: the store leaves no session state behind
    (no SET, no LISTEN, no session-level advisory lock, transactions always closed), so a
    connection goes back to the pool without the default reset query's round trip. asyncpg
    still rolls back a transaction left open before calling this."""


async def _open_pool(url: str, options: dict[str, Any]) -> Any:
    return await _driver().create_pool(url, **options)


@dataclass(eq=False)
class _SharedPool:
    """One pool for every store object of a URL (and options) in one event loop."""

    loop: asyncio.AbstractEventLoop
    key: tuple[str, str]
    opening: asyncio.Task[Any]
    users: int = 0
    verified: set[str] = field(default_factory=set)
    """Schemas found current through this pool (checked once per pool, not per object)."""

    async def pool(self) -> Any:
        return await asyncio.shield(self.opening)


_POOLS: dict[tuple[asyncio.AbstractEventLoop, tuple[str, str]], _SharedPool] = {}


def _take_shared(url: str, options: dict[str, Any]) -> _SharedPool:
    """The shared pool for ``url`` in the running loop (opening it if needed), with one more
    user. Synchronous, so concurrent first uses of one object cannot take two."""
    loop = asyncio.get_running_loop()
    for stale in [k for k, shared in _POOLS.items() if shared.loop.is_closed()]:
        # A pool whose event loop is gone cannot be closed politely any more.
        abandoned = _POOLS.pop(stale)
        task = abandoned.opening
        if task.done() and not task.cancelled() and task.exception() is None:
            with contextlib.suppress(Exception):
                task.result().terminate()
    key = (url, repr(sorted(options.items())))
    shared = _POOLS.get((loop, key))
    if shared is None:
        opening = loop.create_task(_open_pool(url, options))
        shared = _POOLS[(loop, key)] = _SharedPool(loop, key, opening)

        def opened(task: asyncio.Task[Any], shared: _SharedPool = shared) -> None:
            # Not usable: the next use opens a new one.
            failed = task.cancelled() or task.exception() is not None
            if failed and _POOLS.get((shared.loop, shared.key)) is shared:
                del _POOLS[(shared.loop, shared.key)]

        opening.add_done_callback(opened)
    shared.users += 1
    return shared


async def _give_back(shared: _SharedPool) -> None:
    """One user fewer; the last one closes the pool."""
    shared.users -= 1
    if shared.users > 0:
        return
    if _POOLS.get((shared.loop, shared.key)) is shared:
        del _POOLS[(shared.loop, shared.key)]
    try:
        pool = await shared.pool()
    except Exception:
        return  # it never opened: nothing to close
    try:
        await asyncio.wait_for(pool.close(), _CLOSE_TIMEOUT)
    except BaseException as exc:
        # Closing politely failed (a dead server, a connection still in use): drop the
        # connections instead. Only a cancellation goes on up.
        pool.terminate()
        if not isinstance(exc, Exception):
            raise


# -- sessions whose row is known to exist ---------------------------------------------------

_ROWS: OrderedDict[tuple[str, str], None] = OrderedDict()


def _row_known(namespace: str, session_id: str) -> bool:
    key = (namespace, session_id)
    if key in _ROWS:
        _ROWS.move_to_end(key)
        return True
    return False


def _remember_row(namespace: str, session_id: str) -> None:
    _ROWS[(namespace, session_id)] = None
    _ROWS.move_to_end((namespace, session_id))
    while len(_ROWS) > _REMEMBERED_ROWS:
        _ROWS.popitem(last=False)


def _forget_rows(namespace: str, session_id: str | None = None) -> None:
    if session_id is not None:
        _ROWS.pop((namespace, session_id), None)
        return
    for key in [key for key in _ROWS if key[0] == namespace]:
        del _ROWS[key]


class _MissingRow(Exception):
    """The session's row is gone although this process created it (the schema was dropped
    and made again, or an operator deleted it): create it again and retry once."""


# -- the store -----------------------------------------------------------------------------


class RevisionedPostgresSession:
    """A full SDK ``Session`` (usable with ``Runner.run`` directly) that is also a
    ``RevisionedStore``, in a PostgreSQL schema shared by any number of processes.

    ``pool`` is an asyncpg pool the caller owns (``close()`` leaves it open; note that
    asyncpg's default reset on release costs a round trip per operation); ``from_url``
    builds objects that share one pool per URL, options and event loop, closed when the
    last of them is closed. On first use the schema is created or upgraded (under an
    advisory lock) unless ``migrate=False``, which refuses a missing or older schema; a
    newer schema is always refused (``SchemaMismatch``).
    """

    def __init__(
        self,
        session_id: str,
        pool: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
    ) -> None:
        self._driver = _driver()
        if not isinstance(session_id, str):
            raise ConfigurationError(f"session_id must be a str, not {session_id!r}")
        _check_schema_name(schema)
        self.session_id = session_id
        self.session_settings: Any = None
        self.schema = schema
        self._migrate_on_use = migrate
        self._pool: Any = pool
        self._url: str | None = None
        self._pool_options: dict[str, Any] = {}
        self._shared: _SharedPool | None = None
        self._verified: set[str] = set()
        self._location = _pool_location(pool) if pool is not None else ""
        self._sql = _Statements(_quote(schema))

    @classmethod
    def from_url(
        cls,
        session_id: str,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
        **pool_options: Any,
    ) -> RevisionedPostgresSession:
        """A store on the database ``url`` names (``postgresql://user@host:port/db``).

        ``pool_options`` go to ``asyncpg.create_pool`` (defaults here: ``min_size=1``,
        ``max_size=10``, read-committed transactions); objects with the same URL, options
        and event loop share one pool. Nothing connects before the first operation."""
        scheme = urlsplit(url).scheme.lower()
        if scheme not in ("postgresql", "postgres"):
            raise ConfigurationError(
                f"a PostgreSQL store URL starts with postgresql://, not {scheme or '(none)'}://"
            )
        store = cls(session_id, None, schema=schema, migrate=migrate)
        options = dict(pool_options)
        options.setdefault("min_size", 1)
        options.setdefault("max_size", max(10, int(options["min_size"])))
        # The append's compare-and-swap relies on read committed: under a stricter default
        # a losing writer would get a serialization failure instead of a clean conflict.
        settings = {"default_transaction_isolation": "read committed"}
        settings.update(options.get("server_settings") or {})
        options["server_settings"] = settings
        options.setdefault("reset", _keep_session_state)
        store._url = url
        store._pool_options = options
        store._location = _url_location(url)
        return store

    def __repr__(self) -> str:
        return f"RevisionedPostgresSession({self.session_id!r}, {self.backend_namespace!r})"

    @property
    def backend_namespace(self) -> str:
        """Which store this is, without credentials: the database address and the schema."""
        return f"{self._location};schema={self.schema}"

    # -- connections ---------------------------------------------------------------------

    async def _connections(self) -> Any:
        """The pool to use in the running event loop."""
        if self._url is None:
            return self._pool
        loop = asyncio.get_running_loop()
        shared = self._shared
        if shared is not None and shared.loop is not loop:
            # Used from another event loop than before: that pool cannot serve this one.
            self._shared = None
            shared.users -= 1
            shared = None
        if shared is None:
            shared = self._shared = _take_shared(self._url, self._pool_options)
        try:
            return await shared.pool()
        except BaseException:
            if self._shared is shared and shared.opening.done():
                self._shared = None
                shared.users -= 1
            raise

    def _verified_schemas(self) -> set[str]:
        return self._shared.verified if self._shared is not None else self._verified

    async def _ready(self) -> Any:
        """The pool, with the schema checked (or migrated) once."""
        pool = await self._connections()
        if self.schema in self._verified_schemas():
            return pool
        async with pool.acquire() as conn:
            problem, migratable = await self._inspect(conn)
            if problem is not None:
                if not (self._migrate_on_use and migratable):
                    raise SchemaMismatch(problem)
                await self._apply(conn)
        self._verified_schemas().add(self.schema)
        return pool

    async def close(self) -> None:
        """Release what this object holds: its share of a pool opened by ``from_url`` (the
        last user closes it). A pool passed in stays open. A later operation reopens."""
        shared, self._shared = self._shared, None
        self._verified.clear()
        if shared is None:
            return
        if shared.loop is not asyncio.get_running_loop() or shared.loop.is_closed():
            shared.users -= 1
            return
        await _give_back(shared)

    # -- schema --------------------------------------------------------------------------

    def _where(self) -> str:
        return f"schema {self.schema} in {self._location}"

    async def _status(self, conn: Any) -> tuple[int | None, set[str]]:
        """The version recorded in the schema (None without a version table) and the tables
        it holds. Reads the catalog and the version table only."""
        row = await conn.fetchrow(
            self._sql.inspect, f"{self._sql.schema}.{_VERSION_TABLE}", self.schema
        )
        version: int | None = None
        if row["versioned"]:
            found = await conn.fetchval(self._sql.max_version)
            version = 0 if found is None else int(found)
        return version, set(row["tables"] or ())

    def _problem(self, version: int | None, tables: set[str]) -> tuple[str | None, bool]:
        """What is wrong with the schema (None when current), and whether migrating fixes
        it."""
        if version is None:
            foreign = sorted(tables & set(_TABLES))
            if foreign:
                return (
                    f"{self._where()} has table {', '.join(foreign)} but no "
                    f"{_VERSION_TABLE}: it is not a revisioned store this release made",
                    False,
                )
            return f"{self._where()} has no revisioned-store schema; {_MIGRATE_HINT}", True
        if version > SCHEMA_VERSION:
            return (
                f"{self._where()} has revisioned-store schema version {version}, newer than "
                f"this release's {SCHEMA_VERSION}; upgrade agents-reconcile",
                False,
            )
        if version < SCHEMA_VERSION:
            missing = ", ".join(name for name, _ in migration_steps()[version:])
            return (
                f"{self._where()} has revisioned-store schema version {version}, older than "
                f"this release's {SCHEMA_VERSION} (missing {missing}); {_MIGRATE_HINT}",
                True,
            )
        absent = sorted(set(_TABLES) - tables)
        if absent:
            return (
                f"{self._where()} is at revisioned-store schema version {version} but lacks "
                f"table {', '.join(absent)}: it was damaged",
                False,
            )
        return None, False

    async def _inspect(self, conn: Any) -> tuple[str | None, bool]:
        """``_problem`` of the schema, read in a read-only transaction."""
        async with conn.transaction(readonly=True):
            version, tables = await self._status(conn)
        return self._problem(version, tables)

    async def _apply(self, conn: Any) -> list[str]:
        """Apply the missing steps in one transaction, under an advisory lock on the schema's
        name: workers starting together wait for each other, and each re-reads the version
        once it holds the lock, so a step is applied once."""
        applied: list[str] = []
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(self.schema))
            version, tables = await self._status(conn)
            problem, migratable = self._problem(version, tables)
            if problem is None:
                return applied
            if not migratable:
                raise SchemaMismatch(problem)
            current = version or 0
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self._sql.schema}")
            await conn.execute(f"SET LOCAL search_path TO {self._sql.schema}")
            for number, (name, sql) in enumerate(migration_steps()[current:], start=current + 1):
                await conn.execute(sql)
                await conn.execute(self._sql.add_version, number, name)
                applied.append(name)
        return applied

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current).
        Refuses (``SchemaMismatch``) a newer or damaged schema."""
        pool = await self._connections()
        async with pool.acquire() as conn:
            applied = await self._apply(conn)
        self._verified_schemas().add(self.schema)
        return applied

    async def check(self) -> str | None:
        """None when the schema is at this release's version; else what is wrong. Runs no
        DDL and writes nothing (a read-only transaction)."""
        pool = await self._connections()
        async with pool.acquire() as conn:
            problem, _ = await self._inspect(conn)
        return problem

    async def drop(self) -> None:
        """Drop the schema and everything in it, CASCADE (for tests and operators)."""
        pool = await self._connections()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(self.schema))
            await conn.execute(f"DROP SCHEMA IF EXISTS {self._sql.schema} CASCADE")
        self._verified_schemas().discard(self.schema)
        _forget_rows(self.backend_namespace)
        # Statements prepared against the dropped tables must not be reused.
        await pool.expire_connections()

    # -- writes --------------------------------------------------------------------------

    async def _ensure_row(self, pool: Any) -> None:
        """Create the session's row (at revision 0) once per process."""
        if _row_known(self.backend_namespace, self.session_id):
            return
        await pool.execute(self._sql.ensure_row, self.session_id)
        _remember_row(self.backend_namespace, self.session_id)

    async def _append(
        self, items: list[Any], *, expected: int | None, write_id: str, writer: str
    ) -> int:
        rows = [encode_item(item, index).decode() for index, item in enumerate(items)]
        pool = await self._ready()
        await self._ensure_row(pool)
        for attempt in range(2):
            args: tuple[Any, ...] = (self.session_id, rows, write_id, writer, time.time())
            try:
                if expected is None:
                    revision = await pool.fetchval(self._sql.append, *args)
                else:
                    revision = await pool.fetchval(self._sql.append_if, *args, expected)
            except self._driver.UniqueViolationError as exc:
                if getattr(exc, "constraint_name", None) != _WRITE_ID_CONSTRAINT:
                    raise
                actual = await self._head_or_none(pool) or 0
                raise RevisionConflict(
                    f"write {write_id} is already recorded for session {self.session_id!r}",
                    expected=actual if expected is None else expected,
                    actual=actual,
                ) from exc
            if revision is not None:
                return int(revision)
            # The UPDATE matched no row: another head, or no row at all.
            head = await self._head_or_none(pool)
            if head is None and attempt == 0:
                _forget_rows(self.backend_namespace, self.session_id)
                await self._ensure_row(pool)
                continue
            actual = head or 0
            raise RevisionConflict(
                f"session {self.session_id!r} is at revision {actual}, not {expected}",
                expected=actual if expected is None else expected,
                actual=actual,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        return await self._append(items, expected=expected, write_id=write_id, writer=writer)

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        await self._append(items, expected=None, write_id=new_write_id(), writer=ANONYMOUS)

    async def _locked_write(self, statement: str) -> Any:
        """Run ``statement`` (session id, write id, writer, time) in a transaction that first
        locks the session's row, so the statement's snapshot holds every write before it."""
        pool = await self._ready()
        await self._ensure_row(pool)
        write_id = new_write_id()
        for attempt in range(2):
            try:
                async with pool.acquire() as conn, conn.transaction(isolation="read_committed"):
                    if await conn.fetchval(self._sql.lock_row, self.session_id) is None:
                        raise _MissingRow
                    return await conn.fetchval(
                        statement, self.session_id, write_id, ANONYMOUS, time.time()
                    )
            except _MissingRow:
                if attempt:
                    raise RuntimeError(
                        f"the row of session {self.session_id!r} keeps disappearing"
                    ) from None
                _forget_rows(self.backend_namespace, self.session_id)
                await self._ensure_row(pool)
        raise AssertionError("unreachable")  # pragma: no cover

    async def pop_item(self) -> Any | None:
        raw = await self._locked_write(self._sql.pop)
        return None if raw is None else decode_item(raw)

    async def clear_session(self) -> None:
        await self._locked_write(self._sql.clear)

    # -- reads ---------------------------------------------------------------------------

    async def _head_or_none(self, pool: Any) -> int | None:
        found = await pool.fetchval(self._sql.head, self.session_id)
        return None if found is None else int(found)

    async def head(self) -> int:
        return await self._head_or_none(await self._ready()) or 0

    async def get_items(self, limit: int | None = None) -> list[Any]:
        limit = valid_limit(limit)
        if limit == 0:
            return []
        pool = await self._ready()
        if limit is None:
            rows = await pool.fetch(self._sql.items, self.session_id)
            return [decode_item(row[0]) for row in rows]
        rows = await pool.fetch(self._sql.tail, self.session_id, limit)
        return [decode_item(row[0]) for row in reversed(rows)]

    async def find_write(self, write_id: str) -> WriteRecord | None:
        pool = await self._ready()
        row = await pool.fetchrow(self._sql.find_write, self.session_id, write_id)
        return None if row is None else _record(row)

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        if limit <= 0:
            return []
        pool = await self._ready()
        rows = await pool.fetch(self._sql.writes_after, self.session_id, revision, limit)
        return [_record(row) for row in rows]


class _Statements:
    """Every statement the store runs, with its schema's quoted name in place."""

    def __init__(self, schema: str) -> None:
        s = self.schema = schema
        self.inspect = (
            "SELECT to_regclass($1::text) IS NOT NULL AS versioned,"
            " ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $2 AND c.relkind IN ('r', 'p')) AS tables"
        )
        self.max_version = f"SELECT max(version) FROM {s}.{_VERSION_TABLE}"
        self.add_version = f"INSERT INTO {s}.{_VERSION_TABLE} (version, name) VALUES ($1, $2)"
        self.ensure_row = (
            f"INSERT INTO {s}.sessions (session_id, revision, next_seq) VALUES ($1, 0, 0)"
            " ON CONFLICT (session_id) DO NOTHING"
        )
        self.head = f"SELECT revision FROM {s}.sessions WHERE session_id = $1"
        self.lock_row = f"SELECT revision FROM {s}.sessions WHERE session_id = $1 FOR UPDATE"
        # $1 session, $2 items (JSON text), $3 write id, $4 writer, $5 time[, $6 expected].
        # The UPDATE waits for the row lock of a concurrent write and then re-checks its
        # condition against the committed row: a stale expected revision matches nothing,
        # and the INSERTs, which read only the UPDATE's RETURNING, insert nothing.
        append = (
            "WITH head AS ("
            f" UPDATE {s}.sessions"
            " SET revision = revision + 1, next_seq = next_seq + cardinality($2::text[])"
            " WHERE session_id = $1{condition}"
            " RETURNING revision, next_seq - cardinality($2::text[]) AS first_seq"
            "), added AS ("
            f" INSERT INTO {s}.items (session_id, seq, revision, item)"
            " SELECT $1, head.first_seq + batch.ord - 1, head.revision, batch.item"
            " FROM head, unnest($2::text[]) WITH ORDINALITY AS batch(item, ord)"
            "), recorded AS ("
            f" INSERT INTO {s}.writes (session_id, revision, write_id, writer, kind, count, at)"
            " SELECT $1, head.revision, $3, $4, 'append', cardinality($2::text[]), $5"
            " FROM head"
            ") SELECT revision FROM head"
        )
        self.append = append.format(condition="")
        self.append_if = append.format(condition=" AND revision = $6::bigint")
        # Run after lock_row, in the same transaction: $1 session, $2 write id, $3 writer,
        # $4 time. Nothing to pop writes nothing.
        self.pop = (
            "WITH removed AS ("
            f" DELETE FROM {s}.items WHERE session_id = $1 AND seq = ("
            f"  SELECT max(seq) FROM {s}.items WHERE session_id = $1)"
            " RETURNING item"
            "), head AS ("
            f" UPDATE {s}.sessions SET revision = revision + 1"
            " WHERE session_id = $1 AND EXISTS (SELECT 1 FROM removed)"
            " RETURNING revision"
            "), recorded AS ("
            f" INSERT INTO {s}.writes (session_id, revision, write_id, writer, kind, count, at)"
            " SELECT $1, head.revision, $2, $3, 'pop', 1, $4 FROM head"
            ") SELECT item FROM removed"
        )
        self.clear = (
            "WITH removed AS ("
            f" DELETE FROM {s}.items WHERE session_id = $1 RETURNING seq"
            "), head AS ("
            f" UPDATE {s}.sessions SET revision = revision + 1 WHERE session_id = $1"
            " RETURNING revision"
            "), recorded AS ("
            f" INSERT INTO {s}.writes (session_id, revision, write_id, writer, kind, count, at)"
            " SELECT $1, head.revision, $2, $3, 'clear', (SELECT count(*) FROM removed), $4"
            " FROM head"
            ") SELECT revision FROM head"
        )
        self.items = f"SELECT item FROM {s}.items WHERE session_id = $1 ORDER BY seq"
        self.tail = f"SELECT item FROM {s}.items WHERE session_id = $1 ORDER BY seq DESC LIMIT $2"
        columns = "revision, write_id, writer, kind, count, at"
        self.find_write = (
            f"SELECT {columns} FROM {s}.writes WHERE session_id = $1 AND write_id = $2"
        )
        self.writes_after = (
            f"SELECT {columns} FROM {s}.writes WHERE session_id = $1 AND revision > $2"
            " ORDER BY revision LIMIT $3"
        )


# -- helpers -------------------------------------------------------------------------------


def _record(row: Any) -> WriteRecord:
    return WriteRecord(
        int(row[0]), str(row[1]), str(row[2]), str(row[3]), int(row[4]), float(row[5])
    )


def _check_schema_name(schema: str) -> None:
    if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
        raise ConfigurationError(
            "schema must be an SQL identifier (letters, digits and underscores, not starting "
            f"with a digit, at most 63 characters), not {schema!r}"
        )
    if schema.lower().startswith("pg_"):
        raise ConfigurationError(f"schema names starting with pg_ are reserved: {schema!r}")


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _lock_key(schema: str) -> int:
    """The advisory lock taken to change ``schema``. The intent journal takes the same key
    for the same schema, so the two never create one schema at the same time."""
    digest = hashlib.blake2b(f"agents-reconcile/migrate/{schema}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


# Connection parameters that say where the database is (and nothing secret).
_PLACE_PARAMETERS: Final = ("host", "port", "dbname", "database")


def _url_location(url: str) -> str:
    """``url`` without user, password or parameters other than where the database is."""
    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2].lower()
    kept = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() in _PLACE_PARAMETERS]
    return urlunsplit(("postgresql", hosts, parts.path, urlencode(kept), ""))


def _pool_location(pool: Any) -> str:
    """Where a pool passed in connects, as far as it tells (best effort: ``from_url`` knows
    for sure)."""
    args = getattr(pool, "_connect_args", None) or ()
    kwargs = getattr(pool, "_connect_kwargs", None) or {}
    dsn = args[0] if args and isinstance(args[0], str) else kwargs.get("dsn")
    if isinstance(dsn, str) and dsn:
        return _url_location(dsn)
    host, port, database = kwargs.get("host"), kwargs.get("port"), kwargs.get("database")
    netloc = "" if host is None else str(host) + ("" if port is None else f":{port}")
    return urlunsplit(("postgresql", netloc.lower(), f"/{database or ''}", "", ""))
