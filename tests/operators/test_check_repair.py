"""Checking and repairing damaged sessions on real stores: the SDK's SQLiteSession files, the
revisioned SQLite store, and the revisioned Redis and PostgreSQL stores when their servers are
set. Checks write nothing and print no content; a repaired history is one the SDK's runner
sends with every call paired once; a repair that dies midway is finished, or denied, by the
next reconciliation, and nothing is lost."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.extensions.memory import AdvancedSQLiteSession, SQLAlchemySession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends import registry
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._core import crashpoints
from agents_reconcile._core.fingerprint import canonical_item, item_digest
from agents_reconcile._core.records import Action, Outcome, Reason
from agents_reconcile._operator.check import RepairRefused, check_session, repair_session
from agents_reconcile._operator.damage import CALL_OUTPUT_TYPES, Kind, find_damage, plan_repair
from agents_reconcile._session.journal_client import SESSION_WIDE
from agents_reconcile.errors import ConfigurationError, ContinuationDenied
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import Place
from .test_damage import SECRET, assistant, call, every_kind, output, reasoning, user

SID = "user-42"
OUTPUTS = {output_type: call_type for call_type, output_type in CALL_OUTPUT_TYPES.items()}


def repairable() -> list[Any]:
    """Damage a repair removes entirely: a batch stored twice, an orphan output, an orphan
    call with its reasoning, a duplicate far from its original."""
    batch = [user("again"), call("c2"), output("c2"), assistant("ok", "m2")]
    return [
        user("hi"),
        call("c1"),
        output("c1"),
        assistant("done", "m1"),
        *batch,
        *batch,  # 8..11
        output("gone"),  # 12
        reasoning("r1"),  # 13
        call("c3"),  # 14
        user("more"),
        call("c1"),  # 16: a copy of 1
        assistant("later", "m3"),
    ]


REPAIRED = [p for p in range(18) if p not in (8, 9, 10, 11, 12, 13, 14, 16)]


@dataclass
class Where:
    """One store holding the test's session: its address, and new session objects on it."""

    kind: str
    directory: Path
    place: Place | None = None
    opened: list[Any] = field(default_factory=list)

    @property
    def file(self) -> Path:
        return self.directory / f"{self.kind}.db"

    @property
    def address(self) -> str:
        if self.place is not None:
            return self.place.address
        return f"sqlite+aiosqlite:///{self.file}" if self.kind == "sqlalchemy" else str(self.file)

    @property
    def namespace(self) -> str | None:
        return self.place.space if self.place is not None else None

    def session(self) -> Any:
        if self.place is not None:
            return self.place.store(SID)
        if self.kind == "sqlalchemy":
            opened: Any = SQLAlchemySession.from_url(SID, url=self.address, create_tables=True)
        else:
            opened = SQLiteSession(SID, self.file)
        self.opened.append(opened)
        return opened

    async def seed(self, items: list[Any]) -> None:
        await self.session().add_items(items)

    async def items(self) -> list[Any]:
        found: list[Any] = await self.session().get_items()
        return found

    async def close(self) -> None:
        for session in self.opened:
            if isinstance(session, SQLAlchemySession):
                await session.engine.dispose()
            else:
                session.close()
        if self.place is not None:
            await self.place.cleanup()


STORES = [
    pytest.param("sdk_sqlite", id="sdk_sqlite"),
    pytest.param("sqlalchemy", id="sqlalchemy_sqlite"),
    *(
        pytest.param(
            backend, id=f"revisioned_{backend.name}", marks=getattr(pytest.mark, backend.name)
        )
        for backend in registry.BACKENDS
        if backend.store is not None and backend.durable
    ),
]


@pytest.fixture(params=STORES)
async def where(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Where]:
    chosen = request.param
    if isinstance(chosen, str):
        found = Where(chosen, tmp_path)
    else:
        found = Where(f"revisioned_{chosen.name}", tmp_path, Place(chosen, tmp_path, "store"))
    yield found
    await found.close()


def journal_at(directory: Path) -> str:
    """The application's journal in ``directory``, there as after its first run: a repair
    creates no journal."""
    path = directory / "journal.db"
    if not path.exists():
        # The tests run in an event loop: the journal is made in a thread with one of its own.
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, SQLiteJournal(path).migrate()).result()
    return str(path)


async def trail(directory: Path) -> list[Any]:
    journal = SQLiteJournal(journal_at(directory))
    try:
        return await journal.decisions(session_id=SID)
    finally:
        await journal.close()


def assert_paired_once(received: Any) -> None:
    """Every call in a model input is answered once, after it; no item is there twice."""
    items = [canonical_item(item) for item in received]
    calls = [(p, i["call_id"]) for p, i in enumerate(items) if i.get("type") in CALL_OUTPUT_TYPES]
    outputs = [(p, i["call_id"]) for p, i in enumerate(items) if i.get("type") in OUTPUTS]
    assert len({c for _, c in calls}) == len(calls), "a call is sent twice"
    assert len({c for _, c in outputs}) == len(outputs), "an output is sent twice"
    answered = dict((c, p) for p, c in outputs)
    for position, call_id in calls:
        assert answered.get(call_id, -1) > position, f"call {call_id} is not answered after it"
    assert {c for _, c in outputs} <= {c for _, c in calls}, "an output without its call"
    digests = [item_digest(item) for item in items]
    assert len(set(digests)) == len(digests), "an item is sent twice"


async def next_turn(session: Any) -> Any:
    """Run the SDK's runner once more on ``session``; what the model was sent."""
    model = ScriptedModel([[assistant_message("fine", item_id="m-next")]])
    await Runner.run(Agent(name="assistant", model=model), "next", session=session)
    assert model.first_call is not None
    return model.first_call.input


# -- checking ----------------------------------------------------------------------------------


async def test_a_check_finds_every_kind_and_writes_nothing(where: Where) -> None:
    items = every_kind()
    await where.seed(items)
    before = file_digest(where)
    report = await check_session(where.address, SID, namespace=where.namespace)
    assert report.layout == where.kind
    found = {(f.kind, f.positions) for f in report.damage.findings}
    assert found == {(f.kind, f.positions) for f in find_damage(items).findings}
    assert {kind for kind, _ in found} == set(Kind)
    for finding in report.damage.findings:
        assert finding.digests == tuple(item_digest(items[p]) for p in finding.positions)
    assert report.needs_operator
    shown = json.dumps(report.to_json()) + report.text()
    assert SECRET not in shown
    assert "orphan_output [13:" in report.text(), "positions printed count from 1"
    assert file_digest(where) == before
    assert await where.items() == items
    assert not default_journal_made(), "a check creates no journal"


def default_journal_made() -> bool:
    return Path("agents-reconcile.db").exists()


def file_digest(where: Where) -> str | None:
    if where.place is not None and where.place.backend.server:
        return None
    # The SDK's file may hold recent writes in its write-ahead log: both files count.
    path = where.file if where.place is None else Path(where.address)
    wal = path.with_name(path.name + "-wal")
    data = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    return hashlib.sha256(data).hexdigest()


async def test_a_check_names_pending_intents_and_a_repair_waits_for_them(tmp_path: Path) -> None:
    await SQLiteSession(SID, tmp_path / "chat.db").add_items(repairable())
    faulty = FaultInjectingSession(SQLiteSession(SID, tmp_path / "chat.db"))
    faulty.plan(Fault.REJECT)
    wrapper = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal_at(tmp_path)))
    with pytest.raises(BackendFailure):
        await wrapper.add_items([user("lost?")])
    [pending] = await wrapper.pending()
    report = await check_session(str(tmp_path / "chat.db"), SID, journal=journal_at(tmp_path))
    assert report.pending == (pending.intent_id,)
    with pytest.raises(RepairRefused):
        await check_session(
            str(tmp_path / "chat.db"), SID, repair=True, journal=journal_at(tmp_path)
        )
    assert await SQLiteSession(SID, tmp_path / "chat.db").get_items() == repairable()


async def test_rows_that_do_not_decode_are_counted_and_refuse_a_repair(tmp_path: Path) -> None:
    await SQLiteSession(SID, tmp_path / "chat.db").add_items([user("hi"), output("gone")])
    with sqlite3.connect(tmp_path / "chat.db") as conn:
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)", (SID, "{oops")
        )
    report = await check_session(str(tmp_path / "chat.db"), SID)
    assert (report.unreadable, report.damage.count) == (1, 2)
    with pytest.raises(RepairRefused, match="do not decode"):
        await check_session(
            str(tmp_path / "chat.db"), SID, repair=True, journal=journal_at(tmp_path)
        )


async def test_a_repair_needs_the_applications_journal(tmp_path: Path) -> None:
    """Without a named journal a repair is refused: its intent would go to a file the
    application never reads, and an interrupted repair would not be recovered."""
    await SQLiteSession(SID, tmp_path / "chat.db").add_items([user("hi"), output("gone")])
    with pytest.raises(RepairRefused, match="journal"):
        await check_session(str(tmp_path / "chat.db"), SID, repair=True)
    assert not default_journal_made()


async def test_addresses_that_hold_no_session_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        await check_session(str(tmp_path / "missing.db"), SID)
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(ConfigurationError):
        await check_session("memory://somewhere", SID)
    branched = AdvancedSQLiteSession(
        session_id=SID, db_path=tmp_path / "advanced.db", create_tables=True
    )
    await branched.add_items([user("hi")])
    branched.close()
    with pytest.raises(ConfigurationError, match="AdvancedSQLiteSession"):
        await check_session(str(tmp_path / "advanced.db"), SID)


# -- repairing ---------------------------------------------------------------------------------


async def test_a_repair_leaves_a_history_the_runner_accepts(where: Where, tmp_path: Path) -> None:
    items = repairable()
    await where.seed(items)
    report = await check_session(
        where.address,
        SID,
        repair=True,
        journal=journal_at(tmp_path),
        actor="ops@example",
        reason="ticket 12",
        namespace=where.namespace,
    )
    assert report.repaired and report.intent_id is not None
    assert [r.position for r in report.plan.removals] == [8, 9, 10, 11, 12, 13, 14, 16]
    assert await where.items() == [items[p] for p in REPAIRED]
    assert_paired_once(await next_turn(where.session()))
    again = await check_session(where.address, SID, namespace=where.namespace)
    assert not again.damage.damaged and not again.needs_operator
    note, settled = await trail(tmp_path)
    assert (settled.intent_id, settled.action) == (report.intent_id, Action.SETTLED)
    assert note.intent_id == SESSION_WIDE
    assert note.evidence["actor"] == "ops@example"
    assert note.evidence["removed"] == [8, 9, 10, 11, 12, 13, 14, 16]
    assert SECRET not in note.encode().decode() + settled.encode().decode()
    assert SECRET not in report.text() + json.dumps(report.to_json())


async def test_without_the_repair_the_runner_sends_an_orphan(tmp_path: Path) -> None:
    """The runner check above has teeth: the same history unrepaired fails it."""
    await SQLiteSession(SID, tmp_path / "chat.db").add_items(repairable())
    with pytest.raises(AssertionError, match=r"without its call|twice"):
        assert_paired_once(await next_turn(SQLiteSession(SID, tmp_path / "chat.db")))


async def test_damage_left_for_a_person_stays_as_it_was(tmp_path: Path) -> None:
    items = every_kind()
    await SQLiteSession(SID, tmp_path / "chat.db").add_items(items)
    report = await check_session(
        str(tmp_path / "chat.db"), SID, repair=True, journal=journal_at(tmp_path)
    )
    plan = plan_repair(find_damage(items))
    assert report.plan == plan
    assert await SQLiteSession(SID, tmp_path / "chat.db").get_items() == plan.apply(items)
    assert report.needs_operator, "a person still has to look"
    assert {left.finding.kind for left in report.plan.left} == {
        Kind.IDENTITY_CONFLICT,
        Kind.OUTPUT_BEFORE_CALL,
        Kind.REPEATED_RUN,
    }


async def test_a_healthy_session_is_not_written(tmp_path: Path) -> None:
    items = [user("hi"), call("c1"), output("c1"), assistant("done", "m1")]
    await SQLiteSession(SID, tmp_path / "chat.db").add_items(items)
    before = hashlib.sha256((tmp_path / "chat.db").read_bytes()).hexdigest()
    report = await check_session(
        str(tmp_path / "chat.db"), SID, repair=True, journal=journal_at(tmp_path)
    )
    assert not report.repaired and not report.needs_operator
    assert hashlib.sha256((tmp_path / "chat.db").read_bytes()).hexdigest() == before
    assert await trail(tmp_path) == []


async def test_a_history_of_damage_only_is_cleared(tmp_path: Path) -> None:
    await SQLiteSession(SID, tmp_path / "chat.db").add_items([output("gone"), output("gone2")])
    report = await check_session(
        str(tmp_path / "chat.db"), SID, repair=True, journal=journal_at(tmp_path)
    )
    assert report.repaired and report.intent_id is None
    assert await SQLiteSession(SID, tmp_path / "chat.db").get_items() == []
    [note] = await trail(tmp_path)
    assert note.evidence["items_after"] == 0


# -- a repair that does not finish -------------------------------------------------------------


def wrapped(directory: Path) -> ReconcilingSession:
    config = ReconcileConfig(journal=journal_at(directory))
    return ReconcilingSession(SQLiteSession(SID, directory / "chat.db"), config=config)


async def test_a_failed_append_is_replayed_by_the_next_reconciliation(
    where: Where, tmp_path: Path
) -> None:
    items = repairable()
    await where.seed(items)
    faulty = FaultInjectingSession(where.session())
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure) as raised:
        await repair_session(faulty, journal=journal_at(tmp_path), actor="ops")
    assert any("next reconciliation" in note for note in raised.value.__notes__)
    assert await where.items() == []
    config = ReconcileConfig(journal=journal_at(tmp_path))
    session = ReconcilingSession(where.session(), config=config)
    [decision] = await session.reconcile()
    assert (decision.outcome, decision.action) == (Outcome.UNCHANGED, Action.REPLAYED)
    assert await session.get_items() == [items[p] for p in REPAIRED]
    assert await session.pending() == []
    replayed, note = await trail(tmp_path)  # newest first
    assert replayed.action is Action.REPLAYED
    assert (note.intent_id, note.outcome) == (SESSION_WIDE, Outcome.AMBIGUOUS)
    assert note.evidence["interrupted"] and note.evidence["intent_id"] == replayed.intent_id


class ClearFails(FaultInjectingSession):
    async def clear_session(self) -> None:
        raise BackendFailure("injected: clear rejected")


async def test_a_failed_clear_is_denied_and_loses_nothing(tmp_path: Path) -> None:
    items = repairable()
    await SQLiteSession(SID, tmp_path / "chat.db").add_items(items)
    with pytest.raises(BackendFailure):
        await repair_session(
            ClearFails(SQLiteSession(SID, tmp_path / "chat.db")), journal=journal_at(tmp_path)
        )
    session = wrapped(tmp_path)
    with pytest.raises(ContinuationDenied) as denied:
        await session.reconcile()
    assert denied.value.decision.reason is Reason.HISTORY_CHANGED
    assert await SQLiteSession(SID, tmp_path / "chat.db").get_items() == items


CHILD = """
import asyncio, sys
from agents import SQLiteSession
from agents_reconcile._core import crashpoints
from agents_reconcile._core.crashpoints import CrashPoint
from agents_reconcile._operator.check import repair_session
from agents_reconcile.testing import FaultInjectingSession

crashpoints.arm(CrashPoint(sys.argv[1]))
session = FaultInjectingSession(SQLiteSession("user-42", sys.argv[2]))
asyncio.run(repair_session(session, journal=sys.argv[3]))
"""


@pytest.mark.parametrize(
    ("point", "outcome", "landed"),
    [
        ("after_intent_recorded", Outcome.AMBIGUOUS, False),
        ("inside_append_before_commit", Outcome.UNCHANGED, True),
        ("after_commit_before_ack", Outcome.COMMITTED, True),
        ("before_intent_cleared", Outcome.COMMITTED, True),
    ],
)
def test_a_killed_repair_is_finished_or_denied(
    tmp_path: Path, point: str, outcome: Outcome, landed: bool
) -> None:
    """SIGKILL at each step of the rewrite: before the clear the old history stays and is
    denied; after it the repaired history is appended (or found) by the next reconciliation."""
    items = repairable()
    asyncio.run(SQLiteSession(SID, tmp_path / "chat.db").add_items(items))
    child = subprocess.run(
        [sys.executable, "-c", CHILD, point, str(tmp_path / "chat.db"), journal_at(tmp_path)],
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr

    async def recover() -> None:
        session = wrapped(tmp_path)
        assert len(await session.pending()) == 1
        if landed:
            [decision] = await session.reconcile()
            assert decision.outcome is outcome
            assert await session.get_items() == [items[p] for p in REPAIRED]
            return
        with pytest.raises(ContinuationDenied) as denied:
            await session.reconcile()
        assert denied.value.decision.reason is Reason.HISTORY_CHANGED
        assert await SQLiteSession(SID, tmp_path / "chat.db").get_items() == items

    asyncio.run(recover())


@pytest.fixture(autouse=True)
def disarmed() -> Any:
    crashpoints.disarm()
    yield
    crashpoints.disarm()
