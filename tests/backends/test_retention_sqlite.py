"""Pruning the SQLite journal, beyond the contracts every journal keeps: a version-1 file is
upgraded with its counts kept and stamped at the upgrade, the floor is in the file (a journal
opened on it later reads it), pruned rows leave the file, a write that lands between the
pruner's read and its delete keeps what it needs, and ``limit`` sweeps the tables in key
order from where the previous call stopped."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.schema import Schema
from agents_reconcile._backends.sqlite import retention
from agents_reconcile._backends.sqlite.backend import SQLiteSchema
from agents_reconcile._backends.sqlite.files import SCHEMA
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action
from agents_reconcile._core.retention import Retention
from agents_reconcile.errors import JournalCorrupt

from ..support.journal_support import BACKEND, STRANGER, make_decision, make_effect, make_intent

DAY = 86_400.0
IDLE_NOW = Retention(None, None, 0)
"""Every idle session's count goes; decisions and receipts are kept."""


def query(path: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, args).fetchall()


def floor_of(path: Path) -> int:
    [(floor,)] = query(path, "SELECT write_count FROM write_floor")
    return int(floor)


def meanwhile(write: Callable[[], Coroutine[Any, Any, object]]) -> None:
    """Run ``write`` to its end as another worker would: on a thread and event loop of its
    own, while the caller (the pruner, between two of its statements) waits."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[SQLiteJournal]:
    instance = SQLiteJournal(tmp_path / "journal.db")
    yield instance
    await instance.close()


# -- the schema step ----------------------------------------------------------------------


def version_1_journal(path: Path) -> None:
    """A journal file as the first release left it: schema step 1 alone, a session counted
    through its intent (the step's trigger) and one counted by hand."""
    first = Schema(
        "journal", SCHEMA.steps[:1], SCHEMA.error, package=SCHEMA.package, folder=SCHEMA.folder
    )
    SQLiteSchema(first, "journal_schema").migrate_file(path, 5.0)
    intent = make_intent("open-1", session_id="busy")
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO intents (intent_id, session_id, backend, state, owner, created_at,"
            " updated_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                intent.intent_id,
                intent.session_id,
                str(BACKEND),
                IntentState.IN_FLIGHT.value,
                str(current_owner()),
                intent.created_at,
                intent.created_at,
                intent.encode(),
            ),
        )
        conn.execute(
            "INSERT INTO session_writes (session_id, backend, write_count) VALUES (?, ?, 7)",
            ("idle", str(BACKEND)),
        )


@pytest.mark.parametrize("how", ["migrate", "on first use"])
async def test_a_version_1_journal_keeps_its_counts_stamped_at_the_upgrade(
    tmp_path: Path, how: str
) -> None:
    """Upgrading a version-1 file (by ``migrate`` or by the first operation) keeps every count,
    stamps each with the time of the upgrade (not 0: no session looks idle for longer than
    the journal has watched it), starts the floor at 0, and counts as version 2 does."""
    path = tmp_path / "journal.db"
    version_1_journal(path)
    assert query(path, "SELECT max(version) FROM journal_schema") == [(1,)]
    journal = SQLiteJournal(path)
    try:
        before = time.time()
        if how == "migrate":
            assert await journal.migrate() == [
                "journal schema 2",
                "journal schema 3",
                "journal schema 4",
            ]
        else:
            assert [e.intent.intent_id for e in await journal.pending("busy")] == ["open-1"]
        after = time.time()
        assert await journal.schema_version() == 4
        assert await journal.write_count("idle", BACKEND) == 7
        assert await journal.write_count("busy", BACKEND) == 1
        stamps = [at for (at,) in query(path, "SELECT counted_at FROM live")]
        # SQLite's clock reads milliseconds.
        assert len(stamps) == 2 and all(before - 0.002 <= at <= after + 0.002 for at in stamps)
        assert floor_of(path) == 0

        kept = await journal.retention.prune(Retention(None, None, timedelta(minutes=1)))
        assert kept.write_counts == 0, "counts stamped at the upgrade were taken for idle"
        assert await journal.count_write("idle", BACKEND) == 8
        opened = await journal.open_intent(
            make_intent("new-1", session_id="new"), state=IntentState.IN_FLIGHT, owner=STRANGER
        )
        assert (opened.recorded, opened.write_count) == (True, 0)
        counted = dict(query(path, "SELECT session_id, counted_at FROM live"))
        assert counted["idle"] >= after and counted["new"] >= after
    finally:
        await journal.close()


# -- the floor ----------------------------------------------------------------------------


async def test_the_floor_is_kept_in_the_file(tmp_path: Path) -> None:
    """Pruned counts raise the floor in the file: a journal opened on it afterwards reads a
    session without a count as the highest count pruned, counts its next write above it, and
    opens a new session's intent at it (its fencing token too)."""
    path = tmp_path / "journal.db"
    first = SQLiteJournal(path)
    for _ in range(5):
        await first.count_write("a", BACKEND)
    for _ in range(2):
        await first.count_write("b", BACKEND)
    await asyncio.sleep(0.01)
    pruned = await first.retention.prune(IDLE_NOW)
    assert (pruned.write_counts, pruned.done) == (2, True)
    assert query(path, "SELECT count(*) FROM live") == [(0,)]
    assert floor_of(path) == 5
    await first.close()

    again = SQLiteJournal(path)
    try:
        assert await again.write_count("a", BACKEND) == 5
        assert await again.write_count("never-written", BACKEND) == 5
        assert await again.count_write("b", BACKEND) == 6
        opened = await again.open_intent(
            make_intent("fresh-1", session_id="fresh"), state=IntentState.IN_FLIGHT, owner=STRANGER
        )
        assert (opened.recorded, opened.write_count) == (True, 5)
        entry = await again.get("fresh-1")
        assert entry is not None and entry.fence == 5
        assert await again.write_count("fresh", BACKEND) == 6
    finally:
        await again.close()


# -- what pruning removes -----------------------------------------------------------------


async def test_pruned_rows_leave_the_file(journal: SQLiteJournal) -> None:
    """What ``prune`` removes is gone from the tables, its bytes counted, and (the journal
    deleting securely) from the file itself once checkpointed; what a guarantee needs stays:
    an unresolved intent with its denial and its session's count, a started effect."""
    now = time.time()
    path = journal.path
    gone = make_intent("marker-settled", session_id="marker-session", text="marker-text")
    await journal.record(gone, state=IntentState.FAILED, owner=current_owner())
    settled = make_decision(gone, decided_at=now - 2 * DAY)
    await journal.settle(settled)
    kept = make_intent("kept-open", session_id="kept-session", created_at=now - 3 * DAY)
    await journal.record(kept, state=IntentState.FAILED, owner=current_owner())
    await journal.note(make_decision(kept, action=Action.DENIED, decided_at=now - 2 * DAY))
    receipt = make_effect("marker-call", session_id="marker-session")
    await journal.effects.begin(receipt)
    done = await journal.effects.finish(receipt.with_receipt("marker-output", at=now))
    started = make_effect("kept-call", session_id="kept-session")
    await journal.effects.begin(started)
    await asyncio.sleep(0.01)

    dry = await journal.retention.prune(Retention(timedelta(days=1), 0, 0), dry_run=True)
    pruned = await journal.retention.prune(Retention(timedelta(days=1), 0, 0))
    assert (pruned.decisions, pruned.receipts, pruned.write_counts) == (1, 1, 1)
    assert pruned.bytes == dry.bytes
    assert pruned.bytes > len(settled.encode()) + len(done.encode()) + len("marker-session")
    assert query(path, "SELECT intent_id FROM decisions") == [("kept-open",)]
    assert query(path, "SELECT key, state FROM effects") == [(started.key, "started")]
    assert query(path, "SELECT session_id FROM live") == [("kept-session",)]
    assert query(path, "SELECT intent_id FROM unresolved") == [("kept-open",)]

    await journal._file.run(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    assert b"marker" not in path.read_bytes()


# -- a writer between the pruner's read and its delete ---------------------------------------


def race(
    monkeypatch: pytest.MonkeyPatch, kind: str, write: Callable[[], Coroutine[Any, Any, object]]
) -> list[bool]:
    """Make ``write`` happen, once, right after the pruner read its candidates of ``kind``
    and before it deletes them; the list returned holds True once it did."""
    read = retention._examine
    raced: list[bool] = []

    def examine(conn: sqlite3.Connection, **options: Any) -> list[tuple[Any, ...]]:
        rows = read(conn, **options)
        if options["kind"].name == kind and rows and not raced:
            raced.append(True)
            meanwhile(write)
        return rows

    monkeypatch.setattr(retention, "_examine", examine)
    return raced


@pytest.mark.parametrize("write", ["a write counted", "an intent opened"])
async def test_a_count_written_while_being_pruned_is_kept(
    journal: SQLiteJournal, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """A session written by another worker after the pruner read its idle count, before the
    delete, keeps its count (the delete checks the count and its idleness again), and the
    floor does not move."""
    for _ in range(3):
        await journal.count_write("s", BACKEND)
    await asyncio.sleep(0.01)
    other = SQLiteJournal(journal.path)
    intent = make_intent("late-1", session_id="s")

    async def written() -> None:
        if write == "a write counted":
            await other.count_write("s", BACKEND)
        else:
            opened = await other.open_intent(intent, state=IntentState.IN_FLIGHT, owner=STRANGER)
            assert opened.recorded
        await other.close()

    raced = race(monkeypatch, "write_counts", written)
    pruned = await journal.retention.prune(IDLE_NOW)
    assert raced == [True]
    assert pruned.write_counts == 0
    assert await journal.write_count("s", BACKEND) == 4
    assert floor_of(journal.path) == 0


async def test_a_decision_whose_intent_is_recorded_again_while_being_pruned_is_kept(
    journal: SQLiteJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old denial whose intent was resolved is due; recorded again by another worker
    between the pruner's read and its delete, the intent is unresolved and keeps it."""
    intent = make_intent("denied-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    denial = make_decision(intent, action=Action.DENIED, decided_at=time.time() - 2 * DAY)
    await journal.note(denial)
    await journal.discard(intent.intent_id)
    other = SQLiteJournal(journal.path)

    async def recorded() -> None:
        await other.record(intent, state=IntentState.FAILED, owner=STRANGER)
        await other.close()

    raced = race(monkeypatch, "decisions", recorded)
    pruned = await journal.retention.prune(Retention(timedelta(days=1), None, None))
    assert raced == [True]
    assert pruned.decisions == 0
    assert await journal.decisions(intent_id=intent.intent_id) == [denial]


# -- limit --------------------------------------------------------------------------------


async def test_a_limited_prune_sweeps_on_in_key_order(journal: SQLiteJournal) -> None:
    """``prune(limit=n)`` examines n counts in key order from where the previous call stopped
    (a dry run reads from there too and moves nothing), and is done once its sweep reached
    the end; with no limit, the sweep starts from the first key."""
    for name in "abcdefg":
        await journal.count_write(f"session-{name}", BACKEND)
    await asyncio.sleep(0.01)

    def left() -> list[str]:
        return [s for (s,) in query(journal.path, "SELECT session_id FROM live")]

    first = await journal.retention.prune(IDLE_NOW, limit=3)
    assert (first.write_counts, first.done) == (3, False)
    assert left() == [f"session-{name}" for name in "defg"]
    dry = await journal.retention.prune(IDLE_NOW, limit=3, dry_run=True)
    assert (dry.write_counts, dry.done) == (3, False)
    second = await journal.retention.prune(IDLE_NOW, limit=3)
    assert (second.write_counts, second.done) == (3, False)
    assert left() == ["session-g"]
    await journal.count_write("session-a", BACKEND)
    third = await journal.retention.prune(IDLE_NOW, limit=3)
    assert (third.write_counts, third.done) == (1, True)
    assert left() == ["session-a"]
    await asyncio.sleep(0.01)
    whole = await journal.retention.prune(IDLE_NOW)
    assert (whole.write_counts, whole.done) == (1, True)
    assert left() == []
    assert floor_of(journal.path) == 2


async def test_a_kind_swept_to_its_end_waits_for_the_others(journal: SQLiteJournal) -> None:
    """Limited calls sweep in rounds: a kind whose table ended waits (examines nothing) until
    every kind's sweep has ended, so the round ends, ``done``, whatever the tables' sizes; a
    decision that became due meanwhile goes in the next round."""
    now = time.time()
    # Counts, in key order: a-decided (written by the decisions' intents), idle-0 to idle-3.
    for n in range(2):
        intent = make_intent(f"old-{n}", session_id="a-decided")
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
        await journal.settle(make_decision(intent, decided_at=now - 2 * DAY))
    for n in range(4):
        await journal.count_write(f"idle-{n}", BACKEND)
    await asyncio.sleep(0.01)
    everything = Retention(timedelta(days=1), None, 0)
    answers = [await journal.retention.prune(everything, limit=2) for _ in range(2)]
    assert [(p.decisions, p.write_counts, p.done) for p in answers] == [
        (2, 2, False),
        (0, 2, False),
    ]
    late = make_intent("late", session_id="a-decided")
    await journal.record(late, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(late, decided_at=now - 2 * DAY))
    last = await journal.retention.prune(everything, limit=2)
    assert (last.decisions, last.write_counts, last.done) == (0, 1, True)
    following = await journal.retention.prune(everything, limit=2)
    assert (following.decisions, following.write_counts, following.done) == (1, 1, True)


async def test_a_read_only_journal_on_an_older_file_refuses_counts_saying_migrate(
    tmp_path: Path,
) -> None:
    """Inspecting a version-1 file (never migrated by a reader) still lists its intents, and
    refuses what version 2 adds (counts read over the floor, pruning) with the schema's own
    words, not as a file that is no journal."""
    path = tmp_path / "journal.db"
    version_1_journal(path)
    reader = SQLiteJournal(path, read_only=True)
    try:
        assert [e.intent.intent_id for e in await reader.pending(None)] == ["open-1"]
        for reading in (
            lambda: reader.write_count("idle", BACKEND),
            lambda: reader.retention.prune(IDLE_NOW, dry_run=True),
        ):
            with pytest.raises(JournalCorrupt, match=r"older than this release's 4.*migrate"):
                await reading()
    finally:
        await reader.close()
    assert query(path, "SELECT max(version) FROM journal_schema") == [(1,)]
