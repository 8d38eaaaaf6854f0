"""Behaviour specific to the PostgreSQL journal: a silent server, moved rows, one round trip
per open_intent and discard (and the fence that makes that safe), writes between a statement's
snapshot and its lock, its schema's migrations, effect rows, connections killed by the server
and replies lost after a commit. What every journal does (the contracts of
``agents_reconcile.conformance``; edited records, several workers, racing openings, records,
settlements, receipts and restarts, sealed receipts, a newer schema, closing, a second event
loop, addresses without passwords) is in ``test_conformance.py`` and ``test_journal.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from agents_reconcile._backends.journal import (
    JOURNAL_COMPONENTS,
    IntentJournal,
    IntentState,
    Opened,
)
from agents_reconcile._backends.opening import open_journal
from agents_reconcile._backends.rows import collecting_damage
from agents_reconcile._core.effect_records import Effect
from agents_reconcile._core.ownership import current_owner
from agents_reconcile.conformance._aside import _aside
from agents_reconcile.errors import (
    ConfigurationError,
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
    RecordTampered,
)
from agents_reconcile.testing import FaultProxy

from ..support.backends import closed_port
from ..support.journal_support import BACKEND, make_decision, make_effect, make_intent, proxy_to
from ..support.servers import Wire, postgres_url

asyncpg = pytest.importorskip("asyncpg")

from agents_reconcile._backends.postgres.journal import MIGRATIONS, SCHEMA_VERSION, PostgresJournal  # noqa: E402

pytestmark = pytest.mark.postgres

Factory = Callable[..., PostgresJournal]
JOURNAL_TABLES = {
    "decisions",
    "effects",
    "schema_version",
    "sealing_keys",
    "set_aside",
    "slots",
    "write_floor",
}
CURRENT = [(1, "0001_initial"), (2, "0002_pruning"), (3, "0003_sealing"), (4, "0004_slots")]
"""The steps a journal of this release has applied."""


def ids(entries: Sequence[Any]) -> list[str]:
    """Intent ids of journal entries, in order."""
    return [entry.intent.intent_id for entry in entries]


@pytest.fixture
def schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:16]}"


@pytest.fixture
async def admin() -> AsyncIterator[Any]:
    """A plain asyncpg connection to the test server, for looking behind the journal's back."""
    conn = await asyncpg.connect(postgres_url())
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def journals(schema: str, admin: Any) -> AsyncIterator[Factory]:
    """Makes journals (on the test schema unless told otherwise); closes them and drops their
    schemas afterwards."""
    made: list[PostgresJournal] = []
    url = postgres_url()

    def make(**options: Any) -> PostgresJournal:
        options.setdefault("schema", schema)
        journal = PostgresJournal.from_url(url, **options)
        made.append(journal)
        return journal

    yield make
    for journal in made:
        await journal.close()
    for name in {schema} | {journal.schema for journal in made}:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


async def schema_exists(admin: Any, name: str) -> bool:
    return bool(
        await admin.fetchval("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name)
    )


async def versions(admin: Any, name: str) -> list[tuple[int, str]]:
    rows = await admin.fetch(f'SELECT version, name FROM "{name}".schema_version ORDER BY version')
    return [(row["version"], row["name"]) for row in rows]


# -- reaching the server ----------------------------------------------------------------------


async def test_silent_server_times_out_after_connect_timeout() -> None:
    """A loopback listener that accepts and never answers makes the first operation raise
    JournalUnavailable after about connect_timeout, not hang."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    journal = PostgresJournal.from_url(
        f"postgresql://agent@127.0.0.1:{port}/journal", schema="j", connect_timeout=0.3
    )
    try:
        start = time.monotonic()
        with pytest.raises(JournalUnavailable):
            await journal.pending(None)
        assert 0.2 <= time.monotonic() - start < 3.0
    finally:
        await journal.close()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


def test_configuration_is_checked_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad schema names and URLs raise ConfigurationError; without asyncpg the error says how
    to install it."""
    for bad in ("", "1abc", "has space", 'quo"te', "semi;colon", "pg_reserved", "x" * 64):
        with pytest.raises(ConfigurationError):
            PostgresJournal.from_url("postgresql://127.0.0.1/db", schema=bad)
    with pytest.raises(ConfigurationError):
        PostgresJournal.from_url("mysql://127.0.0.1/db")
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    with pytest.raises(ConfigurationError, match=r"agents-reconcile\[postgres\]"):
        PostgresJournal.from_url("postgresql://127.0.0.1/db")


async def test_open_journal_dispatches_postgres_urls() -> None:
    """postgresql:// and postgres:// URLs open a PostgresJournal (nothing is connected yet)."""
    for scheme in ("postgresql", "postgres"):
        journal = open_journal(f"{scheme}://agent:pw@127.0.0.1:{closed_port()}/journal")
        assert isinstance(journal, PostgresJournal)
        assert isinstance(journal, IntentJournal)
        assert "pw" not in repr(journal)
        await journal.close()


async def test_connection_killed_mid_operation(journals: Factory, admin: Any, schema: str) -> None:
    """An open_intent whose server process is terminated while it waits raises
    JournalUnavailable, records nothing, and the journal works again afterwards."""
    journal = journals()
    assert await journal.count_write("session-a", BACKEND) == 1
    intent = make_intent("i-1")
    # A second connection watches: inside a transaction pg_stat_activity keeps showing what
    # it showed first, so the lock holder cannot be the one looking.
    watcher = await asyncpg.connect(postgres_url())
    try:
        async with admin.transaction():
            # Hold the session's lock so the operation is certainly running on the server.
            await admin.execute(
                f'SELECT 1 FROM "{schema}".slots WHERE session_id = $1 AND slot = 0 FOR UPDATE',
                "session-a",
            )
            task = asyncio.create_task(
                journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner())
            )
            victim = None
            for _ in range(500):
                victim = await watcher.fetchval(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND position($1 in query) > 0 AND pid <> $2",
                    f'"{schema}"',
                    admin.get_server_pid(),
                )
                if victim is not None or task.done():
                    break
                await asyncio.sleep(0.02)
            assert victim is not None, "the operation never waited on the lock"
            assert await watcher.fetchval("SELECT pg_terminate_backend($1)", victim)
            with pytest.raises(JournalUnavailable):
                await asyncio.wait_for(task, 10)
    finally:
        await watcher.close()

    assert await journal.pending(None) == []
    opened = await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner())
    assert opened == Opened(recorded=True, write_count=1)
    assert ids(await journal.pending("session-a")) == ["i-1"]


async def test_idle_connections_killed_by_the_server_are_replaced(admin: Any, schema: str) -> None:
    """After the server terminates every idle connection of the pool, the next operations
    open new ones and succeed."""
    name = f"ar-{schema}"
    url = postgres_url()
    url += f"{'&' if '?' in url else '?'}application_name={name}"
    journal = PostgresJournal.from_url(url, schema=schema)
    try:
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
        pids = await admin.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            name,
        )
        assert pids
        for _ in range(250):
            if not await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name
            ):
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)
        for _ in range(3):
            assert ids(await journal.pending("session-a")) == ["i-1"]
    finally:
        await journal.drop()
        await journal.close()


# -- records that cannot be trusted -----------------------------------------------------------


async def test_rows_moved_or_reshaped_are_refused(
    journals: Factory, admin: Any, schema: str
) -> None:
    """A row moved to another session, a decision row whose record names another intent, an
    unreadable state, and a slot with a column missing are refused with typed errors."""
    journal = journals()
    intent, other = make_intent("i-1"), make_intent("i-2", text="other")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.record(other, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(other))

    await admin.execute(f"""UPDATE "{schema}".intents SET session_id = 'someone-else'""")
    with pytest.raises(RecordTampered):
        await journal.pending(None)
    await admin.execute(f"""UPDATE "{schema}".intents SET session_id = 'session-a'""")
    await admin.execute(f"""UPDATE "{schema}".intents SET state = 'levitating'""")
    with pytest.raises(JournalCorrupt):
        await journal.get("i-1")
    # No constraint of the table keeps a slot whole: its readers refuse one with a column
    # missing, an intent's or a count's.
    await admin.execute(f"""UPDATE "{schema}".intents SET state = 'failed', fence = NULL""")
    with pytest.raises(JournalCorrupt):
        await journal.get("i-1")
    await admin.execute(f'UPDATE "{schema}".slots SET write_count = NULL WHERE slot = 0')
    with pytest.raises(JournalCorrupt):
        await journal.write_count("session-a", BACKEND)
    with pytest.raises(JournalCorrupt):
        await journal.count_write("session-a", BACKEND)

    await admin.execute(f"""UPDATE "{schema}".decisions SET intent_id = 'i-1'""")
    with pytest.raises(RecordTampered):
        await journal.decisions()


@pytest.mark.parametrize("count", [None, -5], ids=["count-missing", "count-negative"])
async def test_a_session_row_without_a_count_is_refused_before_anything_is_written(
    journals: Factory, admin: Any, schema: str, count: int | None
) -> None:
    """A session whose row lost its count is damaged: opening, recording and settling raise
    ``JournalCorrupt`` and write nothing, never reading it as the floor (a stale run refused)
    nor counting on top of it."""
    journal = journals()
    owner = current_owner()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=owner)
    await admin.execute(f'UPDATE "{schema}".slots SET write_count = $1 WHERE slot = 0', count)
    with pytest.raises(JournalCorrupt):
        await journal.open_intent(
            make_intent("i-2", text="second"), state=IntentState.IN_FLIGHT, owner=owner
        )
    with pytest.raises(JournalCorrupt):
        await journal.open_intent(
            make_intent("i-2", text="second"),
            state=IntentState.IN_FLIGHT,
            owner=owner,
            expect_write_count=3,
        )
    with pytest.raises(JournalCorrupt):
        await journal.record(
            make_intent("i-3", text="third"), state=IntentState.FAILED, owner=owner
        )
    with pytest.raises(JournalCorrupt):
        await journal.settle(make_decision(make_intent("i-1")))
    rows = await admin.fetch(
        f'SELECT slot, write_count, intent_id FROM "{schema}".slots ORDER BY slot'
    )
    assert [tuple(row) for row in rows] == [(0, count, None), (1, None, "i-1")]


async def test_a_slot_with_a_column_missing_is_set_aside_and_listed_as_damaged(
    journals: Factory, admin: Any, schema: str
) -> None:
    """An intent whose slot lost a column is refused when read, named as damage in a listing
    (whose next page goes on past it), and an operator can still set it aside as it was read:
    the row leaves the journal, its session's count moved once. Its creation time, the
    listings' order, cannot be lost (a listing would skip the row)."""
    journal = journals()
    owner = current_owner()
    for n in (1, 2):
        await journal.record(
            make_intent(f"i-{n}", created_at=float(n), text=str(n)),
            state=IntentState.FAILED,
            owner=owner,
        )
    await admin.execute(f"UPDATE \"{schema}\".slots SET state = NULL WHERE intent_id = 'i-1'")
    with collecting_damage() as damaged:
        first = await journal.pages.intents(limit=1)
    assert first.rows == [] and [(d.kind, d.ident) for d in damaged] == [("intent", "i-1")]
    assert first.after is not None
    second = await journal.pages.intents(limit=1, after=first.after)
    assert ids(second.rows) == ["i-2"]
    with pytest.raises(JournalCorrupt):
        await journal.get("i-1")

    raw = await journal.aside.raw("i-1")
    assert raw is not None
    aside, decision = _aside(raw, time.time())
    before = await journal.write_count("session-a", BACKEND)
    assert await journal.aside.set_aside(raw, aside, decision) is True
    assert await journal.write_count("session-a", BACKEND) == before + 1
    assert await journal.get("i-1") is None
    assert ids(await journal.pending("session-a")) == ["i-2"]
    with pytest.raises(asyncpg.NotNullViolationError):
        await admin.execute(f'UPDATE "{schema}".slots SET created_at = NULL')


# -- round trips and the fence ----------------------------------------------------------------


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Every pool a journal opens during the test reports to this wire."""
    counter = Wire()
    create_pool = asyncpg.create_pool

    def counted_pool(*args: Any, **options: Any) -> Any:
        return create_pool(*args, init=counter.attach, **options)

    monkeypatch.setattr(asyncpg, "create_pool", counted_pool)
    return counter


async def test_open_intent_and_discard_take_one_round_trip_each(
    journals: Factory, wire: Wire
) -> None:
    """Uncontended, open_intent (recording, retried, blocked or refused for its count),
    discard and record each send one request, one statement, and nothing when the connection
    goes back to the pool."""
    journal = journals()
    owner = current_owner()
    # Warm up: schema checked, every statement below prepared on the (one) connection.
    for n in range(2):
        warm = make_intent(f"warm-{n}", session_id="warm")
        await journal.open_intent(warm, state=IntentState.IN_FLIGHT, owner=owner)
        await journal.open_intent(
            make_intent("x", session_id="warm"), state=IntentState.IN_FLIGHT, owner=owner
        )
        await journal.discard(warm.intent_id)
        await journal.record(warm, state=IntentState.FAILED, owner=owner)
        await journal.discard(warm.intent_id)
    await wire.settled()

    async def trips(operation: Any) -> tuple[int, int]:
        wire.clear()
        await operation
        await wire.settled()
        return wire.flushes, len(wire.statements)

    first, second = make_intent("i-1"), make_intent("i-2", text="second")
    opening = journal.open_intent(first, state=IntentState.IN_FLIGHT, owner=owner)
    assert await trips(opening) == (1, 1)
    retried = journal.open_intent(first, state=IntentState.IN_FLIGHT, owner=owner)
    assert await trips(retried) == (1, 1)
    blocked = journal.open_intent(second, state=IntentState.IN_FLIGHT, owner=owner)
    assert await trips(blocked) == (1, 1)
    assert await trips(journal.discard("i-1")) == (1, 1)
    stale = journal.open_intent(
        second, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=0
    )
    assert await trips(stale) == (1, 1)
    assert await trips(journal.record(second, state=IntentState.FAILED, owner=owner)) == (1, 1)
    assert await trips(journal.record(second, state=IntentState.FAILED, owner=owner)) == (1, 1)
    assert ids(await journal.pending("session-a")) == ["i-2"]
    assert await journal.write_count("session-a", BACKEND) == 3


async def waiting_pid(watcher: Any, schema: str, task: asyncio.Task[Any]) -> int:
    """The server process of the journal statement on ``schema`` that waits on a lock."""
    for _ in range(500):
        pid = await watcher.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND position($1 in query) > 0 AND pid <> pg_backend_pid()",
            f'"{schema}"',
        )
        if pid is not None:
            return int(pid)
        assert not task.done(), "the operation finished without waiting"
        await asyncio.sleep(0.02)
    raise AssertionError("the operation never waited on a lock")


INSERT_INTENT = (
    'INSERT INTO "{0}".slots (intent_id, session_id, backend, slot, state, owner, created_at,'
    " updated_at, record, fence) VALUES ($1, $2, $3, (SELECT coalesce(max(slot), 0) + 1"
    " FROM \"{0}\".slots WHERE session_id = $2 AND backend = $3), 'failed', $4, $5, $6, $7, 0)"
)
"""An intent recorded beside its session's live one, as another transaction would."""


def intent_row(intent: Any) -> tuple[object, ...]:
    return (
        intent.intent_id,
        intent.session_id,
        str(intent.backend),
        str(current_owner()),
        intent.created_at,
        time.time(),
        intent.encode(),
    )


@pytest.mark.parametrize(
    ("inserted", "expected"),
    [(True, None), (False, None), (False, 1)],
    ids=["intent-and-count", "count-only", "count-only-expected"],
)
async def test_a_write_between_snapshot_and_lock_moves_the_fence(
    journals: Factory, admin: Any, schema: str, inserted: bool, expected: int | None
) -> None:
    """An intent recorded (and counted) after open_intent's snapshot, while open_intent waits
    for the session's row, blocks it: the fence saw the count move and the locked path found
    the intent. A count alone moving leads it to record, with the newer count, unless it
    expected the older count: then it writes nothing and returns the newer one."""
    journal = journals()
    assert await journal.count_write("session-a", BACKEND) == 1
    theirs, mine = make_intent("theirs", created_at=1.0), make_intent("mine", text="mine")
    watcher = await asyncpg.connect(postgres_url())
    try:
        async with admin.transaction():
            # Hold the session's row, as a transaction recording an intent would.
            await admin.execute(
                f'SELECT 1 FROM "{schema}".slots WHERE session_id = $1 AND slot = 0 FOR UPDATE',
                "session-a",
            )
            task = asyncio.create_task(
                journal.open_intent(
                    mine,
                    state=IntentState.IN_FLIGHT,
                    owner=current_owner(),
                    expect_write_count=expected,
                )
            )
            await waiting_pid(watcher, schema, task)
            if inserted:
                await admin.execute(INSERT_INTENT.format(schema), *intent_row(theirs))
            await admin.execute(
                f'UPDATE "{schema}".slots SET write_count = write_count + 1'
                " WHERE session_id = $1 AND slot = 0",
                "session-a",
            )
        opened = await asyncio.wait_for(task, 10)
    finally:
        await watcher.close()

    if inserted:
        assert ids(opened.blocking) == ["theirs"] and opened.write_count == 2
        assert ids(await journal.pending("session-a")) == ["theirs"]
        assert await journal.write_count("session-a", BACKEND) == 2
    elif expected is not None:
        assert opened == Opened(recorded=False, write_count=2)
        assert await journal.pending("session-a") == []
        assert await journal.write_count("session-a", BACKEND) == 2
    else:
        assert opened == Opened(recorded=True, write_count=2)
        assert ids(await journal.pending("session-a")) == ["mine"]
        assert await journal.write_count("session-a", BACKEND) == 3
        seq = await admin.fetchval(f'SELECT fence FROM "{schema}".intents')
        assert seq == 2


@pytest.mark.parametrize("operation", ["open_intent", "record"])
async def test_an_id_taken_after_the_snapshot_is_compared_under_the_lock(
    journals: Factory, admin: Any, schema: str, operation: str
) -> None:
    """When another transaction takes the intent's id after the fenced statement's snapshot,
    that statement fails on the key and changes nothing (its count is undone); the locked
    path then compares: other content conflicts, the same content is a no-op."""
    journal = journals()
    await journal.migrate()
    owner = current_owner()
    run = getattr(journal, operation)
    watcher = await asyncpg.connect(postgres_url())
    try:
        for name, held, expect_conflict in (
            ("other", make_intent("other", session_id="session-b"), True),
            ("same", make_intent("same"), False),
        ):
            async with admin.transaction():
                await admin.execute(INSERT_INTENT.format(schema), *intent_row(held))
                task = asyncio.create_task(
                    run(make_intent(name), state=IntentState.IN_FLIGHT, owner=owner)
                )
                await waiting_pid(watcher, schema, task)
            if expect_conflict:
                with pytest.raises(IntentConflict):
                    await asyncio.wait_for(task, 10)
            else:
                await asyncio.wait_for(task, 10)
    finally:
        await watcher.close()

    # Nothing counted: neither call inserted an intent.
    assert await journal.write_count("session-a", BACKEND) == 0
    assert ids(await journal.pending("session-a")) == ["same"]
    entry = await journal.get("same")
    assert entry is not None and entry.state is IntentState.FAILED


# -- the versioned schema ---------------------------------------------------------------------


async def test_first_use_migrates_and_check_creates_nothing(
    journals: Factory, admin: Any, schema: str
) -> None:
    """check() reports a missing schema and creates nothing; the first operation creates the
    schema at SCHEMA_VERSION; then check() is satisfied and migrate() has nothing to do."""
    journal = journals()
    problem = await journal.check()
    assert problem is not None
    assert "does not exist" in problem and "agents-reconcile migrate" in problem
    assert not await schema_exists(admin, schema)

    assert await journal.pending(None) == []

    assert await versions(admin, schema) == CURRENT
    assert SCHEMA_VERSION == len(MIGRATIONS) == 4
    tables = await admin.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    assert {row["tablename"] for row in tables} == JOURNAL_TABLES
    assert await journal.check() is None
    assert await journal.schema_version() == SCHEMA_VERSION
    assert await journal.migrate() == []
    assert await versions(admin, schema) == CURRENT


async def test_check_on_a_schema_with_no_step_applied_writes_nothing(
    journals: Factory, admin: Any, schema: str
) -> None:
    """check() on a schema whose version table is empty says what is missing and leaves the
    schema as it was."""
    await admin.execute(
        f'CREATE SCHEMA "{schema}"; CREATE TABLE "{schema}".schema_version'
        " (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
    )
    problem = await journals(migrate=False).check()
    assert problem is not None and "0001_initial" in problem and "older" in problem
    tables = await admin.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    assert [row["tablename"] for row in tables] == ["schema_version"]
    assert await versions(admin, schema) == []


async def test_migrate_false_refuses_a_schema_missing_or_with_no_step(
    journals: Factory, admin: Any, schema: str
) -> None:
    """With migrate=False, operations on a missing schema, then on one with no step applied,
    raise JournalCorrupt saying to run the migrate command, and create nothing; migrate()
    then brings the schema up to date and the journal works."""
    journal = journals(migrate=False)
    with pytest.raises(JournalCorrupt, match="agents-reconcile migrate"):
        await journal.pending(None)
    with pytest.raises(JournalCorrupt, match="agents-reconcile migrate"):
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    assert not await schema_exists(admin, schema)

    await admin.execute(
        f'CREATE SCHEMA "{schema}"; CREATE TABLE "{schema}".schema_version'
        " (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
    )
    with pytest.raises(JournalCorrupt, match="agents-reconcile migrate"):
        await journal.pending(None)
    assert await versions(admin, schema) == []

    assert await journal.migrate() == [f"journal schema {n}" for n in range(1, 5)]
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    assert ids(await journal.pending(None)) == ["i-1"]


async def test_migrated_schema_is_used_with_migrate_false(journals: Factory) -> None:
    """A journal with migrate=False works on a schema another journal migrated."""
    await journals().migrate()
    reader = journals(migrate=False)
    assert await reader.check() is None
    await reader.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    assert ids(await reader.pending(None)) == ["i-1"]


async def test_a_version_3_journal_moves_its_counts_and_intents_to_slots(
    journals: Factory, admin: Any, schema: str
) -> None:
    """A journal at schema version 3 is upgraded to slots as it stands: each count moves to its
    session's slot 0, every unresolved intent is recorded beside it (so each still blocks its
    session's next opening, and is listed, cleared and settled as before), a session with
    intents but no count reads as the floor, and once its intents are gone the session opens
    its next intent on slot 0."""
    from agents_reconcile._backends.postgres.backend import PostgresSchema
    from agents_reconcile._backends.postgres.database import SCHEMA
    from agents_reconcile._backends.schema import Schema

    three = Schema("journal", SCHEMA.steps[:3], JournalCorrupt, SCHEMA.package, SCHEMA.folder)
    version_3 = PostgresSchema(
        three, schema, version_table="schema_version", tables=("intents",), location="test"
    )
    assert await version_3.apply(admin) == [f"journal schema {n}" for n in range(1, 4)]
    await admin.execute(f'UPDATE "{schema}".write_floor SET write_count = 7')
    await admin.executemany(
        f'INSERT INTO "{schema}".session_writes (session_id, backend, write_count)'
        " VALUES ($1, $2, $3)",
        [("session-a", str(BACKEND), 9), ("session-b", str(BACKEND), 8)],
    )
    owner = current_owner()
    old = [
        (make_intent("a-1", created_at=2.0), "in_flight", 8),
        (make_intent("a-2", created_at=1.0, text="second"), "failed", 0),
        (make_intent("c-1", session_id="session-c"), "failed", 0),
    ]
    await admin.executemany(
        f'INSERT INTO "{schema}".intents (intent_id, session_id, backend, state, owner,'
        " created_at, updated_at, record, fence) VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8)",
        [
            (
                i.intent_id,
                i.session_id,
                str(i.backend),
                state,
                str(owner),
                i.created_at,
                i.encode(),
                fence,
            )
            for i, state, fence in old
        ],
    )

    journal = journals()
    assert await journal.migrate() == ["journal schema 4"]
    assert await journal.check() is None
    assert [await journal.write_count(s, BACKEND) for s in ("session-a", "session-b")] == [9, 8]
    assert await journal.write_count("session-c", BACKEND) == 7  # the floor
    assert ids(await journal.pending("session-a")) == ["a-2", "a-1"]
    assert ids(await journal.pending("session-c")) == ["c-1"]
    slots = await admin.fetch(
        f'SELECT intent_id, slot FROM "{schema}".slots WHERE intent_id IS NOT NULL'
        " ORDER BY intent_id"
    )
    assert [(row["intent_id"], row["slot"]) for row in slots] == [
        ("a-1", 2),
        ("a-2", 1),
        ("c-1", 1),
    ]
    assert (await journal.get("a-1")).fence == 8  # type: ignore[union-attr]

    mine = make_intent("a-3", text="third")
    opened = await journal.open_intent(mine, state=IntentState.IN_FLIGHT, owner=owner)
    assert not opened.recorded and ids(opened.blocking) == ["a-2", "a-1"]
    await journal.discard("a-1", owner=owner)
    await journal.settle(make_decision(make_intent("a-2", created_at=1.0, text="second")))
    assert await journal.write_count("session-a", BACKEND) == 11
    opened = await journal.open_intent(mine, state=IntentState.IN_FLIGHT, owner=owner)
    assert opened == Opened(recorded=True, write_count=11)
    live = await admin.fetchrow(
        f'SELECT slot, write_count FROM "{schema}".slots WHERE intent_id = $1', "a-3"
    )
    assert (live["slot"], live["write_count"]) == (0, 12)


async def test_workers_starting_together_migrate_once(
    journals: Factory, admin: Any, schema: str
) -> None:
    """Journals migrating one schema at the same moment apply each step once: one returns it,
    the others nothing; on another schema, journals whose first operations race all work."""
    results = await asyncio.gather(*(journals().migrate() for _ in range(4)))
    every = [f"journal schema {n}" for n in range(1, 5)]
    assert sorted(results) == [[], [], [], every]
    assert await versions(admin, schema) == CURRENT

    other = f"{schema}_b"
    racing = [journals(schema=other) for _ in range(4)]
    await asyncio.gather(*(journal.pending(None) for journal in racing))
    assert await versions(admin, other) == CURRENT


async def test_drop_removes_the_schema(journals: Factory, admin: Any, schema: str) -> None:
    """drop() removes the schema; the next operation creates it afresh and empty."""
    journal = journals()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await journal.drop()
    assert not await schema_exists(admin, schema)
    assert await journal.pending(None) == []
    assert await versions(admin, schema) == CURRENT


async def test_a_drop_the_server_ends_as_a_deadlock_is_made_again(
    journals: Factory, admin: Any, schema: str
) -> None:
    """A statement still running while the schema is dropped (a clearing left in the
    background) holds the newest table and then asks for the oldest, which the drop locked
    first: the server ends the drop as a deadlock, and drop() makes it again once the other
    transaction has gone on."""
    journal = journals()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    tables = await admin.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.oid",
        schema,
    )
    oldest, newest = tables[0]["relname"], tables[-1]["relname"]
    writer = await asyncpg.connect(postgres_url())
    # The server checks for a deadlock in the session that has waited deadlock_timeout: the
    # writer's is longer, so the drop's check always finds the cycle first.
    await writer.execute("SET deadlock_timeout = '10s'")
    try:
        async with writer.transaction():
            await writer.execute(f'LOCK TABLE "{schema}".{newest} IN ROW EXCLUSIVE MODE')
            dropping = asyncio.ensure_future(journal.drop())
            for _ in range(250):  # until the drop waits for the newest table
                await asyncio.sleep(0.02)
                waiting = await admin.fetchval(
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE NOT l.granted AND n.nspname = $1 AND c.relname = $2",
                    schema,
                    newest,
                )
                if waiting:
                    break
            # The drop's deadlock check fires first: the server ends the drop.
            await writer.execute(f'LOCK TABLE "{schema}".{oldest} IN ROW SHARE MODE')
        await dropping
    finally:
        await writer.close()
    assert not await schema_exists(admin, schema)


# -- effects ----------------------------------------------------------------------------------


def taken_by(effect: Effect, owner: str) -> Effect:
    """``effect`` started again under ``owner``, one attempt more."""
    return dataclasses.replace(effect, owner=owner, attempts=effect.attempts + 1)


async def test_an_effect_is_stored_as_encoded(journals: Factory, admin: Any, schema: str) -> None:
    """The row holds the key, session, state and owner of the record, which is the bytes of
    Effect.encode(); finishing turns the row done in place."""
    journal = journals()
    effect = make_effect()
    await journal.effects.begin(effect)
    query = f'SELECT key, session_id, state, owner, record FROM "{schema}".effects'
    row = await admin.fetchrow(query)
    assert tuple(row) == (effect.key, "session-a", "started", effect.owner, effect.encode())
    done = effect.with_receipt("charged 5", at=1_700_000_010.0)
    assert await journal.effects.finish(done) == done
    row = await admin.fetchrow(query)
    assert tuple(row) == (effect.key, "session-a", "done", effect.owner, done.encode())


INSERT_EFFECT = (
    'INSERT INTO "{}".effects (key, session_id, state, owner, created_at, updated_at, record)'
    " VALUES ($1, $2, 'started', $3, $4, $4, $5)"
)


async def test_a_key_recorded_after_the_snapshot_is_read_afresh(
    journals: Factory, admin: Any, schema: str
) -> None:
    """An effects.begin() that waits on a key another transaction is inserting, and finds it
    committed, answers with that transaction's record (read in a new snapshot), not recorded."""
    journal = journals()
    await journal.migrate()
    theirs, mine = make_effect(owner="theirs/1/1"), make_effect(owner="mine/2/2")
    watcher = await asyncpg.connect(postgres_url())
    try:
        async with admin.transaction():
            await admin.execute(
                INSERT_EFFECT.format(schema),
                theirs.key,
                theirs.session_id,
                theirs.owner,
                time.time(),
                theirs.encode(),
            )
            task = asyncio.create_task(journal.effects.begin(mine))
            await waiting_pid(watcher, schema, task)
        stored, recorded = await asyncio.wait_for(task, 10)
    finally:
        await watcher.close()
    assert not recorded and stored == theirs and stored.owner == "theirs/1/1"


async def test_misused_states_are_refused_before_any_write(journals: Factory) -> None:
    """effects.begin() and effects.restart() take started effects, effects.finish() a receipt."""
    journal = journals()
    effect = make_effect()
    done = effect.with_receipt("ok", at=1.0)
    with pytest.raises(ValueError, match="started"):
        await journal.effects.begin(done)
    with pytest.raises(ValueError, match="started"):
        await journal.effects.restart(done, expect_owner=effect.owner)
    with pytest.raises(ValueError, match="done"):
        await journal.effects.finish(effect)
    assert await journal.effects.get(effect.key) is None


async def test_effect_rows_moved_or_reshaped_are_refused(
    journals: Factory, admin: Any, schema: str
) -> None:
    """An effect row moved to another session, or whose owner or state column no longer says
    what its record does, is refused (RecordTampered); an inspection read reports it and
    returns the others. A receipt for a key moved away is refused the same way, unstored."""
    journal = journals()
    effect, other = make_effect("c1"), make_effect("c2")
    await journal.effects.begin(effect)
    await journal.effects.begin(other)
    table = f'"{schema}".effects'
    await admin.execute(
        f"UPDATE {table} SET session_id = 'someone-else' WHERE key = $1", effect.key
    )
    with pytest.raises(RecordTampered):
        await journal.effects.of_session("someone-else")
    with pytest.raises(RecordTampered):
        await journal.effects.get(effect.key)
    with pytest.raises(RecordTampered):
        await journal.effects.finish(effect.with_receipt("ok", at=1.0))
    for edit in ("session_id = 'session-a', owner = 'thief/9/9'", "owner = $2, state = 'done'"):
        args = (effect.key, effect.owner) if "$2" in edit else (effect.key,)
        await admin.execute(f"UPDATE {table} SET {edit} WHERE key = $1", *args)
        with pytest.raises(RecordTampered):
            await journal.effects.get(effect.key)
        with collecting_damage() as damaged:
            assert await journal.effects.of_session("session-a") == [other]
        assert [(d.kind, d.ident) for d in damaged] == [("effect", effect.key)]


async def test_effects_take_one_round_trip_each(journals: Factory, wire: Wire) -> None:
    """Uncontended, effects.begin() (recording or finding the key), effects.restart(),
    effects.finish() and effects.get() each send one request, one statement; the same receipt again
    reads the row in a second one."""
    journal = journals()
    # Warm up: schema checked, every statement below prepared on the (one) connection.
    for call_id in ("warm-1", "warm-2"):
        warm = make_effect(call_id)
        await journal.effects.begin(warm)
        await journal.effects.begin(warm)
        moved = taken_by(warm, "w/2/2")
        await journal.effects.restart(moved, expect_owner=warm.owner)
        await journal.effects.finish(moved.with_receipt("ok", at=1.0))
        await journal.effects.finish(moved.with_receipt("ok", at=1.0))
        await journal.effects.get(warm.key)
    await wire.settled()

    async def trips(operation: Any) -> tuple[int, int]:
        wire.clear()
        await operation
        await wire.settled()
        return wire.flushes, len(wire.statements)

    effect = make_effect()
    assert await trips(journal.effects.begin(effect)) == (1, 1)
    assert await trips(journal.effects.begin(effect)) == (1, 1)
    moved = taken_by(effect, "w/2/2")
    assert await trips(journal.effects.restart(moved, expect_owner=effect.owner)) == (1, 1)
    done = moved.with_receipt("ok", at=2.0)
    assert await trips(journal.effects.finish(done)) == (1, 1)
    assert await trips(journal.effects.finish(done)) == (2, 2)
    assert await trips(journal.effects.get(effect.key)) == (1, 1)


# -- replies lost on the way back ---------------------------------------------------------------


@pytest.fixture
async def proxied(
    schema: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[PostgresJournal, FaultProxy, list[bytes]]]:
    """A journal whose connections go through a proxy that can lose a reply, and a list: a
    marker put there loses the reply to the next request that carries it."""
    proxy, through = await proxy_to(postgres_url())
    markers: list[bytes] = []
    create_pool = asyncpg.create_pool

    async def watch(conn: Any) -> None:
        transport = conn._transport
        send = transport.write

        def write(data: Any) -> Any:
            if markers and markers[0] in bytes(data):
                markers.clear()
                proxy.lose_next_reply()
            return send(data)

        transport.write = write

    monkeypatch.setattr(
        asyncpg, "create_pool", lambda *args, **options: create_pool(*args, init=watch, **options)
    )
    journal = PostgresJournal.from_url(through, schema=schema)
    yield journal, proxy, markers
    await journal.close()
    await proxy.close()
    await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_a_lost_reply_to_open_intent_is_answered_by_the_retry(
    proxied: tuple[PostgresJournal, FaultProxy, list[bytes]], admin: Any, schema: str
) -> None:
    """open_intent whose reply is lost after its statement committed, made again on a new
    connection, answers recorded with the count the first attempt saw; the intent is counted
    once."""
    journal, proxy, _ = proxied
    owner = current_owner()
    intent = make_intent("i-1")
    # Warm-up: the schema is made and the statements prepared (the first opening of a session
    # makes its row, the next ones take it as there), so the request whose reply is lost is
    # the statement itself.
    for warm in ("warm-1", "warm-2"):
        await journal.open_intent(make_intent(warm), state=IntentState.IN_FLIGHT, owner=owner)
        await journal.discard(warm)

    proxy.lose_next_reply()
    with pytest.raises(JournalUnavailable):
        await journal.open_intent(
            intent, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=4
        )
    assert proxy.lost_replies == 1
    stored = await admin.fetchval(f'SELECT fence FROM "{schema}".intents')
    assert stored == 4

    opened = await journal.open_intent(
        intent, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=4
    )
    assert opened == Opened(recorded=True, write_count=4)
    assert ids(await journal.pending("session-a")) == ["i-1"]
    assert await journal.write_count("session-a", BACKEND) == 5


async def test_a_lost_reply_to_settle_is_answered_by_the_retry(
    proxied: tuple[PostgresJournal, FaultProxy, list[bytes]], admin: Any, schema: str
) -> None:
    """settle whose reply to COMMIT is lost, made again on a new connection, succeeds without
    storing or counting the decision twice."""
    journal, proxy, markers = proxied
    owner = current_owner()
    intent = make_intent("i-1")
    await journal.open_intent(intent, state=IntentState.RECONCILING, owner=owner)
    decision = make_decision(intent)

    markers.append(b"COMMIT")
    with pytest.raises(JournalUnavailable):
        await journal.settle(decision, owner=owner)
    assert proxy.lost_replies == 1
    assert await admin.fetchval(f'SELECT count(*) FROM "{schema}".decisions') == 1

    await journal.settle(decision, owner=owner)
    assert await journal.decisions(intent_id="i-1") == [decision]
    assert await journal.write_count("session-a", BACKEND) == 2


async def test_a_lost_reply_to_effects_finish_is_answered_by_the_retry(
    proxied: tuple[PostgresJournal, FaultProxy, list[bytes]], admin: Any, schema: str
) -> None:
    """effects.finish() whose reply is lost after its UPDATE committed, made again on a new
    connection, returns the receipt stored by the first attempt."""
    journal, proxy, _ = proxied
    # Warm-up: the schema is made and the statement prepared, so the request whose reply is
    # lost is the statement itself.
    warm = make_effect("warm")
    await journal.effects.begin(warm)
    await journal.effects.finish(warm.with_receipt("ok", at=1.0))
    effect = make_effect()
    await journal.effects.begin(effect)
    done = effect.with_receipt("charged 5", at=2.0)

    proxy.lose_next_reply()
    with pytest.raises(JournalUnavailable):
        await journal.effects.finish(done)
    assert proxy.lost_replies == 1
    state = await admin.fetchval(f'SELECT state FROM "{schema}".effects WHERE key = $1', effect.key)
    assert state == "done"

    assert await journal.effects.finish(done) == done
    assert await journal.effects.get(effect.key) == done


async def test_two_clearings_of_one_intent_at_once_count_one_write(
    journals: Factory, schema: str, admin: Any
) -> None:
    """The background clearing of an acknowledged intent and a reader's clearing of the same
    intent, both started while the session's count row is locked (so that both statements see
    the intent): it goes once and the count moves once. A second count made a run that had
    seen every write of the session look stale (``stale_state``)."""
    journal = journals()
    me = current_owner()
    intent = make_intent("twice")
    assert (await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)).recorded
    before = await journal.write_count(intent.session_id, intent.backend)
    async with admin.transaction():
        await admin.execute(f'SELECT write_count FROM "{schema}".slots WHERE slot = 0 FOR UPDATE')
        both = asyncio.gather(
            journal.discard(intent.intent_id, owner=me),
            journal.discard(intent.intent_id, owner=me),
        )
        await asyncio.sleep(0.3)  # both statements started, their snapshots taken, waiting
    await asyncio.wait_for(both, 10)
    assert await journal.get(intent.intent_id) is None
    assert await journal.write_count(intent.session_id, intent.backend) == before + 1


# -- the driver's errors, translated ------------------------------------------------------------


class Dropping(asyncpg.Connection):  # type: ignore[misc]
    """A real connection that, once ``failure`` is set, raises it from every statement it is
    asked to run instead of sending it, as a dropped connection makes asyncpg do."""

    failure: BaseException | None = None

    def _failing(self) -> None:
        if Dropping.failure is not None:
            raise Dropping.failure

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._failing()
        return await super().execute(*args, **kwargs)

    async def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._failing()
        return await super().executemany(*args, **kwargs)

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        self._failing()
        return await super().fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        self._failing()
        return await super().fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        self._failing()
        return await super().fetchval(*args, **kwargs)

    async def prepare(self, *args: Any, **kwargs: Any) -> Any:
        self._failing()
        return await super().prepare(*args, **kwargs)


DRIVER_FAILURES: dict[str, Callable[[], BaseException]] = {
    "another operation in progress": lambda: asyncpg.InternalClientError(
        "cannot switch to state 11; another operation (2) is in progress"
    ),
    "closed mid-operation": lambda: asyncpg.ConnectionDoesNotExistError(
        "connection was closed in the middle of operation"
    ),
    "closed": lambda: asyncpg.InterfaceError("connection is closed"),
    "terminated by the server": lambda: asyncpg.AdminShutdownError(
        "terminating connection due to administrator command"
    ),
    "reset by peer": lambda: ConnectionResetError(104, "Connection reset by peer"),
    "timed out": lambda: TimeoutError(),
}


async def every_operation(journal: PostgresJournal, store: Any) -> dict[str, Any]:
    """One call of each coroutine the journal (and the one-step append it runs) offers, with
    arguments it can take as they are (set up while the connections still work)."""
    from agents_reconcile._backends.aside import SetAside
    from agents_reconcile._backends.postgres import fused
    from agents_reconcile._core.records import Action
    from agents_reconcile._core.retention import Retention

    owner = current_owner()
    await journal.record(make_intent("held"), state=IntentState.FAILED, owner=owner)
    raw = await journal.aside.raw("held")
    assert raw is not None
    aside = SetAside.of(raw, problem="p", actor="a", reason="r", at=time.time())
    effect = make_effect("call")
    await journal.effects.begin(effect)
    later = make_intent("later", session_id=store.session_id)
    decision = make_decision(make_intent("held"), action=Action.DROPPED)
    denial = make_decision(make_intent("held"), action=Action.DENIED)
    await store.ready()  # the store's schema checked while the connections still work
    later = dataclasses.replace(later, expected_revision=await store.head())
    return {
        "effects.begin": lambda: journal.effects.begin(make_effect("other-call")),
        "check": journal.check,
        "count_write": lambda: journal.count_write("session-a", BACKEND),
        "decisions": journal.decisions,
        "discard": lambda: journal.discard("held", owner=owner),
        "drop": journal.drop,
        "effects.get": lambda: journal.effects.get("call"),
        "effects.of_session": lambda: journal.effects.of_session("session-a"),
        "effects.finish": lambda: journal.effects.finish(effect.with_receipt("ok", at=time.time())),
        "get": lambda: journal.get("held"),
        "is_settled": lambda: journal.is_settled("held"),
        "journal_schemas": journal.journal_schemas,
        "migrate": journal.migrate,
        "newest_decisions": lambda: journal.newest_decisions(["held"]),
        "note": lambda: journal.note(denial),
        "note_again": lambda: journal.note_again(denial, denial),
        "open_intent": lambda: journal.open_intent(
            make_intent("new"), state=IntentState.IN_FLIGHT, owner=owner
        ),
        "pending": lambda: journal.pending(None),
        "pages.intents": lambda: journal.pages.intents(limit=5),
        "retention.prune": lambda: journal.retention.prune(Retention(0, 0, 0)),
        "aside.raw": lambda: journal.aside.raw("held"),
        "record": lambda: journal.record(
            make_intent("recorded"), state=IntentState.FAILED, owner=owner
        ),
        "effects.restart": lambda: journal.effects.restart(effect, expect_owner=str(owner)),
        "schema_tables": journal.schema_tables,
        "schema_version": journal.schema_version,
        "server": lambda: journal.server(fresh=True),
        "aside.set_aside": lambda: journal.aside.set_aside(raw, aside, decision),
        "aside.entries": journal.aside.entries,
        "aside.kept": lambda: journal.aside.kept("held"),
        "sealing.mark": lambda: journal.sealing.mark(["aaaa000000000001"]),
        "sealing.keys": journal.sealing.keys,
        "settle": lambda: journal.settle(decision),
        "effects.started": journal.effects.started,
        "pages.started_effects": lambda: journal.pages.started_effects(limit=5),
        "pages.counts_writes_of": lambda: journal.pages.counts_writes_of("session-a"),
        "transition": lambda: journal.transition("held", state=IntentState.FAILED, owner=owner),
        "write_count": lambda: journal.write_count("session-a", BACKEND),
        "one-step append": lambda: fused.Pair(journal, store).append(
            later,
            [{"role": "user", "content": "x"}],
            owner=owner,
            clearing=None,
            seen_write_count=None,
        ),
        "record of a failed one-step append": lambda: fused.record_failed(
            journal, later, state=IntentState.FAILED, owner=owner, clearing=None
        ),
        "same database": lambda: fused.same_database(journal, store),
    }


@pytest.mark.parametrize("failure", DRIVER_FAILURES)
async def test_no_driver_error_reaches_the_caller_untranslated(
    failure: str, schema: str, admin: Any
) -> None:
    """Whatever the driver raises on a connection that dropped (among them asyncpg's internal
    "another operation is in progress"), every operation of the journal and of the one-step
    append it runs raises ``JournalUnavailable`` from it instead, naming the journal, and the
    journal works again once the connection does."""
    from agents_reconcile._backends.postgres.store import RevisionedPostgresSession

    pool = await asyncpg.create_pool(
        postgres_url(), min_size=1, max_size=2, connection_class=Dropping
    )
    journal = PostgresJournal(pool=pool, schema=schema)
    store = RevisionedPostgresSession.from_url("guarded", postgres_url(), schema=f"{schema}_s")
    try:
        calls = await every_operation(journal, store)
        offered = {
            name
            for name in dir(PostgresJournal)
            if not name.startswith("_")
            and name != "close"
            and asyncio.iscoroutinefunction(getattr(PostgresJournal, name))
        }
        offered |= {
            f"{part}.{name}"
            for part in JOURNAL_COMPONENTS
            if getattr(journal, part) is not None
            for name in dir(getattr(journal, part))
            if not name.startswith("_")
            and asyncio.iscoroutinefunction(getattr(getattr(journal, part), name))
        }
        assert offered <= set(calls), offered - set(calls)
        for name, call in calls.items():
            Dropping.failure = DRIVER_FAILURES[failure]()
            try:
                with pytest.raises(JournalUnavailable) as raised:
                    await call()
            finally:
                Dropping.failure = None
            assert raised.value.__cause__ is not None, name
            assert type(raised.value.__cause__).__module__.split(".")[0] in (
                "asyncpg",
                "builtins",
            ), name
            assert "PostgreSQL journal" in str(raised.value), name
        assert ids(await journal.pending("session-a")) == ["held"]
    finally:
        Dropping.failure = None
        await store.drop()
        await store.close()
        await journal.close()
        await pool.close()
