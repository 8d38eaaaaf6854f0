"""The shared journal: one PostgreSQL schema that every worker of a fleet reads and writes.

The driver is asyncpg. It speaks the server's protocol itself, on the event loop, with no
thread pool in between; it exchanges values in PostgreSQL's binary format rather than as
text; it prepares each statement once per connection and reuses it from a cache, which suits
a journal that runs the same dozen statements all day; it is the fastest Python driver for
PostgreSQL; and it is what the Agents SDK's own SQLAlchemy session runs on for PostgreSQL,
so an application that keeps its sessions there has it installed already.

Layout. A journal lives in a schema of its own (``agents_reconcile`` unless told otherwise):
``intents`` holds the unresolved intents, ``decisions`` every decision, ``session_writes``
the write count of each session and backend, and ``schema_version`` the migration steps
applied. Records are stored exactly as the SQLite journal stores them: the bytes of
``PendingWrite.encode()`` and ``Decision.encode()``, digest included, decoded (and so
checked) on every read.

Migrations. ``MIGRATIONS`` names SQL files shipped in ``postgres_schema/``; version N is the
first N of them. On first use the journal applies what is missing, in one transaction that
holds an advisory lock named after the schema, so workers starting together apply each step
once. With ``migrate=False`` it only checks, and refuses a missing or older schema; a schema
newer than this release is always refused, before any DDL touches it.

Round trips. A write-ahead session calls ``open_intent`` and then ``discard`` around every
append, so those two set the journal's cost. Each is one statement outside any explicit
transaction: one round trip, as asyncpg binds and executes a prepared statement in a single
request. (The pool's release skips asyncpg's default reset query, another round trip per
operation: the journal leaves no session state to reset.) ``record`` works the same way;
``settle`` keeps a transaction, below.

Why not a unique index. "At most one unresolved intent per session and backend" is what
``open_intent`` checks, not an invariant of the journal: ``record`` stores an intent
whatever else is pending for its session (a copy found in a RunState, one this process kept
in memory while the journal was failing), and the conformance suite records several for one
session and backend. An index on ``intents (session_id, backend)`` would refuse
states the contract allows. A plpgsql function (take the lock, then check in a fresh
snapshot) would also give one round trip, but would move the journal's logic into the
schema, behind a migration, for nothing the statement below cannot do.

The fence. A READ COMMITTED statement reads from one snapshot, taken before any lock it then
waits for, so it cannot check and insert by reading alone. The session's write count serves
as a fence: every transaction that inserts an intent takes the lock on its session's
``session_writes`` row before inserting and counts a write there in the same transaction
(every path in this module does), and the count only grows. The fenced statement reads, in
its snapshot, the count, the session's unresolved intents, whether the id was settled and
whatever intent holds the id (with its state, owner and ``write_seq``). If nothing is in the
way, and the count is the one expected when one is, it upserts the count to ``seen + 1``
with ``ON CONFLICT DO UPDATE ... WHERE writes = seen``, which PostgreSQL evaluates on the
newest version of the row once its lock is granted, and inserts the intent only from that
upsert's ``RETURNING``. A count still at ``seen`` means no intent of the session was
inserted or settled after the snapshot, and the lock, held until the statement commits, keeps
it so; the intent is inserted exactly when the locked check would have inserted it. If the
count moved, the statement changes nothing, and the operation runs the locked path: a
transaction whose first statement locks the session's row (an upsert, so the row exists) and
whose second, with a snapshot taken after the lock was granted, checks and writes. The same
happens when another transaction takes the intent's id after the snapshot: the plain
``INSERT`` fails the whole statement on the primary key, count included. When the snapshot
shows the id held (by this very intent, opened by an attempt whose reply was lost, or by
another), an intent in the way, the id settled, or a count other than the one expected, the
statement writes nothing and its answer, read from one snapshot, describes a state the
journal was in during the call, so it is returned as it is. A ``discard``, settlement or
count after the snapshot only makes that state older, never inconsistent. The locked path
checks the same things in the same order, with the count it read under the lock.

Settlement. ``settle`` stays a transaction (BEGIN, the session's lock, one statement,
COMMIT): it reads the intent's claim ``FOR UPDATE`` after taking the session's lock, the
order every other path takes them in, so settlements racing each other or an opening queue
rather than deadlock, and a unique index lets an intent be settled only once. An intent
settled by a decision byte for byte the one given (a retry after a lost reply) is left as
it is, and the call succeeds. It runs only while reconciling, off the append path.
``count_write`` updates the session's row, so it is ordered with all of these.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from ..errors import (
    ConfigurationError,
    IntentConflict,
    JournalCorrupt,
    JournalError,
    JournalUnavailable,
)
from ..ownership import Owner
from ..records import BackendIdentity, Decision, PendingWrite
from ._rows import checked_decision, checked_entry, decoded
from .base import IntentState, JournalEntry, Opened, require_limit, require_settling

__all__ = ["DEFAULT_SCHEMA", "MIGRATIONS", "SCHEMA_VERSION", "PostgresJournal"]

MIGRATIONS: Final = ("0001_initial",)
"""The schema's migration steps, oldest first: files ``postgres_schema/<name>.sql``."""
SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The schema version this release reads and writes."""
DEFAULT_SCHEMA: Final = "agents_reconcile"

_T = TypeVar("_T")
_SETTLING: Final = "('settled', 'replayed', 'dropped')"
_TABLES: Final = ("decisions", "intents", "session_writes")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MIGRATE_COMMAND: Final = "run `agents-reconcile migrate` (or open the journal with migrate=True)"
_INSTALL_HINT: Final = "pip install 'agents-reconcile[postgres]'"
# open_intent's statements start each row with added, settled, writes and the seven columns
# of the intent holding the id; an unresolved intent of the session follows.
_HEAD_COLUMNS: Final = 10


class _Connection(Protocol):
    """The part of ``asyncpg.Connection`` this module uses."""

    async def execute(self, query: str, *args: object) -> str: ...

    async def fetch(self, query: str, *args: object) -> list[Any]: ...

    async def fetchrow(self, query: str, *args: object) -> Any: ...

    async def fetchval(self, query: str, *args: object) -> Any: ...

    def transaction(self, *, readonly: bool = False) -> AbstractAsyncContextManager[object]: ...


class _Pool(Protocol):
    """The part of ``asyncpg.Pool`` this module uses."""

    def acquire(self, *, timeout: float | None = None) -> AbstractAsyncContextManager[Any]: ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...

    async def expire_connections(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Status:
    """What a schema holds, as seen by a read-only look at the catalog."""

    exists: bool
    version: int | None
    """The highest step recorded; None when there is no ``schema_version`` table."""
    tables: frozenset[str]


class PostgresJournal:
    """``IntentJournal`` in a PostgreSQL schema shared by any number of processes and hosts.

    Connections come from a small asyncpg pool (one to four connections) opened on first use
    and closed by ``close()``; a later operation opens a new one. ``connect_timeout`` bounds
    connecting and waiting for a free connection, ``command_timeout`` each statement (None
    for no limit): past either, the operation raises ``JournalUnavailable``.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 30.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("postgresql", "postgres"):
            raise ConfigurationError(
                f"a PostgreSQL journal URL starts with postgresql://, not {parts.scheme!r}://"
            )
        if not _IDENTIFIER.fullmatch(schema) or len(schema.encode()) > 63:
            raise ConfigurationError(
                f"schema must be an SQL identifier (letters, digits and underscores, not "
                f"starting with a digit, at most 63 bytes), not {schema!r}"
            )
        if schema.lower().startswith("pg_"):
            raise ConfigurationError(f"schema names starting with pg_ are reserved: {schema!r}")
        if connect_timeout <= 0:
            raise ConfigurationError(f"connect_timeout must be positive, not {connect_timeout}")
        if command_timeout is not None and command_timeout <= 0:
            raise ConfigurationError(f"command_timeout must be positive, not {command_timeout}")
        self._driver = _load_driver()
        self._errors: tuple[type[BaseException], ...] = (
            self._driver.PostgresError,
            self._driver.InterfaceError,
            self._driver.InternalClientError,
            OSError,
            TimeoutError,
        )
        self._url = url
        self._display, self._secrets = _redacted(url)
        self._application_name = "application_name" not in parse_qs(parts.query)
        self.schema = schema
        self.migrate_on_use = migrate
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._sql = _Statements(_quote(schema))
        self._lock_key = _advisory_key(f"agents-reconcile/migrate/{schema}")
        self._pool: _Pool | None = None
        self._pool_home: tuple[asyncio.AbstractEventLoop, int] | None = None
        self._gate: asyncio.Lock | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None
        self._ready = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 30.0,
    ) -> PostgresJournal:
        """A journal on the database ``url`` names (``postgresql://user@host:port/db``, with
        any parameters asyncpg accepts), in ``schema``."""
        return cls(
            url,
            schema=schema,
            migrate=migrate,
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
        )

    def __repr__(self) -> str:
        return f"PostgresJournal({self._display!r}, schema={self.schema!r})"

    @property
    def location(self) -> str:
        """The database address without its password or parameters, fit for messages."""
        return self._display

    # -- connections -------------------------------------------------------------------

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate_loop is not loop:
            self._gate, self._gate_loop = asyncio.Lock(), loop
        return self._gate

    async def _open(self) -> _Pool:
        home = (asyncio.get_running_loop(), os.getpid())
        if self._pool is not None and self._pool_home == home:
            return self._pool
        async with self._lock():
            if self._pool is not None and self._pool_home == home:
                return self._pool
            # A pool made on another event loop, or inherited across a fork, cannot be used
            # (nor closed) from here: leave it and open one of our own.
            self._pool, self._pool_home, self._ready = None, None, False
            settings = {"application_name": "agents-reconcile"} if self._application_name else {}
            pool: _Pool = await self._driver.create_pool(
                self._url,
                min_size=1,
                max_size=4,
                timeout=self._connect_timeout,
                command_timeout=self._command_timeout,
                max_inactive_connection_lifetime=60.0,
                # The journal's statements are a fixed set: keep them prepared for as long
                # as the connection lives, rather than re-preparing every five minutes.
                max_cached_statement_lifetime=0,
                reset=_keep_session_state,
                server_settings=settings,
            )
            self._pool, self._pool_home = pool, home
            return pool

    async def _run(
        self, work: Callable[[_Connection], Awaitable[_T]], *, prepare: bool = True
    ) -> _T:
        """Run ``work`` on a pooled connection (the schema checked or migrated first), with
        the driver's errors translated."""
        try:
            pool = await self._open()
            if prepare and not self._ready:
                await self._prepare(pool)
            async with pool.acquire(timeout=self._connect_timeout) as conn:
                return await work(conn)
        except self._errors as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: BaseException) -> JournalError:
        detail = f"{type(exc).__name__}: {exc}"
        for secret in self._secrets:
            detail = detail.replace(secret, "***")
        state = getattr(exc, "sqlstate", None)
        if isinstance(state, str) and (
            state[:2] in ("22", "23", "3F") or (state[:2] == "42" and state != "42501")
        ):
            # A value, a table or a column is not what this release wrote: not a journal, or
            # one changed behind its back. Retrying will not help.
            return JournalCorrupt(
                f"PostgreSQL journal {self._display} (schema {self.schema}) does not hold what "
                f"this release expects: {detail}"
            )
        return JournalUnavailable(
            f"PostgreSQL journal {self._display} (schema {self.schema}) cannot be used: {detail}"
        )

    async def close(self) -> None:
        """Close the pool; a later operation opens a new one."""
        pool, home = self._pool, self._pool_home
        self._pool, self._pool_home, self._ready = None, None, False
        if pool is None or home != (asyncio.get_running_loop(), os.getpid()):
            return
        try:
            await asyncio.wait_for(pool.close(), self._connect_timeout)
        except BaseException as exc:
            # Closing politely failed (a dead server, a timeout, a cancellation): drop the
            # connections instead. Only a cancellation or a bug goes on up.
            pool.terminate()
            if not isinstance(exc, self._errors):
                raise

    # -- schema ------------------------------------------------------------------------

    async def _prepare(self, pool: _Pool) -> None:
        async with self._lock():
            if self._ready:
                return
            async with pool.acquire(timeout=self._connect_timeout) as conn:
                status = await self._inspect_read_only(conn)
                problem = self._problem(status)
                if problem is not None:
                    if not self.migrate_on_use or not self._migratable(status):
                        raise JournalCorrupt(problem)
                    await self._apply(conn)
            self._ready = True

    async def _inspect_read_only(self, conn: _Connection) -> _Status:
        async with conn.transaction(readonly=True):
            return await self._inspect(conn)

    async def _inspect(self, conn: _Connection) -> _Status:
        row = await conn.fetchrow(
            self._sql.inspect, self.schema, list(_TABLES), f"{self._sql.schema}.schema_version"
        )
        exists, has_versions, tables = row[0], row[1], row[2]
        version: int | None = None
        if has_versions:
            found = await conn.fetchval(self._sql.max_version)
            if found is not None and not isinstance(found, int):
                raise JournalCorrupt(f"schema {self.schema} has an unreadable schema version")
            version = 0 if found is None else found
        return _Status(bool(exists), version, frozenset(tables or ()))

    def _migratable(self, status: _Status) -> bool:
        """Whether applying the missing steps would bring the schema up to date."""
        return status.version is None or status.version < SCHEMA_VERSION

    def _problem(self, status: _Status) -> str | None:
        """A sentence saying why the schema is not current, or None when it is."""
        name = self.schema
        if not status.exists:
            return (
                f"schema {name} does not exist in {self._display}: the journal needs its "
                f"tables at schema version {SCHEMA_VERSION}; {_MIGRATE_COMMAND}"
            )
        if status.version is None:
            return (
                f"schema {name} in {self._display} has no schema_version table, so it holds "
                f"no journal yet; {_MIGRATE_COMMAND}"
            )
        if status.version > SCHEMA_VERSION:
            return (
                f"schema {name} in {self._display} is at journal schema version "
                f"{status.version}, newer than this release's {SCHEMA_VERSION}; upgrade "
                f"agents-reconcile"
            )
        if status.version < SCHEMA_VERSION:
            missing = ", ".join(MIGRATIONS[status.version :])
            return (
                f"schema {name} in {self._display} is at journal schema version "
                f"{status.version}, older than this release's {SCHEMA_VERSION} (missing "
                f"{missing}); {_MIGRATE_COMMAND}"
            )
        absent = sorted(set(_TABLES) - status.tables)
        if absent:
            return (
                f"schema {name} in {self._display} is at journal schema version "
                f"{status.version} but lacks table {', '.join(absent)}: it was damaged"
            )
        return None

    async def _apply(self, conn: _Connection) -> list[str]:
        """Apply the missing steps in one transaction under the schema's advisory lock."""
        applied: list[str] = []
        async with conn.transaction():
            # Workers starting together queue here; each re-reads the version once it holds
            # the lock, so a step applied by another is not applied again.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            status = await self._inspect(conn)
            if status.version is not None and status.version >= SCHEMA_VERSION:
                problem = self._problem(status)
                if problem is not None:
                    raise JournalCorrupt(problem)
                return applied
            current = status.version or 0
            quoted = self._sql.schema
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {quoted}.schema_version ("
                " version integer PRIMARY KEY,"
                " name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            await conn.execute(f"SET LOCAL search_path TO {quoted}")
            for number, name in enumerate(MIGRATIONS[current:], start=current + 1):
                await conn.execute(_migration_sql(name))
                await conn.execute(self._sql.add_version, number, name)
                applied.append(name)
        return applied

    async def migrate(self) -> list[str]:
        """Apply the missing migration steps and return their names (empty when current).

        Refuses (``JournalCorrupt``) a schema newer than this release, or one whose version
        is current but whose tables are missing."""

        async def work(conn: _Connection) -> list[str]:
            return await self._apply(conn)

        applied = await self._run(work, prepare=False)
        # _apply returns only when the schema is current (it raises otherwise).
        self._ready = True
        return applied

    async def check(self) -> str | None:
        """None when the schema is at this release's version; otherwise a sentence saying
        what is missing or newer. Runs no DDL and writes nothing (a read-only transaction)."""
        status = await self._run(self._inspect_read_only, prepare=False)
        return self._problem(status)

    async def schema_version(self) -> int | None:
        """The version recorded in the schema (None when it holds none); writes nothing."""
        status = await self._run(self._inspect_read_only, prepare=False)
        return status.version

    async def drop(self) -> None:
        """Drop this journal's schema and everything in it (for tests and operators)."""

        async def work(conn: _Connection) -> None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
                await conn.execute(f"DROP SCHEMA IF EXISTS {self._sql.schema} CASCADE")

        await self._run(work, prepare=False)
        self._ready = False
        if self._pool is not None:
            try:
                # Statements prepared against the dropped tables must not be reused.
                await self._pool.expire_connections()
            except self._errors as exc:
                raise self._translate(exc) from exc

    # -- IntentJournal -----------------------------------------------------------------

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        row = _intent_args(intent, state, owner)
        key = (intent.session_id, str(intent.backend))

        async def work(conn: _Connection) -> None:
            found = await self._fenced(conn.fetchrow, self._sql.record, row)
            if found is not None:
                if found["added"]:
                    return
                if found["settled"]:
                    raise _already_settled(intent.intent_id)
                if found["prior"] is not None:
                    _compare(intent, found["prior"])
                    return
            # The fence fell (the session changed since the snapshot) or the id was taken
            # meanwhile: decide under the session's lock.
            async with conn.transaction():
                await conn.fetchval(self._sql.lock_session, *key)
                found = await conn.fetchrow(self._sql.record_locked, *row)
                if found["settled"]:
                    raise _already_settled(intent.intent_id)
                if found["added"]:
                    return
                prior = found["prior"]
                if prior is None:
                    # Recorded a moment ago under another session's lock: read it now.
                    prior = await conn.fetchval(self._sql.intent_record, intent.intent_id)
                _compare(intent, prior)

        await self._run(work)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_writes: int | None = None,
    ) -> Opened:
        row = _intent_args(intent, state, owner)
        key = (intent.session_id, str(intent.backend))
        asked = _Asked(intent, state, owner, expect_writes)

        async def work(conn: _Connection) -> Opened:
            rows = await self._fenced(conn.fetch, self._sql.open_intent, (*row, expect_writes))
            if rows:
                # Everything below was read from one snapshot: a state the journal was in.
                opened = asked.answer(rows[0], rows, _count(rows[0]["writes"]))
                if opened is not None:
                    return opened
            # The fence fell or the id was taken meanwhile: decide under the session's lock.
            async with conn.transaction():
                # The session's lock, and its count as of now: nothing of this session can
                # be opened, recorded, settled or counted until this transaction ends.
                writes = _count(await conn.fetchval(self._sql.lock_session, *key))
                rows = await conn.fetch(self._sql.open_locked, *row, writes, expect_writes)
                opened = asked.answer(rows[0], rows, writes)
                if opened is not None:
                    return opened
                # Not inserted, and nothing in the snapshot said why: another transaction
                # took the id after it (only another session's can, this one's lock held).
                held = await conn.fetchrow(self._sql.held, intent.intent_id)
                opened = None if held is None else asked.holding(held, writes)
                if opened is None:
                    raise _other_content(intent)
                return opened

        return await self._run(work)

    async def _fenced(
        self, run: Callable[..., Awaitable[_T]], sql: str, row: Sequence[object]
    ) -> _T | None:
        """Run a fenced statement (autocommit); None when it failed because another
        transaction took the intent's id after its snapshot (it then changed nothing)."""
        try:
            return await run(sql, *row)
        except self._driver.UniqueViolationError as exc:
            if getattr(exc, "constraint_name", None) != "intents_pkey":
                raise
            return None

    async def writes(self, session_id: str, backend: BackendIdentity) -> int:
        async def work(conn: _Connection) -> int:
            found = await conn.fetchval(self._sql.writes, session_id, str(backend))
            return 0 if found is None else _count(found)

        return await self._run(work)

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        async def work(conn: _Connection) -> int:
            return _count(await conn.fetchval(self._sql.count_write, session_id, str(backend)))

        return await self._run(work)

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
    ) -> bool:
        sql = self._sql.transition(expect_state is not None, expect_owner is not None)
        args: list[object] = [state.value, str(owner), time.time(), intent_id]
        if expect_state is not None:
            args.append(expect_state.value)
        if expect_owner is not None:
            args.append(str(expect_owner))

        async def work(conn: _Connection) -> bool:
            # One UPDATE: the server re-checks the expectations on the newest version of the
            # row, so two claims racing cannot both succeed.
            return await conn.fetchval(sql, *args) is not None

        return await self._run(work)

    async def discard(self, intent_id: str) -> None:
        async def work(conn: _Connection) -> None:
            await conn.execute(self._sql.discard, intent_id)

        await self._run(work)

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        sql = self._sql.pending(session_id is not None, backend is not None)
        args = [value for value in (session_id, backend) if value is not None]

        async def work(conn: _Connection) -> list[Any]:
            return await conn.fetch(sql, *(str(value) for value in args))

        return [_entry(row) for row in await self._run(work)]

    async def get(self, intent_id: str) -> JournalEntry | None:
        async def work(conn: _Connection) -> Any:
            return await conn.fetchrow(self._sql.get, intent_id)

        row = await self._run(work)
        return None if row is None else _entry(row)

    async def is_settled(self, intent_id: str) -> bool:
        async def work(conn: _Connection) -> bool:
            return await conn.fetchval(self._sql.is_settled, intent_id) is not None

        return await self._run(work)

    async def settle(self, decision: Decision, *, owner: Owner | None = None) -> None:
        require_settling(decision, settling=True)
        intent_id = decision.intent_id
        key = (decision.session_id, str(decision.backend))
        args = (*_decision_args(decision), None if owner is None else str(owner))
        unique_violation = self._driver.UniqueViolationError

        async def work(conn: _Connection) -> None:
            try:
                async with conn.transaction():
                    await conn.fetchval(self._sql.lock_session, *key)
                    found = await conn.fetchrow(self._sql.settle, *args)
            except unique_violation as exc:
                if getattr(exc, "constraint_name", None) != "decisions_settle_once":
                    raise
                # Settled by another transaction meanwhile: perhaps with this very decision.
                again = await conn.fetchval(self._sql.settled_as, intent_id, decision.encode())
                if again is not None:
                    return
                raise _already_settled(intent_id) from None
            if found["settled"]:
                if found["again"]:
                    # The same call again, its first reply lost: already done.
                    return
                raise _already_settled(intent_id)
            if not found["allowed"]:
                raise IntentConflict(
                    f"intent {intent_id} is not claimed by {owner}", intent_id=intent_id
                )

        await self._run(work)

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)

        async def work(conn: _Connection) -> None:
            await conn.execute(self._sql.note, *_decision_args(decision))

        await self._run(work)

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        sql = self._sql.decisions(session_id is not None, intent_id is not None)
        args: list[object] = [value for value in (session_id, intent_id) if value is not None]
        args.append(limit)

        async def work(conn: _Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        return [_decision(row) for row in await self._run(work)]


class _Statements:
    """Every statement the journal runs, with its schema name quoted in."""

    def __init__(self, schema: str) -> None:
        s = self.schema = schema
        intent_columns = "intent_id, session_id, backend, state, owner, updated_at, record"
        self.select_intents = f"SELECT {intent_columns} FROM {s}.intents"
        self.inspect = (
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1),"
            " to_regclass($3::text) IS NOT NULL,"
            " ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname = ANY($2::text[]))"
        )
        self.max_version = f"SELECT max(version) FROM {s}.schema_version"
        self.add_version = (
            f"INSERT INTO {s}.schema_version (version, name, applied_at) VALUES ($1, $2, now())"
        )
        # Takes the session's row lock (creating the row at zero) and returns its count: the
        # upsert always locks the newest version of the row, whoever inserted it.
        self.lock_session = (
            f"INSERT INTO {s}.session_writes AS w (session_id, backend, writes)"
            " VALUES ($1, $2, 0) ON CONFLICT (session_id, backend)"
            " DO UPDATE SET writes = w.writes RETURNING w.writes"
        )
        self.writes = (
            f"SELECT writes FROM {s}.session_writes WHERE session_id = $1 AND backend = $2"
        )
        self.count_write = (
            f"INSERT INTO {s}.session_writes AS w (session_id, backend, writes)"
            " VALUES ($1, $2, 1) ON CONFLICT (session_id, backend)"
            " DO UPDATE SET writes = w.writes + 1 RETURNING w.writes"
        )
        settled_check = (
            f"SELECT EXISTS (SELECT 1 FROM {s}.decisions"
            f" WHERE intent_id = $1 AND action IN {_SETTLING}) AS settled"
        )

        def insert_intent(write_seq: str) -> str:
            return (
                f"INSERT INTO {s}.intents (intent_id, session_id, backend, state, owner,"
                " created_at, updated_at, record, write_seq)"
                " SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::float8,"
                f" $7::float8, $8::bytea, {write_seq}"
            )

        count_added = (
            f"UPDATE {s}.session_writes SET writes = writes + 1"
            " WHERE session_id = $2 AND backend = $3 AND EXISTS (SELECT 1 FROM added)"
        )
        # The locked paths: run after lock_session, so the snapshot is fresh and the settled
        # check and the prior copy are what the last holder of the lock left.
        self.record_locked = (
            f"WITH done AS ({settled_check}),"
            f" prior AS (SELECT record FROM {s}.intents WHERE intent_id = $1),"
            f" added AS ({insert_intent('0')}"
            " WHERE NOT (SELECT settled FROM done) AND NOT EXISTS (SELECT 1 FROM prior)"
            " ON CONFLICT (intent_id) DO NOTHING RETURNING intent_id),"
            f" counted AS ({count_added})"
            " SELECT (SELECT settled FROM done) AS settled,"
            " EXISTS (SELECT 1 FROM added) AS added,"
            " (SELECT record FROM prior) AS prior"
        )
        # What open_intent answers from, the same in both of its statements: flags, the count,
        # the intent holding the id (NULL columns when none does), then the unresolved intents
        # of the session and backend, one per row (oldest first; one row of NULLs when none).
        prior_columns = (
            "p.record AS prior, p.session_id AS prior_session, p.backend AS prior_backend,"
            " p.state AS prior_state, p.owner AS prior_owner, p.updated_at AS prior_updated,"
            " p.write_seq AS prior_seq"
        )
        blocking_columns = (
            "b.intent_id, b.session_id, b.backend, b.state, b.owner, b.updated_at, b.record"
        )
        # Inserts only when the id is free, the session and backend have no unresolved intent,
        # the id was never settled and the count ($9, read under the lock) is the one
        # expected ($10, NULL for any).
        self.open_locked = (
            f"WITH blocking AS (SELECT {intent_columns}, created_at FROM {s}.intents"
            " WHERE session_id = $2 AND backend = $3),"
            f" done AS ({settled_check}),"
            " prior AS (SELECT record, session_id, backend, state, owner, updated_at, write_seq"
            f" FROM {s}.intents WHERE intent_id = $1),"
            f" added AS ({insert_intent('$9::bigint')}"
            " WHERE NOT EXISTS (SELECT 1 FROM blocking) AND NOT (SELECT settled FROM done)"
            " AND NOT EXISTS (SELECT 1 FROM prior) AND coalesce($10::bigint, $9::bigint) = $9"
            " ON CONFLICT (intent_id) DO NOTHING RETURNING intent_id),"
            f" counted AS ({count_added})"
            " SELECT f.*, " + blocking_columns + " FROM (SELECT EXISTS (SELECT 1 FROM added)"
            " AS added, (SELECT settled FROM done) AS settled, $9::bigint AS writes,"
            f" {prior_columns} FROM (SELECT 1) AS one LEFT JOIN prior AS p ON true) AS f"
            " LEFT JOIN blocking AS b ON true ORDER BY b.created_at, b.intent_id"
        )

        # The fenced paths: one autocommit statement each (see the module docstring). `seen`
        # is the statement's snapshot; `fence` counts the write only if the session's count
        # is still the one `seen` read once the row lock is granted (ON CONFLICT DO UPDATE
        # takes the lock first and evaluates its WHERE on the newest version of the row);
        # the intent is inserted only from the fence's RETURNING, so after it. A plain
        # INSERT: an id another transaction took meanwhile fails the whole statement.
        def seen(blocked: str) -> str:
            return (
                "seen AS (SELECT coalesce((SELECT writes FROM"
                f" {s}.session_writes WHERE session_id = $2 AND backend = $3), 0) AS writes,"
                f" {blocked} AS blocked, ({settled_check}) AS settled, {prior_columns}"
                f" FROM (SELECT 1) AS one LEFT JOIN {s}.intents AS p ON p.intent_id = $1)"
            )

        def fence(expected: str) -> str:
            return (
                f"fence AS (INSERT INTO {s}.session_writes AS w (session_id, backend, writes)"
                " SELECT $2::text, $3::text, writes + 1 FROM seen"
                f" WHERE NOT blocked AND NOT settled AND prior IS NULL{expected}"
                " ON CONFLICT (session_id, backend) DO UPDATE SET writes = excluded.writes"
                " WHERE w.writes = excluded.writes - 1 RETURNING w.writes)"
            )

        def fenced_insert(write_seq: str) -> str:
            return f"added AS ({insert_intent(write_seq)} FROM fence RETURNING intent_id)"

        self.record = (
            f"WITH {seen('false')}, {fence('')}, {fenced_insert('0')}"
            " SELECT EXISTS (SELECT 1 FROM added) AS added, settled, prior FROM seen"
        )
        # $9: the count expected, NULL for any; a snapshot count that is not it refuses.
        self.open_intent = (
            f"WITH blocking AS (SELECT {intent_columns}, created_at FROM {s}.intents"
            " WHERE session_id = $2 AND backend = $3),"
            f" {seen('EXISTS (SELECT 1 FROM blocking)')},"
            f" {fence(' AND coalesce($9::bigint, writes) = writes')},"
            f" {fenced_insert('writes - 1')}"
            " SELECT EXISTS (SELECT 1 FROM added) AS added, v.settled, v.writes, v.prior,"
            " v.prior_session, v.prior_backend, v.prior_state, v.prior_owner, v.prior_updated,"
            f" v.prior_seq, {blocking_columns}"
            " FROM seen AS v LEFT JOIN blocking AS b ON true ORDER BY b.created_at, b.intent_id"
        )
        self.held = (
            "SELECT record AS prior, session_id AS prior_session, backend AS prior_backend,"
            " state AS prior_state, owner AS prior_owner, updated_at AS prior_updated,"
            f" write_seq AS prior_seq FROM {s}.intents WHERE intent_id = $1"
        )
        self.intent_record = f"SELECT record FROM {s}.intents WHERE intent_id = $1"
        self.discard = f"DELETE FROM {s}.intents WHERE intent_id = $1"
        self.get = f"{self.select_intents} WHERE intent_id = $1"
        self.is_settled = (
            f"SELECT 1 FROM {s}.decisions WHERE intent_id = $1 AND action IN {_SETTLING} LIMIT 1"
        )
        decision_columns = (
            "intent_id, session_id, backend, outcome, reason, action, decided_at, record"
        )
        self.note = (
            f"INSERT INTO {s}.decisions ({decision_columns})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        # Whether this very decision settled the intent (a settlement retried after its reply
        # was lost): its stored bytes are the ones given.
        self.settled_as = (
            f"SELECT 1 FROM {s}.decisions"
            f" WHERE intent_id = $1 AND action IN {_SETTLING} AND record = $2 LIMIT 1"
        )
        # The claim is read with FOR UPDATE: a transition racing this settlement is either
        # seen (the newest owner is compared) or waits and then finds the intent gone.
        self.settle = (
            f"WITH done AS ({settled_check}),"
            f" again AS (SELECT EXISTS (SELECT 1 FROM {s}.decisions WHERE intent_id = $1"
            f" AND action IN {_SETTLING} AND record = $8::bytea) AS again),"
            f" claim AS (SELECT state, owner FROM {s}.intents WHERE intent_id = $1 FOR UPDATE),"
            " verdict AS (SELECT NOT (SELECT settled FROM done) AND ($9::text IS NULL"
            " OR NOT EXISTS (SELECT 1 FROM claim)"
            " OR EXISTS (SELECT 1 FROM claim WHERE state = 'reconciling' AND owner = $9::text))"
            " AS allowed),"
            f" gone AS (DELETE FROM {s}.intents"
            " WHERE intent_id = $1 AND (SELECT allowed FROM verdict)),"
            f" counted AS (UPDATE {s}.session_writes SET writes = writes + 1"
            " WHERE session_id = $2 AND backend = $3 AND (SELECT allowed FROM verdict)),"
            f" stored AS (INSERT INTO {s}.decisions ({decision_columns})"
            " SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::float8,"
            " $8::bytea WHERE (SELECT allowed FROM verdict))"
            " SELECT (SELECT settled FROM done) AS settled,"
            " (SELECT allowed FROM verdict) AS allowed, (SELECT again FROM again) AS again"
        )

        # The statements whose filters vary, built once: asyncpg caches prepared statements
        # by their text, so each variant is parsed and planned once per connection.
        flags = ((False, False), (False, True), (True, False), (True, True))
        self._transition = {key: self._build_transition(*key) for key in flags}
        self._pending = {key: self._build_pending(*key) for key in flags}
        self._decisions = {key: self._build_decisions(*key) for key in flags}

    def transition(self, by_state: bool, by_owner: bool) -> str:
        return self._transition[by_state, by_owner]

    def pending(self, by_session: bool, by_backend: bool) -> str:
        return self._pending[by_session, by_backend]

    def decisions(self, by_session: bool, by_intent: bool) -> str:
        return self._decisions[by_session, by_intent]

    def _build_transition(self, by_state: bool, by_owner: bool) -> str:
        sql = (
            f"UPDATE {self.schema}.intents SET state = $1, owner = $2, updated_at = $3"
            " WHERE intent_id = $4"
        )
        number = 5
        if by_state:
            sql += f" AND state = ${number}"
            number += 1
        if by_owner:
            sql += f" AND owner = ${number}"
        return sql + " RETURNING 1"

    def _build_pending(self, by_session: bool, by_backend: bool) -> str:
        conditions: list[str] = []
        if by_session:
            conditions.append(f"session_id = ${len(conditions) + 1}")
        if by_backend:
            conditions.append(f"backend = ${len(conditions) + 1}")
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return f"{self.select_intents}{where} ORDER BY created_at, intent_id"

    def _build_decisions(self, by_session: bool, by_intent: bool) -> str:
        conditions: list[str] = []
        if by_session:
            conditions.append(f"session_id = ${len(conditions) + 1}")
        if by_intent:
            conditions.append(f"intent_id = ${len(conditions) + 1}")
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return (
            f"SELECT intent_id, session_id, record FROM {self.schema}.decisions{where}"
            f" ORDER BY seq DESC LIMIT ${len(conditions) + 1}"
        )


# -- helpers -----------------------------------------------------------------------------


async def _keep_session_state(connection: object) -> None:
    """The pool's reset on release. The journal leaves no session state behind (no SET, no
    LISTEN, no session-level advisory lock or cursor; its transactions are closed and its
    SET and locks are transaction-scoped), so a connection goes back to the pool without the
    default reset query, which would cost a round trip per operation. asyncpg still rolls
    back a transaction left open before calling this."""


def _load_driver() -> Any:
    try:
        # Imported by name: asyncpg is optional and ships no type information.
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise ConfigurationError(
            f"the PostgreSQL journal needs the asyncpg driver: {_INSTALL_HINT}"
        ) from exc


def _migration_sql(name: str) -> str:
    try:
        folder = resources.files("agents_reconcile.journal").joinpath("postgres_schema")
        return folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"this installation of agents-reconcile lacks its migration step {name}.sql; "
            "reinstall it"
        ) from exc


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _advisory_key(text: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_xact_lock``."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _redacted(url: str) -> tuple[str, list[str]]:
    """The URL without password or parameters, and the secrets to scrub from messages."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    secrets = [password, unquote(password)] if password else []
    for value in parse_qs(parts.query).get("password", []):
        secrets.append(value)
    netloc = f"{user}@{hosts}" if at and user else hosts
    display = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    # Longest first, so a secret that contains another is scrubbed whole.
    return display, sorted({s for s in secrets if s}, key=len, reverse=True)


def _intent_args(intent: PendingWrite, state: IntentState, owner: Owner) -> tuple[object, ...]:
    return (
        intent.intent_id,
        intent.session_id,
        str(intent.backend),
        state.value,
        str(owner),
        intent.created_at,
        time.time(),
        intent.encode(),
    )


def _decision_args(decision: Decision) -> tuple[object, ...]:
    return (
        decision.intent_id,
        decision.session_id,
        str(decision.backend),
        decision.outcome.value,
        decision.reason.value,
        decision.action.value,
        decision.decided_at,
        decision.encode(),
    )


def _already_settled(intent_id: str) -> IntentConflict:
    return IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)


def _compare(intent: PendingWrite, prior: object) -> None:
    """The id is taken: a no-op when ``prior`` holds the same content, else a conflict."""
    if prior is not None:
        existing = decoded(intent.intent_id, PendingWrite.decode, prior)
        if existing.same_content(intent):
            return
    raise IntentConflict(
        f"intent {intent.intent_id} is recorded with other content", intent_id=intent.intent_id
    )


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise JournalCorrupt(f"a session's write count is {value!r}, not a count")
    return value


def _other_content(intent: PendingWrite) -> IntentConflict:
    return IntentConflict(
        f"intent {intent.intent_id} is recorded with other content", intent_id=intent.intent_id
    )


@dataclass(frozen=True, slots=True)
class _Asked:
    """An ``open_intent`` call, to read its statements' answers against."""

    intent: PendingWrite
    state: IntentState
    owner: Owner
    expect_writes: int | None

    def answer(self, head: Any, rows: Sequence[Any], writes: int) -> Opened | None:
        """The answer ``head`` (a row's flags, count and the intent holding the id) and
        ``rows`` (the session's unresolved intents, after the head's columns) give, in the
        contract's order; None when they do not say why nothing was inserted (the fence
        fell, or the id was taken after the snapshot)."""
        if head["added"]:
            return Opened(recorded=True, writes=writes)
        held = self.holding(head, writes)
        if held is not None:
            return held
        blocking = [
            _entry(tuple(found)[_HEAD_COLUMNS:]) for found in rows if found["intent_id"] is not None
        ]
        if blocking:
            return Opened(recorded=False, writes=writes, blocking=blocking)
        if head["settled"]:
            raise _already_settled(self.intent.intent_id)
        if self.expect_writes is not None and writes != self.expect_writes:
            return Opened(recorded=False, writes=writes)
        return None

    def holding(self, head: Any, writes: int) -> Opened | None:
        """The answer when ``head`` shows an intent holding the id (None when none does):
        other content conflicts; this call's own intent, as it left it, is recorded."""
        intent = self.intent
        if head["prior"] is None:
            return None
        held = _entry(
            (
                intent.intent_id,
                head["prior_session"],
                head["prior_backend"],
                head["prior_state"],
                head["prior_owner"],
                head["prior_updated"],
                head["prior"],
            )
        )
        if not held.intent.same_content(intent):
            raise _other_content(intent)
        if held.state is self.state and held.owner == self.owner:
            # Opened already by this same call, whose reply was lost: answer as it was.
            return Opened(recorded=True, writes=_count(head["prior_seq"]))
        return Opened(recorded=False, writes=writes, blocking=[held])


def _entry(row: Sequence[Any]) -> JournalEntry:
    intent_id, session_id, backend, state, owner, updated_at, record = tuple(row)
    texts = (intent_id, session_id, backend, state, owner)
    if not all(isinstance(value, str) for value in texts) or not isinstance(updated_at, float):
        raise JournalCorrupt(f"intent {intent_id!r}: the journal row has unexpected types")
    return checked_entry(intent_id, session_id, backend, state, owner, updated_at, record)


def _decision(row: Sequence[Any]) -> Decision:
    intent_id, session_id, record = tuple(row)
    return checked_decision(intent_id, session_id, record)
