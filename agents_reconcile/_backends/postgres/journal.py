"""The shared journal: one PostgreSQL schema that every worker of a fleet reads and writes.

The driver is asyncpg. It speaks the server's protocol itself, on the event loop, with no
thread pool in between; it exchanges values in PostgreSQL's binary format rather than as
text; it prepares each statement once per connection and reuses it from a cache, which suits
a journal that runs the same dozen statements all day; it is the fastest Python driver for
PostgreSQL; and it is what the Agents SDK's own SQLAlchemy session runs on for PostgreSQL,
so an application that keeps its sessions there has it installed already.

Layout. A journal lives in a schema of its own (``agents_reconcile`` unless told otherwise).
``slots`` holds each session and backend's rows: slot 0 its write count, when the count was
last raised and its live intent (the one ``open_intent`` opened, none once it is cleared or
settled); slots 1 and up the intents recorded beside it (``record``: a copy from a RunState,
a failed append). An append writes one row, slot 0, where an older layout deleted an
intent's row, inserted another and updated a count's. One unique index over the slots' ids
keeps an intent id unique across sessions. The view ``intents`` shows every unresolved
intent, live or beside, as one row each: what every reader reads. ``decisions`` holds the
decisions, ``write_floor`` the highest count pruned (``retention.py``), ``effects`` tools'
external effects (``effects.py``), ``set_aside`` damaged intents set aside (``aside.py``),
``schema_version`` the migration steps applied. Records are the bytes of
``PendingWrite.encode()``, ``Decision.encode()`` and ``Effect.encode()`` (as the SQLite
journal's), digest included, checked on every read.

Migrations. ``MIGRATIONS`` names SQL files shipped in ``journal_schema/``; version N is the
first N of them. On first use the journal applies what is missing (a new journal gets its
tables), as every PostgreSQL backend does (``backend.py``). With ``migrate=False`` it
only checks, and refuses a missing or older schema; a schema newer than this release is
always refused, before any DDL touches it.

Round trips. A write-ahead session calls ``open_intent`` and then ``discard`` around every
append, so those two set the journal's cost. Each is one statement outside any explicit
transaction: one round trip, as asyncpg binds and executes a prepared statement in a single
request. (The pool's release skips asyncpg's default reset query, another round trip per
operation: the journal leaves no session state to reset.) ``record`` works the same way;
``settle`` keeps a transaction, below. The statements are in ``statements.py``.

Why not a unique index. "At most one unresolved intent per session and backend" is what
``open_intent`` checks, not an invariant of the journal: ``record`` stores an intent
whatever else is pending for its session (a copy found in a RunState, one this process kept
in memory while the journal was failing), and the conformance suite records several for one
session and backend. A unique index on the sessions' intents would refuse states the
contract allows. A plpgsql function (take the lock, then check in a fresh
snapshot) would also give one round trip, but would move the journal's logic into the
schema, behind a migration, for nothing the statement below cannot do.

The fence. A READ COMMITTED statement reads from one snapshot, taken before any lock it then
waits for, so it cannot check and insert by reading alone. The session's write count serves
as a fence: every transaction that gives the session an intent or takes one away takes the
lock on its session's row (slot 0) first and counts a write there in the same transaction
(every path in this module does), and the count only grows (a session without a row reads
as the journal's floor, at least every count pruned). The fenced statement reads, in its
snapshot, the count, the session's unresolved intents, whether the id was settled and
whatever intent holds the id (with its state, owner and ``fence``). If nothing is in the
way, and the count is the one expected when one is, it raises the count to ``seen + 1``
with ``UPDATE ... WHERE write_count = seen``, which PostgreSQL evaluates on the newest version
of the row once its lock is granted (a row deleted meanwhile, its count pruned, is not
updated); a session seen without a row gets one at the floor plus one, only while the floor
read ``FOR SHARE`` is still the one seen, by an upsert whose ``WHERE`` does the same for a
row made meanwhile. An opening's intent is written by that very update (slot 0 takes it),
one recorded beside is inserted only from its ``RETURNING``. A count still at ``seen`` (the
floor, for a session without a row) means no intent of the session was recorded, opened or
settled after the snapshot, and the lock, held until the statement commits, keeps it so; the
intent is written exactly when the locked check would have written it. If the count moved,
the statement changes nothing, and the operation runs the locked path: a transaction whose
first statement locks the session's row (made at the floor if missing) and whose second,
with a snapshot taken after the lock was granted, checks and writes. The same happens when
another transaction takes the intent's id after the snapshot: the id's unique index
(``slots_intent_id``) fails the whole statement, count included. When the snapshot
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

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

from ..._core.ownership import Owner
from ..._core.records import BackendIdentity, Decision, PendingWrite
from ..._core.sealing import Keyring
from ...errors import LeaseLost
from ..journal import (
    Capabilities,
    IntentState,
    JournalEntry,
    Opened,
    require_limit,
    require_settling,
)
from ..rows import each
from .answers import _already_settled, _Asked, _compare, _count, _decision, _entry, _other_content
from .aside import PostgresAside
from .backend import Connection, ServerIdentity
from .database import DEFAULT_SCHEMA, MIGRATIONS, SCHEMA, SCHEMA_VERSION, JournalDatabase
from .effects import PostgresEffects
from .pages import PostgresPages
from .retention import PostgresRetention, row_known
from .sealing import PostgresSealing
from .statements import TAKEN, decision_args, intent_args

__all__ = ["DEFAULT_SCHEMA", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "PostgresJournal"]

_T = TypeVar("_T")


class PostgresJournal:
    """``IntentJournal`` in a PostgreSQL schema shared by any number of processes and hosts,
    with every component built on its database.

    Connections come from ``pool`` when given (the caller's: ``close()`` leaves it open), else
    from a small asyncpg pool (one to four connections) shared by the journals of one URL and
    settings in an event loop, opened on first use and closed when the last of them closes;
    a later operation opens a new one. ``connect_timeout`` bounds connecting and waiting for a
    free connection, ``command_timeout`` each statement (None for no limit): past either, the
    operation raises ``JournalUnavailable``.
    """

    # It clears with a statement of its own just before the opening, on the same connection.
    capabilities: ClassVar[Capabilities] = Capabilities(
        folds_clearing=True,
        starts_eagerly=False,
    )

    def __init__(
        self,
        url: str | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 30.0,
        pool: Any = None,
    ) -> None:
        self._db = JournalDatabase(
            url,
            schema=schema,
            migrate=migrate,
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
            pool=pool,
        )
        self.keyring = Keyring()
        """The keys that open sealed batches: those of every wrapper using this journal."""
        self.schema = schema
        self.effects = PostgresEffects(self._db, self.keyring)
        """Tools' external effects (``JournalEffects``)."""
        self.aside = PostgresAside(self._db)
        """Damaged intents set aside (``JournalAside``)."""
        self.pages = PostgresPages(self._db, self.keyring)
        """Its listings a page at a time (``JournalPages``)."""
        self.retention = PostgresRetention(self._db)
        """Pruning what the retention lets go (``JournalRetention``)."""
        self.sealing = PostgresSealing(self._db)
        """The mark of a sealed journal (``JournalSealing``)."""

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

    @classmethod
    def from_address(cls, address: str, *, namespace: str | None = None) -> PostgresJournal:
        """The journal the registry opens for ``address``; ``namespace`` is the schema."""
        return cls.from_url(address, schema=namespace or DEFAULT_SCHEMA)

    def __repr__(self) -> str:
        return f"PostgresJournal({self._db.location!r}, schema={self.schema!r})"

    @property
    def location(self) -> str:
        """The database address without its password, fit for messages."""
        return self._db.location

    @property
    def database(self) -> JournalDatabase:
        """The journal's connection object (its pool, driver and statements), which its
        components share: what a statement spanning the journal and a store in one database
        (the fused append) runs through."""
        return self._db

    @property
    def migrate_on_use(self) -> bool:
        """Whether the schema is migrated on first use (else only checked, and refused when
        missing or older)."""
        return self._db.migrate_on_use

    async def server(self, *, fresh: bool = False) -> ServerIdentity | None:
        """Which server, database and role this journal's pool reaches, as the server reports
        it (``backend.server_identity``: read once per pool; ``fresh``: read again)."""
        return await self._db.server(fresh=fresh)

    async def close(self) -> None:
        """Give back the pool (the last journal using it closes it; one passed in stays
        open); a later operation opens a new one."""
        await self._db.close()

    # -- the schema ----------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Apply the missing migration steps; return what was applied (empty when current).

        Refuses (``JournalCorrupt``) a schema newer than this release, or one whose version
        is current but whose tables are missing."""
        return await self._db.migrate()

    async def check(self) -> str | None:
        """None when the schema is at this release's version; otherwise a sentence saying
        what is missing or newer. Runs no DDL and writes nothing (a read-only transaction)."""
        return await self._db.check()

    async def schema_version(self) -> int | None:
        """The version recorded in the schema (None when it holds none); writes nothing."""
        return await self._db.schema_version()

    async def schema_tables(self) -> list[str] | None:
        """The tables the journal's schema holds, sorted (None when there is no such schema),
        for an operator told there is no journal. Only reads."""
        return await self._db.schema_tables()

    async def journal_schemas(self, *, most: int = 20) -> list[str]:
        """The schemas of this database holding a journal, sorted, up to ``most``. Only
        reads."""
        return await self._db.journal_schemas(most=most)

    async def drop(self) -> None:
        """Drop this journal's schema and everything in it (for tests and operators)."""
        await self._db.drop()

    # -- IntentJournal -----------------------------------------------------------------

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        row = intent_args(intent, state, owner)
        key = (intent.session_id, str(intent.backend))

        async def work(conn: Connection) -> None:
            found = await self._fenced(conn.fetchrow, self._db.sql.record, row, key)
            if found is not None:
                if found["added"]:
                    return
                if found["settled"]:
                    raise _already_settled(intent.intent_id)
                if found["prior"] is not None:
                    _compare(intent, found["prior"], self.keyring)
                    return
            # The fence fell (the session changed since the snapshot) or the id was taken
            # meanwhile: decide under the session's lock.
            async with conn.transaction():
                _count(await conn.fetchval(self._db.sql.lock_session, *key))
                found = await conn.fetchrow(self._db.sql.record_locked, *row)
                if found["settled"]:
                    raise _already_settled(intent.intent_id)
                if found["added"]:
                    return
                prior = found["prior"]
                if prior is None:
                    # Recorded a moment ago under another session's lock: read it now.
                    prior = await conn.fetchval(self._db.sql.intent_record, intent.intent_id)
                _compare(intent, prior, self.keyring)

        await self._db.run(work)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        row = intent_args(intent, state, owner)
        key = (intent.session_id, str(intent.backend))
        asked = _Asked(intent, state, owner, expect_write_count, self.keyring)

        async def work(conn: Connection) -> Opened:
            if clearing is not None:
                # A statement of its own just before the opening, on its connection: the same
                # as discard() first, so the opening never meets this wrapper's previous intent.
                await conn.execute(
                    self._db.sql.clear, clearing, *key, IntentState.IN_FLIGHT.value, str(owner)
                )
            rows = await self._fenced(
                conn.fetch, self._db.sql.open_intent, (*row, expect_write_count), key
            )
            if rows:
                # Everything below was read from one snapshot: a state the journal was in.
                opened = asked.answer(rows[0], rows, _count(rows[0]["write_count"]))
                if opened is not None:
                    return opened
            # The fence fell or the id was taken meanwhile: decide under the session's lock.
            taken = self._db.driver.UniqueViolationError
            try:
                async with conn.transaction():
                    # The session's lock, and its count as of now: nothing of this session
                    # can be opened, recorded, settled or counted until this transaction ends.
                    write_count = _count(await conn.fetchval(self._db.sql.lock_session, *key))
                    rows = await conn.fetch(
                        self._db.sql.open_locked, *row, write_count, expect_write_count
                    )
                    opened = asked.answer(rows[0], rows, write_count)
                    if opened is not None:
                        return opened
            except taken as exc:
                if getattr(exc, "constraint_name", None) not in TAKEN:
                    raise
            # Nothing was opened, and the snapshot did not say why: another transaction took
            # the id after it (only another session's can, this one's lock held).
            held = await conn.fetchrow(self._db.sql.held, intent.intent_id)
            opened = None if held is None else asked.holding(held, write_count)
            if opened is None:
                raise _other_content(intent)
            return opened

        return await self._db.run(work)

    async def _fenced(
        self,
        run: Callable[..., Awaitable[_T]],
        sql: dict[bool, str],
        row: Sequence[object],
        key: tuple[str, str],
    ) -> _T | None:
        """Run a fenced statement (autocommit), the variant taking the session's row to be
        there once this process made or met it (``retention.row_known``); None when another
        transaction took the intent's id after its snapshot (the statement changed nothing)."""
        counted = (self._db.location, self.schema, *key)
        try:
            found = await run(sql[row_known(counted)], *row)
        except self._db.driver.UniqueViolationError as exc:
            if getattr(exc, "constraint_name", None) not in TAKEN:
                raise
            return None
        row_known(counted, made=True)
        return found

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
        expect_fence: int | None = None,
        expect_updated_at: float | None = None,
    ) -> bool:
        claim = state is IntentState.RECONCILING and expect_fence is None
        sql = self._db.sql.transition(
            expect_state is not None,
            expect_owner is not None,
            expect_fence is not None,
            expect_updated_at is not None,
            claim,
        )
        args: list[object] = [state.value, str(owner), intent_id]
        if expect_state is not None:
            args.append(expect_state.value)
        if expect_owner is not None:
            args.append(str(expect_owner))
        if expect_fence is not None:
            args.append(expect_fence)
        if expect_updated_at is not None:
            args.append(expect_updated_at)

        async def work(conn: Connection) -> bool:
            # One statement: the server re-checks the expectations on the newest version of
            # the row, so two claims racing cannot both succeed.
            return await conn.fetchval(sql, *args) is not None

        return await self._db.run(work)

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        async def work(conn: Connection) -> None:
            if owner is None:
                await conn.execute(self._db.sql.discard, intent_id)
                return
            gone = await conn.fetchval(self._db.sql.discard_held, intent_id, str(owner), fence)
            if not gone and await conn.fetchval(self._db.sql.held_or_settled, intent_id):
                raise LeaseLost(
                    f"intent {intent_id} is no longer in flight under {owner}",
                    intent_id=intent_id,
                )

        await self._db.run(work)

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

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        # One more write of the session, stamped now; a session without a row gets one at
        # the floor plus this write (``statements.made_at_floor``).
        async def work(conn: Connection) -> int:
            return _count(await conn.fetchval(self._db.sql.count_write, session_id, str(backend)))

        return await self._db.run(work)

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        require_settling(decision, settling=True)
        intent_id = decision.intent_id
        key = (decision.session_id, str(decision.backend))
        args = (*decision_args(decision), None if owner is None else str(owner), fence)
        unique_violation = self._db.driver.UniqueViolationError

        async def work(conn: Connection) -> None:
            try:
                async with conn.transaction():
                    _count(await conn.fetchval(self._db.sql.lock_session, *key))
                    found = await conn.fetchrow(self._db.sql.settle, *args)
            except unique_violation as exc:
                if getattr(exc, "constraint_name", None) != "decisions_settle_once":
                    raise
                # Settled by another transaction meanwhile: perhaps with this very decision.
                again = await conn.fetchval(self._db.sql.settled_as, intent_id, decision.encode())
                if again is not None:
                    return
                raise _already_settled(intent_id) from None
            if found["settled"]:
                if found["again"]:
                    # The same call again, its first reply lost: already done.
                    return
                raise _already_settled(intent_id)
            if not found["allowed"]:
                raise LeaseLost(
                    f"intent {intent_id} is not claimed by {owner}"
                    + ("" if fence is None else f" with token {fence}"),
                    intent_id=intent_id,
                )

        await self._db.run(work)

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)

        async def work(conn: Connection) -> None:
            await conn.execute(self._db.sql.note, *decision_args(decision))

        await self._db.run(work)

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again`` (the same
        decision, counted once more), only while it is still ``previous``; whether it was."""
        require_settling(again, settling=False)
        args = (previous.intent_id, previous.encode(), again.encode())

        async def work(conn: Connection) -> bool:
            return await conn.fetchval(self._db.sql.note_again, *args) is not None

        return await self._db.run(work)

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        sql = self._db.sql.decisions(session_id is not None, intent_id is not None)
        args: list[object] = [value for value in (session_id, intent_id) if value is not None]
        args.append(limit)

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        return each(await self._db.run(work), _decision, lambda row: ("decision", row[0], row[1]))

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        if not ids:
            return {}
        sql = self._db.sql.newest_decisions

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, ids)

        found = each(await self._db.run(work), _decision, lambda row: ("decision", row[0], row[1]))
        return {decision.intent_id: decision for decision in found}
