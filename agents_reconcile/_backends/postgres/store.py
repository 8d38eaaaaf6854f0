"""``RevisionedPostgresSession``: a revisioned SDK session in a PostgreSQL schema.

Driver. asyncpg runs on the event loop itself (no thread pool in between), exchanges values
in PostgreSQL's binary format, and keeps each connection's statements prepared in a cache, so
the handful of statements this store runs are parsed and planned once per connection. A
statement with several data-changing parts (a CTE) goes out as one message and comes back as
one reply: the conditional append below costs one round trip. It is also the driver the SDK's
own SQLAlchemy session runs on for PostgreSQL, so comparing the two measures the storage
design, not two drivers.

Layout (schema ``agents_reconcile`` unless told otherwise; see ``store_schema/``):
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
connection, a terminated backend, a timeout) reaches the caller as the driver's own error:
such a write may or may not have landed, and ``ReconcilingSession`` settles it by its write
id. A connection the server ended that the driver's pool hands out again is replaced, a read
made again once on a new one, and a lost connection is reported as one
(``ConnectionDoesNotExistError``), never as the driver's internal error.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from functools import partial
from typing import Any, Final

from ..._core.revision import WriteRecord
from ...errors import ConfigurationError, RevisionConflict, SchemaMismatch
from ..addresses import user_of
from ..connections import Connections
from ..schema import Schema
from ..store_items import ANONYMOUS, decode_item, encode_item, new_write_id, valid_limit
from .backend import (
    PostgresSchema,
    ServerIdentity,
    check_schema_name,
    check_scheme,
    keep_session_state,
    load_driver,
    location,
    on_live_connection,
    pool_location,
    pool_opener,
    pool_user,
    quote,
    server_identity,
)

__all__ = [
    "DEFAULT_SCHEMA",
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "RevisionedPostgresSession",
    "migration_steps",
]

SCHEMA: Final = Schema(
    "revisioned store",
    ("0001_initial",),
    SchemaMismatch,
    package="agents_reconcile._backends.postgres",
    folder="store_schema",
)
MIGRATIONS: Final = SCHEMA.steps
"""The schema's migration steps, oldest first: files ``store_schema/<name>.sql``."""
SCHEMA_VERSION: Final = SCHEMA.version
"""The store schema version this release reads and writes."""
DEFAULT_SCHEMA: Final = "agents_reconcile_store"
_VERSION_TABLE: Final = "store_schema_version"
_TABLES: Final = ("sessions", "items", "writes")
_WRITE_ID_CONSTRAINT: Final = "writes_write_id_key"
_REMEMBERED_ROWS: Final = 65536


def migration_steps() -> tuple[tuple[str, str], ...]:
    """The schema's migration steps: (name, SQL), oldest first; step N is ``MIGRATIONS[N-1]``."""
    return tuple((step, SCHEMA.sql(step)) for step in SCHEMA.steps)


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
        self._driver = load_driver("RevisionedPostgresSession")
        if not isinstance(session_id, str):
            raise ConfigurationError(f"session_id must be a str, not {session_id!r}")
        check_schema_name(schema)
        self.session_id = session_id
        self.session_settings: Any = None
        self.schema = schema
        self._migrate_on_use = migrate
        # from_url passes the share of a pool it built; anything else is the caller's pool.
        shared = isinstance(pool, Connections)
        self._connections: Connections[Any] = pool if shared else Connections(pool)
        self._location = "" if shared else pool_location(pool)
        self._user = None if shared else pool_user(pool)
        self._sql = _Statements(quote(schema))
        self._schema = self._schema_at(self._location)

    def _schema_at(self, where: str) -> PostgresSchema:
        return PostgresSchema(
            SCHEMA, self.schema, version_table=_VERSION_TABLE, tables=_TABLES, location=where
        )

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
        check_scheme(url, "store")
        options = dict(pool_options)
        options.setdefault("min_size", 1)
        options.setdefault("max_size", max(10, int(options["min_size"])))
        # The append's compare-and-swap relies on read committed: under a stricter default
        # a losing writer would get a serialization failure instead of a clean conflict.
        settings = {"default_transaction_isolation": "read committed"}
        settings.update(options.get("server_settings") or {})
        options["server_settings"] = settings
        options.setdefault("reset", keep_session_state)
        opener = pool_opener(load_driver("RevisionedPostgresSession"), url, options)
        key = ("postgres-store", url, repr(sorted(options.items())))
        store = cls(session_id, Connections(key=key, opener=opener), schema=schema, migrate=migrate)
        store._location = location(url)
        given = options.get("user")
        store._user = user_of(url) or (given if isinstance(given, str) and given else None)
        store._schema = store._schema_at(store._location)
        return store

    @classmethod
    def from_address(
        cls,
        session_id: str,
        address: str,
        *,
        namespace: str | None = None,
        migrate: bool = True,
    ) -> RevisionedPostgresSession:
        """The store the registry opens for ``address``; ``namespace`` is the schema."""
        return cls.from_url(
            session_id, address, schema=namespace or DEFAULT_SCHEMA, migrate=migrate
        )

    def __repr__(self) -> str:
        return f"RevisionedPostgresSession({self.session_id!r}, {self.backend_namespace!r})"

    @property
    def backend_namespace(self) -> str:
        """Which store this is, without credentials: the database address and the schema."""
        return f"{self._location};schema={self.schema}"

    @property
    def backend_user(self) -> str | None:
        """The role it connects as, where its address (or pool) names one: kept in its
        intents' records beside the identity, so that an operator reopens the store as the
        application does (never the password)."""
        return self._user

    # -- connections and schema ------------------------------------------------------------

    async def ready(self) -> None:
        """Make the store usable: its pool open and its schema checked (or migrated, as
        configured) once per pool. Every operation does it first; a statement that writes the
        store's tables from elsewhere (the fused append) calls it before."""
        connections = self._connections
        if connections.current() is None or self._schema.key not in connections.verified:
            await self._ready()

    async def _ready(self) -> Any:
        """The pool, with the schema checked (or migrated) once per pool."""
        pool = await self._connections.get()
        await self._schema.ensure(pool, self._connections.verified, migrate=self._migrate_on_use)
        return pool

    async def close(self) -> None:
        """Release what this object holds: its share of a pool opened by ``from_url`` (the
        last user closes it). A pool passed in stays open. A later operation reopens."""
        await self._connections.release()

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current).
        Refuses (``SchemaMismatch``) a newer or damaged schema."""
        pool = await self._connections.get()
        return await self._schema.migrate(pool, self._connections.verified)

    async def check(self) -> str | None:
        """None when the schema is at this release's version; else what is wrong. Runs no
        DDL and writes nothing (a read-only transaction)."""
        pool = await self._connections.get()
        async with pool.acquire() as conn:
            problem, _ = await self._schema.inspect(conn)
        return problem

    async def schema_version(self) -> int | None:
        """The version recorded in the schema (None when it holds none); writes nothing."""
        pool = await self._connections.get()
        async with pool.acquire() as conn:
            return await self._schema.version(conn)

    async def drop(self) -> None:
        """Drop the schema and everything in it, CASCADE (for tests and operators)."""
        pool = await self._connections.get()
        await self._schema.drop(pool, self._connections.verified)
        _forget_rows(self.backend_namespace)

    async def server(self, *, fresh: bool = False) -> ServerIdentity | None:
        """Which server, database and role this store's pool reaches, as the server reports
        it (``backend.server_identity``: read once per pool; ``fresh``: read again)."""
        pool = await self._connections.get()
        return await server_identity(pool, self._connections.learned, fresh=fresh)

    # -- writes --------------------------------------------------------------------------

    async def _ensure_row(self, pool: Any) -> None:
        """Create the session's row (at revision 0) once per process."""
        if _row_known(self.backend_namespace, self.session_id):
            return
        await self._read(pool, "execute", self._sql.ensure_row, self.session_id)
        _remember_row(self.backend_namespace, self.session_id)

    async def _append(
        self, items: list[Any], *, expected: int | None, write_id: str, writer: str
    ) -> int:
        rows = [encode_item(item, index).decode() for index, item in enumerate(items)]
        pool = await self._ready()
        await self._ensure_row(pool)
        for attempt in range(2):
            args: tuple[Any, ...] = (self.session_id, rows, write_id, writer, time.time())
            statement = (
                (self._sql.append, *args)
                if expected is None
                else (self._sql.append_if, *args, expected)
            )
            try:
                # Not made again: a write whose connection dropped may have landed.
                revision = await on_live_connection(
                    self._driver, pool, partial(pool.fetchval, *statement), again=False
                )
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

            async def locked() -> Any:
                async with pool.acquire() as conn, conn.transaction(isolation="read_committed"):
                    if await conn.fetchval(self._sql.lock_row, self.session_id) is None:
                        raise _MissingRow
                    return await conn.fetchval(
                        statement, self.session_id, write_id, ANONYMOUS, time.time()
                    )

            try:
                return await on_live_connection(self._driver, pool, locked, again=False)
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

    async def _read(self, pool: Any, method: str, statement: str, *args: Any) -> Any:
        """A read, or a write the same whenever it lands, through ``pool`` (``fetch``,
        ``fetchrow``, ``fetchval``, ``execute``), on a live connection
        (``backend.on_live_connection``: made again once after a dropped one)."""
        run = partial(getattr(pool, method), statement, *args)
        return await on_live_connection(self._driver, pool, run, again=True)

    async def _head_or_none(self, pool: Any) -> int | None:
        found = await self._read(pool, "fetchval", self._sql.head, self.session_id)
        return None if found is None else int(found)

    async def head(self) -> int:
        return await self._head_or_none(await self._ready()) or 0

    async def get_items(self, limit: int | None = None) -> list[Any]:
        limit = valid_limit(limit)
        if limit == 0:
            return []
        pool = await self._ready()
        if limit is None:
            rows = await self._read(pool, "fetch", self._sql.items, self.session_id)
            return [decode_item(row[0]) for row in rows]
        rows = await self._read(pool, "fetch", self._sql.tail, self.session_id, limit)
        return [decode_item(row[0]) for row in reversed(rows)]

    async def find_write(self, write_id: str) -> WriteRecord | None:
        pool = await self._ready()
        row = await self._read(pool, "fetchrow", self._sql.find_write, self.session_id, write_id)
        return None if row is None else _record(row)

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        if limit <= 0:
            return []
        pool = await self._ready()
        rows = await self._read(
            pool, "fetch", self._sql.writes_after, self.session_id, revision, limit
        )
        return [_record(row) for row in rows]


class _Statements:
    """Every statement the store runs, with its schema's quoted name in place."""

    def __init__(self, schema: str) -> None:
        s = self.schema = schema
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


# Its public name: the identity a journal records for this store (``BackendIdentity.kind``)
# does not change when the file that defines it moves.
RevisionedPostgresSession.__module__ = "agents_reconcile"
