"""Pruning the PostgreSQL journal, behind its back: a version-1 journal upgraded keeps its
counts and stamps them with the upgrade's time; the floor is kept in the database, so a new
journal object reads it; pruned rows leave the tables; a limited prune sweeps on past what it
keeps; a session keeps one row, with no index on the time a count was raised; a write that
lands between a prune's read and its delete keeps what it needs; a prune never waits for a
writer (a row held, the floor taken), and one stalled while holding the floor is ended by
the server. What every pruning journal does is in ``conformance/_journal_retention.py``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, Final

import pytest

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.schema import Schema
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action
from agents_reconcile._core.retention import Retention
from agents_reconcile.conformance._aside import _aside, _raw
from agents_reconcile.errors import JournalCorrupt, JournalUnavailable

from ..support.journal_support import BACKEND, make_decision, make_effect, make_intent
from ..support.servers import postgres_url

asyncpg = pytest.importorskip("asyncpg")

from agents_reconcile._backends.postgres import retention as pg_retention  # noqa: E402
from agents_reconcile._backends.postgres.backend import PostgresSchema  # noqa: E402
from agents_reconcile._backends.postgres.journal import SCHEMA, PostgresJournal  # noqa: E402

pytestmark = pytest.mark.postgres

Factory = Callable[..., PostgresJournal]
DAY: Final = 86_400.0
IDLE_NOW: Final = Retention(None, None, 0)
"""Idle counts go at once; decisions and receipts are kept."""
EVERYTHING_NOW: Final = Retention(0, 0, 0)
NOW: Final = "SELECT extract(epoch FROM clock_timestamp())::float8"
"""The journal's clock (the server's)."""


@pytest.fixture
def schema() -> str:
    """A schema name no other test uses."""
    return f"r_{uuid.uuid4().hex[:16]}"


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
    """Makes journals on the test schema; closes them and drops the schema afterwards."""
    made: list[PostgresJournal] = []

    def make() -> PostgresJournal:
        journal = PostgresJournal.from_url(postgres_url(), schema=schema)
        made.append(journal)
        return journal

    yield make
    for journal in made:
        await journal.close()
    await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def counts(admin: Any, schema: str) -> dict[str, int]:
    """The write counts stored, by session."""
    rows = await admin.fetch(f'SELECT session_id, write_count FROM "{schema}".slots WHERE slot = 0')
    return {row["session_id"]: row["write_count"] for row in rows}


async def floor(admin: Any, schema: str) -> int:
    return int(await admin.fetchval(f'SELECT write_count FROM "{schema}".write_floor'))


# -- the schema step ---------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["migrate", "on_use"])
async def test_a_version_1_journal_keeps_its_counts_stamped_at_the_upgrade(
    journals: Factory, admin: Any, schema: str, how: str
) -> None:
    """A journal at schema version 1 (its counts, an unresolved intent) is upgraded by
    ``migrate`` or on first use like a new one is made: its counts read as they were, each is
    stamped with the upgrade's time (never 0: none looks idle for longer than it was watched),
    the floor starts at 0, and a prune that keeps idle counts an hour removes none."""
    first = Schema("journal", SCHEMA.steps[:1], JournalCorrupt, SCHEMA.package, SCHEMA.folder)
    tables = ("decisions", "effects", "intents", "session_writes", "set_aside")
    version_1 = PostgresSchema(
        first, schema, version_table="schema_version", tables=tables, location="test"
    )
    assert await version_1.apply(admin) == ["journal schema 1"]
    await admin.executemany(
        f'INSERT INTO "{schema}".session_writes (session_id, backend, write_count)'
        " VALUES ($1, $2, $3)",
        [("idle", str(BACKEND), 5), ("busy", str(BACKEND), 2)],
    )
    busy = make_intent("busy-1", session_id="busy")
    await admin.execute(
        f'INSERT INTO "{schema}".intents (intent_id, session_id, backend, state, owner,'
        " created_at, updated_at, record, fence) VALUES ($1, $2, $3, 'failed', $4, 1, 1, $5, 1)",
        busy.intent_id,
        busy.session_id,
        str(busy.backend),
        str(current_owner()),
        busy.encode(),
    )
    before = await admin.fetchval(NOW)

    journal = journals()
    if how == "migrate":
        assert await journal.migrate() == [f"journal schema {n}" for n in range(2, 5)]
    assert await journal.write_count("idle", BACKEND) == 5
    after = await admin.fetchval(NOW)

    assert await journal.schema_version() == 4 and await journal.check() is None
    stamps = await admin.fetch(f'SELECT counted_at FROM "{schema}".slots WHERE slot = 0')
    assert len(stamps) == 2
    assert all(before <= row["counted_at"] <= after for row in stamps), (before, stamps, after)
    assert await floor(admin, schema) == 0
    kept = await journal.retention.prune(Retention(None, None, timedelta(hours=1)))
    assert kept.rows == 0 and kept.done
    assert await counts(admin, schema) == {"idle": 5, "busy": 2}
    assert await journal.write_count("busy", BACKEND) == 2
    assert [e.intent.intent_id for e in await journal.pending(None)] == ["busy-1"]


async def test_no_index_on_the_stamp_and_a_session_keeps_one_row(
    journals: Factory, admin: Any, schema: str
) -> None:
    """The slots have no index on the stamp (their key, the intent ids and the unresolved
    intents' listing only), and a session that only opens and clears keeps one row: its slot
    0, made by the first opening and updated in place by every later one and every
    clearing, never a row inserted or deleted per append."""
    journal = journals()
    owner = current_owner()
    previous: str | None = None
    for n in range(20):
        intent = make_intent(f"i-{n}")
        opened = await journal.open_intent(
            intent, state=IntentState.IN_FLIGHT, owner=owner, clearing=previous
        )
        assert opened.recorded
        previous = intent.intent_id
    await journal.discard("i-19", owner=owner)
    indexes = await admin.fetch(
        "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = $2"
        " ORDER BY indexname",
        schema,
        "slots",
    )
    assert [row["indexname"] for row in indexes] == [
        "slots_intent_id",
        "slots_pkey",
        "slots_unresolved",
    ]
    # The server counts a connection's updates once it ends: close the journal's pool.
    await journal.close()
    query = (
        "SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
        " WHERE schemaname = $1 AND relname = 'slots'"
    )
    # The first opening made the row; each later one, each clearing and the discard updated it.
    for _ in range(100):
        inserted, updated, deleted = await admin.fetchrow(query, schema)
        if updated >= 39:
            break
        await asyncio.sleep(0.05)
    assert (inserted, updated, deleted) == (1, 39, 0)


# -- the floor, and rows removed ---------------------------------------------------------------


async def test_the_floor_is_kept_in_the_database(
    journals: Factory, admin: Any, schema: str
) -> None:
    """Counts pruned raise the floor stored in the schema: a new journal object on the same
    schema reads sessions without a count as the floor and counts their writes above it, an
    opening included."""
    journal = journals()
    for _ in range(3):
        await journal.count_write("idle-a", BACKEND)
    await journal.count_write("idle-b", BACKEND)
    await asyncio.sleep(0.02)
    pruned = await journal.retention.prune(IDLE_NOW)
    assert (pruned.write_counts, pruned.done) == (2, True)
    assert pruned.bytes == 2 * len(str(BACKEND)) + len("idle-a") + len("idle-b")
    assert await counts(admin, schema) == {}
    assert await floor(admin, schema) == 3
    await journal.close()

    reopened = journals()
    assert await reopened.write_count("idle-b", BACKEND) == 3
    assert await reopened.write_count("never", BACKEND) == 3
    assert await reopened.count_write("idle-b", BACKEND) == 4
    opened = await reopened.open_intent(
        make_intent("new-1", session_id="new"), state=IntentState.IN_FLIGHT, owner=current_owner()
    )
    assert opened.recorded and opened.write_count == 3
    assert await counts(admin, schema) == {"idle-b": 4, "new": 4}
    # A count below the floor leaves it where it is.
    await reopened.discard("new-1")
    await admin.execute(f'UPDATE "{schema}".write_floor SET write_count = 9')
    await asyncio.sleep(0.02)
    assert (await reopened.retention.prune(IDLE_NOW)).write_counts == 2
    assert await floor(admin, schema) == 9


async def test_pruning_removes_the_rows_from_the_tables(
    journals: Factory, admin: Any, schema: str
) -> None:
    """Everything due leaves its table (decisions, set-aside entries, receipts, counts), with
    the bytes stored in them accounted for; what a guarantee needs stays: an unresolved
    intent, its old denial, its session's count, a started effect."""
    journal = journals()
    owner = current_owner()
    old = time.time() - 3 * DAY
    settled = make_intent("settled", session_id="done", created_at=old)
    await journal.record(settled, state=IntentState.FAILED, owner=owner)
    await journal.settle(make_decision(settled, decided_at=old))
    denied = make_intent("denied", session_id="open", created_at=old)
    await journal.record(denied, state=IntentState.FAILED, owner=owner)
    await journal.note(make_decision(denied, action=Action.DENIED, decided_at=old))
    await journal.record(
        make_intent("aside", session_id="damaged"), state=IntentState.FAILED, owner=owner
    )
    entry, decision = _aside(await _raw(journal, "aside"), old)
    assert await journal.aside.set_aside(await _raw(journal, "aside"), entry, decision)
    done, started = make_effect("done-call"), make_effect("started-call")
    for effect in (done, started):
        await journal.effects.begin(effect)
    await journal.effects.finish(done.with_receipt("charged", at=done.started_at + 1.0))
    due_bytes = await admin.fetchval(
        "SELECT"
        " (SELECT sum(octet_length(intent_id) + octet_length(session_id) + octet_length(backend)"
        " + octet_length(outcome) + octet_length(reason) + octet_length(action)"
        f" + octet_length(record)) FROM \"{schema}\".decisions WHERE intent_id <> 'denied')"
        " + (SELECT sum(octet_length(intent_id) + octet_length(session_id) + octet_length(meta)"
        f' + octet_length(record)) FROM "{schema}".set_aside)'
        " + (SELECT sum(octet_length(key) + octet_length(session_id) + octet_length(state)"
        f' + octet_length(owner) + octet_length(record)) FROM "{schema}".effects'
        " WHERE state = 'done')"
        " + (SELECT sum(octet_length(session_id) + octet_length(backend))"
        f" FROM \"{schema}\".slots WHERE slot = 0 AND session_id <> 'open')"
    )
    await asyncio.sleep(0.02)

    dry = await journal.retention.prune(EVERYTHING_NOW, dry_run=True)
    pruned = await journal.retention.prune(EVERYTHING_NOW)
    assert dry == pruned
    assert (pruned.decisions, pruned.set_aside, pruned.receipts, pruned.write_counts) == (
        2,
        1,
        1,
        2,
    )
    assert pruned.bytes == due_bytes and pruned.done
    left = await admin.fetch(f'SELECT intent_id, action FROM "{schema}".decisions')
    assert [(row["intent_id"], row["action"]) for row in left] == [("denied", "denied")]
    assert await admin.fetchval(f'SELECT count(*) FROM "{schema}".set_aside') == 0
    keys = await admin.fetch(f'SELECT key, state FROM "{schema}".effects')
    assert [(row["key"], row["state"]) for row in keys] == [(started.key, "started")]
    assert await counts(admin, schema) == {"open": 1}
    assert await floor(admin, schema) == 2  # settled: recorded, then settled
    assert [e.intent.intent_id for e in await journal.pending(None)] == ["denied"]
    assert (await journal.retention.prune(EVERYTHING_NOW)).rows == 0


async def test_a_limited_prune_sweeps_on_past_what_it_keeps(
    journals: Factory, admin: Any, schema: str
) -> None:
    """``limit=1`` examines one row of each kind a call, from where the last call stopped: an
    old denial of an unresolved intent at the start of the table is kept, and the sweep goes
    on past it to the decisions after it; a dry run moves nothing; ``done`` once at the end."""
    journal = journals()
    old = time.time() - 3 * DAY
    denied = make_intent("denied", created_at=old)
    await journal.record(denied, state=IntentState.FAILED, owner=current_owner())
    await journal.note(make_decision(denied, action=Action.DENIED, decided_at=old))
    for n in range(2):
        intent = make_intent(f"old-{n}", session_id=f"s-{n}", created_at=old)
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
        await journal.settle(make_decision(intent, decided_at=old))
    decisions_only = Retention(decisions=timedelta(days=1), receipts=None, idle_sessions=None)
    answers = []
    for _ in range(5):
        dry = await journal.retention.prune(decisions_only, limit=1, dry_run=True)
        pruned = await journal.retention.prune(decisions_only, limit=1)
        assert dry.decisions == pruned.decisions
        answers.append((pruned.decisions, pruned.done))
        if pruned.done:
            break
    assert answers == [(0, False), (1, False), (1, False), (0, True)]
    left = await admin.fetch(f'SELECT intent_id FROM "{schema}".decisions')
    assert [row["intent_id"] for row in left] == ["denied"]


# -- writes racing a prune ---------------------------------------------------------------------


@pytest.mark.parametrize("write", ["count_write", "open_intent"])
async def test_a_write_after_the_count_was_read_keeps_it(
    journals: Factory, admin: Any, schema: str, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """A write of the session that lands after the prune read its count as idle, before the
    delete, keeps the count (and the floor where it was): a write counted, or an intent
    opened (by another journal object, on connections of its own)."""
    journal, writer = journals(), journals()
    owner = current_owner()
    await writer.open_intent(make_intent("first"), state=IntentState.IN_FLIGHT, owner=owner)
    await writer.discard("first", owner=owner)
    await asyncio.sleep(0.02)
    examine = pg_retention._examine
    read: list[int] = []

    async def then_write(conn: Any, **options: Any) -> list[Any]:
        rows = await examine(conn, **options)
        if options["kind"].name == "write_counts" and rows:
            read.append(rows[0]["write_count"])
            if write == "count_write":
                await writer.count_write("session-a", BACKEND)
            else:
                second = make_intent("second")
                await writer.open_intent(second, state=IntentState.IN_FLIGHT, owner=owner)
        return rows

    monkeypatch.setattr(pg_retention, "_examine", then_write)
    pruned = await journal.retention.prune(IDLE_NOW)
    assert read and pruned.write_counts == 0
    assert await floor(admin, schema) == 0
    assert await counts(admin, schema) == {"session-a": read[0] + 1}
    assert await journal.write_count("session-a", BACKEND) == read[0] + 1


async def test_a_count_whose_row_a_writer_holds_is_passed_over(
    journals: Factory, admin: Any, schema: str
) -> None:
    """A session's row held by a writer (a transaction recording an intent holds it until it
    commits) is not idle: the prune passes it over at once rather than wait for the writer,
    and the writer's intent and count stand; once released and idle again, it goes."""
    journal = journals()
    await journal.count_write("session-a", BACKEND)
    await journal.count_write("session-b", BACKEND)
    await asyncio.sleep(0.02)
    theirs = make_intent("theirs")
    async with admin.transaction():
        await admin.execute(
            f'SELECT 1 FROM "{schema}".slots WHERE session_id = $1 AND slot = 0 FOR UPDATE',
            "session-a",
        )
        pruned = await asyncio.wait_for(journal.retention.prune(IDLE_NOW), 5)
        await admin.execute(
            f'INSERT INTO "{schema}".slots (intent_id, session_id, backend, slot, state, owner,'
            " created_at, updated_at, record, fence)"
            " VALUES ($1, $2, $3, 1, 'failed', $4, 1, 1, $5, 0)",
            theirs.intent_id,
            theirs.session_id,
            str(theirs.backend),
            str(current_owner()),
            theirs.encode(),
        )
        await admin.execute(
            f'UPDATE "{schema}".slots SET write_count = write_count + 1'
            " WHERE session_id = $1 AND slot = 0",
            "session-a",
        )
    assert pruned.write_counts == 1
    assert await counts(admin, schema) == {"session-a": 2}
    assert await floor(admin, schema) == 1
    await journal.discard("theirs")
    await asyncio.sleep(0.02)
    assert (await journal.retention.prune(IDLE_NOW)).write_counts == 1
    assert await counts(admin, schema) == {} and await floor(admin, schema) == 3


async def test_a_floor_taken_by_a_row_being_made_is_not_waited_for(
    journals: Factory, admin: Any, schema: str
) -> None:
    """While a statement making a session's row holds the floor (``FOR SHARE``), a prune of
    counts does not wait for it (nor make the writers behind it wait): it leaves the chunk
    and says it is not done; the next call removes it."""
    journal = journals()
    await journal.count_write("idle", BACKEND)
    await asyncio.sleep(0.02)
    async with admin.transaction():
        await admin.execute(f'SELECT 1 FROM "{schema}".write_floor FOR SHARE')
        pruned = await asyncio.wait_for(journal.retention.prune(IDLE_NOW), 5)
        assert (pruned.write_counts, pruned.done) == (0, False)
        # Another row is made meanwhile, at the floor as it stands.
        assert await asyncio.wait_for(journal.count_write("new", BACKEND), 5) == 1
    assert await counts(admin, schema) == {"idle": 1, "new": 1}
    pruned = await journal.retention.prune(IDLE_NOW)
    assert (pruned.write_counts, pruned.done) == (2, True)


async def test_a_decision_of_a_session_a_writer_holds_waits_for_a_later_pass(
    journals: Factory, admin: Any, schema: str
) -> None:
    """An old denial whose intent is gone is due, but not while a writer holds its session's
    row (it may be recording that intent again): the prune passes it over without waiting.
    The intent recorded again keeps it; gone again, the denial goes."""
    journal = journals()
    owner = current_owner()
    old = time.time() - 3 * DAY
    denied = make_intent("denied", created_at=old)
    await journal.record(denied, state=IntentState.IN_FLIGHT, owner=owner)
    await journal.note(make_decision(denied, action=Action.DENIED, decided_at=old))
    await journal.discard("denied", owner=owner)
    decisions_only = Retention(decisions=timedelta(days=1), receipts=None, idle_sessions=None)
    assert (await journal.retention.prune(decisions_only, dry_run=True)).decisions == 1
    async with admin.transaction():
        await admin.execute(
            f'SELECT 1 FROM "{schema}".slots WHERE session_id = $1 AND slot = 0 FOR UPDATE',
            "session-a",
        )
        pruned = await asyncio.wait_for(journal.retention.prune(decisions_only), 5)
        assert pruned.decisions == 0
        await admin.execute(
            f'INSERT INTO "{schema}".slots (intent_id, session_id, backend, slot, state, owner,'
            " created_at, updated_at, record, fence)"
            " VALUES ($1, $2, $3, 1, 'in_flight', $4, 1, 1, $5, 0)",
            denied.intent_id,
            denied.session_id,
            str(denied.backend),
            str(owner),
            denied.encode(),
        )
        await admin.execute(
            f'UPDATE "{schema}".slots SET write_count = write_count + 1'
            " WHERE session_id = $1 AND slot = 0",
            "session-a",
        )
    assert (await journal.retention.prune(decisions_only)).decisions == 0
    assert [d.action for d in await journal.decisions(intent_id="denied")] == [Action.DENIED]
    await journal.discard("denied", owner=owner)
    assert (await journal.retention.prune(decisions_only)).decisions == 1
    assert await journal.decisions(intent_id="denied") == []


async def test_a_pruner_stalled_holding_the_floor_loses_its_connection(
    journals: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pruner that stalls inside the decisions' transaction (where it holds the floor) is
    ended by the server once it stands idle past its limit: the floor is given back, a row
    waiting for it is made, and the prune fails as unavailable, having removed nothing."""
    journal, writer = journals(), journals()
    old = time.time() - 3 * DAY
    intent = make_intent("settled", created_at=old)
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(intent, decided_at=old))
    stalled = asyncio.Event()

    async def stall(conn: Any) -> None:
        stalled.set()
        await asyncio.sleep(3.0)

    monkeypatch.setattr(pg_retention, "_STALL_LIMIT_MS", 300)
    monkeypatch.setattr(pg_retention, "_held", stall)
    decisions_only = Retention(decisions=timedelta(days=1), receipts=None, idle_sessions=None)
    task = asyncio.create_task(journal.retention.prune(decisions_only))
    await asyncio.wait_for(stalled.wait(), 5)
    started = time.monotonic()
    assert await asyncio.wait_for(writer.count_write("new", BACKEND), 5) == 1
    assert time.monotonic() - started < 2.0
    with pytest.raises(JournalUnavailable):
        await task
    assert len(await writer.decisions()) == 1
