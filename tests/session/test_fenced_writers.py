"""Every writer is fenced like the worker's own path: an operator's resolution judges an
intent's owner by the owner's own lease, closing a write without writing it fences the store
(or is refused while its owner may still write), and a run that still carries an abandoned
write is refused, never continued from it. On the real runner, over every journal."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile._core.fingerprint import digest_items
from agents_reconcile._core.ownership import Owner, current_owner
from agents_reconcile._core.records import Action, PendingWrite, Reason
from agents_reconcile._core.revision import void_write_id
from agents_reconcile._session import journal_client
from agents_reconcile._session.claims import InFlight, held_apart
from agents_reconcile._session.fused import fused_append
from agents_reconcile._session.resolver import RESOLVE_AFTER_LEASES
from agents_reconcile.errors import LeaseLost, ResolutionRefused
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKENDS, Place, registered
from ..support.runner_support import World, resume_state, run
from .test_approval_composition import approval_agent, interrupted_run

SQLITE_STORE = next(store for store in BACKENDS if store.name == "sqlite")
JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]
ELSEWHERE = Owner(host="other-host#0badc0de", pid=1, started="1")
PAY = {"role": "user", "content": "pay 5"}


@pytest.fixture(params=JOURNALS)
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    found = Place(request.param, tmp_path, "journal")
    yield found
    await found.cleanup()


async def foreign_in_flight(
    session: ReconcilingSession, store: Any, owner: Owner, intent_id: str = "foreign-1"
) -> PendingWrite:
    """An append of a worker on another host (``owner``), in flight on the current history."""
    before = await store.get_items()
    revisioned = isinstance(store, RevisionedSQLiteSession)
    intent = PendingWrite(
        intent_id=intent_id,
        session_id=session.session_id,
        backend=session.backend_identity,
        batch=(PAY,),
        batch_digests=digest_items([PAY]),
        before_digests=() if revisioned else digest_items(before),
        before_is_whole=not revisioned,
        created_at=time.time(),
        persisted_count=None if revisioned else len(before),
        expected_revision=await store.head() if revisioned else None,
    )
    await session.journal.record(intent, state=IntentState.IN_FLIGHT, owner=owner)
    return intent


def test_an_owner_carries_its_own_lease_through_the_journal() -> None:
    """The lease is stamped into the owner as stored, read back with it, and not part of who
    the owner is."""
    stamped = current_owner().leased(120.0)
    assert str(stamped).endswith("~120")
    assert Owner.parse(str(stamped)) == current_owner()
    assert Owner.parse(str(stamped)).lease == 120.0
    assert Owner.parse(str(current_owner())).lease is None
    assert stamped.lease_or(30.0) == 120.0 and current_owner().lease_or(30.0) == 30.0


class SlowAppend(SQLiteSession):
    """The SDK's session, whose appends take a while (a slow disk, a busy server)."""

    entered = threading.Event()

    async def add_items(self, items: list[Any]) -> None:
        self.entered.set()
        await asyncio.sleep(0.6)
        await super().add_items(items)


async def test_an_operator_judges_a_worker_by_its_own_lease(
    place: Place, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment with a long lease; its worker on another host is a while into a slow
    append, past the lease in the operator's own configuration (the command line has no
    deployment config) but within its own. The operator must not take that worker for gone:
    a replay now would be stored twice when the worker's write lands."""
    path = tmp_path / "chat.db"
    journal = place.journal()
    worker = Elsewhere(monkeypatch)
    SlowAppend.entered.clear()
    model = ScriptedModel([[assistant_message("paid")]])

    async def run_slowly() -> None:
        with held_apart(InFlight()):  # as another process's wrapper
            session = ReconcilingSession(
                SlowAppend("s1", path),
                config=ReconcileConfig(journal=journal, lease_seconds=30.0),
            )
        agent = Agent(name="assistant", model=model)
        await Runner.run(agent, "pay 5", session=session, run_config=session.run_config())

    worker.start(run_slowly)
    assert await asyncio.to_thread(SlowAppend.entered.wait, 10)
    store = SlowAppend("s1", path)  # the same kind of store, which the operator only reads
    config = ReconcileConfig(journal=place.journal(), lease_seconds=0.05)
    operator = ReconcilingSession(store, config=config)
    await asyncio.sleep(0.3)
    [entry] = await operator.journal.pending("s1")
    assert entry.owner == ELSEWHERE and entry.owner.lease == 30.0
    with pytest.raises(ResolutionRefused, match="live owner"):
        await operator.resolve(entry.intent.intent_id, "replay", reason="looks gone", actor="ops")
    assert await worker.join() is None
    contents = [item["content"] for item in await store.get_items()]
    assert contents[0] == "pay 5" and contents.count("pay 5") == 1


async def test_an_unfenced_store_is_not_resolved_while_its_owner_may_still_write(
    place: Place, tmp_path: Path
) -> None:
    """Past its lease, a worker on another host may only be frozen; where the store cannot
    refuse its late write, an operator's resolution is refused (with when it will be allowed)
    until the lease is long past."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    await store.add_items([{"role": "user", "content": "hello"}])
    operator = ReconcilingSession(store, config=ReconcileConfig(journal=place.journal()))
    await foreign_in_flight(operator, store, ELSEWHERE.leased(0.1))
    await asyncio.sleep(0.2)
    for resolution in ("abandon", "committed", "replay"):
        with pytest.raises(ResolutionRefused, match="may only be frozen") as refused:
            await operator.resolve("foreign-1", resolution, reason="host gone?", actor="ops")
        assert refused.value.evidence["lease_seconds"] == 0.1
    assert await operator.journal.get("foreign-1") is not None
    await asyncio.sleep(0.1 * RESOLVE_AFTER_LEASES)
    decision = await operator.resolve("foreign-1", "replay", reason="host-b is gone", actor="ops")
    assert decision.action is Action.REPLAYED
    assert [item["content"] for item in await store.get_items()] == ["hello", "pay 5"]


class FrozenAppend(RevisionedSQLiteSession):
    """A revisioned store whose next compare-and-swap stops until released, as a worker
    frozen (SIGSTOP) inside its append would."""

    entered = threading.Event()
    release = threading.Event()
    freeze = False

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        if self.freeze and items:
            self.freeze = False
            self.entered.set()
            # The whole loop stops, renewals of its lease too, as under SIGSTOP.
            self.release.wait(10)
        return await super().append_if(items, expected=expected, write_id=write_id, writer=writer)


class Elsewhere:
    """The worker on another host: a thread with a loop of its own (its own session lock and
    in-flight registry, as another process has), whose journal writes name ``ELSEWHERE``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.thread: threading.Thread | None = None
        self.outcome: BaseException | None = None
        real = journal_client.current_owner
        monkeypatch.setattr(
            journal_client,
            "current_owner",
            lambda: ELSEWHERE if threading.current_thread() is self.thread else real(),
        )

    def start(self, work: Callable[[], Awaitable[None]]) -> None:
        def main() -> None:
            try:
                asyncio.run(work())
            except BaseException as exc:
                self.outcome = exc

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    async def join(self) -> BaseException | None:
        assert self.thread is not None
        await asyncio.to_thread(self.thread.join, 10)
        return self.outcome


@pytest.mark.parametrize("resolution", ["abandon", "committed"])
async def test_closing_a_frozen_workers_write_fences_the_store(
    place: Place, tmp_path: Path, resolution: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker on another host is frozen inside its compare-and-swap append past its lease;
    an operator closes its write without writing it. The store is fenced first: when the
    worker wakes, its append at the head it expected is refused and ``add_items`` raises (the
    run does not go on, even where others' writes are appended after), and the batch is never
    stored, as the trail says."""
    path = tmp_path / "revisioned.db"
    operator_store = FrozenAppend("s1", path)
    await operator_store.add_items([{"role": "user", "content": "hello"}])
    journal = place.journal()
    worker = Elsewhere(monkeypatch)
    FrozenAppend.entered.clear()
    FrozenAppend.release.clear()

    model = ScriptedModel([[assistant_message("paid")]])

    async def append() -> None:
        store = FrozenAppend("s1", path)
        store.freeze = True
        config = ReconcileConfig(journal=journal, lease_seconds=0.3, on_extended="append")
        with held_apart(InFlight()):  # as another process's wrapper
            session = ReconcilingSession(store, config=config)
        agent = Agent(name="assistant", model=model)
        await Runner.run(agent, "pay 5", session=session, run_config=session.run_config())

    worker.start(append)
    assert await asyncio.to_thread(FrozenAppend.entered.wait, 10)
    operator = ReconcilingSession(operator_store, config=ReconcileConfig(journal=journal))
    [entry] = await operator.journal.pending("s1")
    assert entry.owner == ELSEWHERE and entry.owner.lease == 0.3
    await asyncio.sleep(0.5)
    # Committed against the rule (the store shows the write missing) needs the override.
    decision = await operator.resolve(
        entry.intent.intent_id,
        resolution,
        reason="worker presumed dead",
        actor="ops",
        override=resolution == "committed",
    )
    assert decision.evidence["fenced_at_revision"] == 2
    assert await operator_store.find_write(void_write_id(entry.intent.intent_id)) is not None
    FrozenAppend.release.set()
    assert isinstance(await worker.join(), LeaseLost)
    assert model.calls == (), "the run did not go on from the write the operator closed"
    assert [item["content"] for item in await operator_store.get_items()] == ["hello"]
    assert await operator.pending() == []
    # The session goes on after the fence.
    await operator.add_items([{"role": "user", "content": "next"}])
    assert [item["content"] for item in await operator_store.get_items()] == ["hello", "next"]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_run_that_carries_an_abandoned_write_is_refused(
    place: Place, tmp_path: Path, streamed: bool
) -> None:
    """An approval resume's tool-output save is rejected (on_unchanged='fail' leaves it to
    an operator), the operator abandons it, then the failed run's RunState is resumed: the
    run is refused with a denial naming the resolution, before any model call; the output the
    operator dropped is never appended (neither from the run's copy nor by the SDK's own
    record of its pending write), and a new run on the session goes on."""
    world = World(SQLITE_STORE, tmp_path)
    try:
        agent, state, _ = await interrupted_run(world, on_unchanged="fail")
        assert world.session is not None and world.faulty is not None
        world.config = ReconcileConfig(journal=place.journal(), on_unchanged="fail")
        session = await world.restart()
        world.faulty = None
        from agents_reconcile.testing import FaultInjectingSession

        faulty = FaultInjectingSession(world.inner)
        session = ReconcilingSession(faulty, config=world.config)
        faulty.plan(Fault.REJECT, at=1)
        with pytest.raises(BackendFailure):
            await Runner.run(agent, state, session=session, run_config=session.run_config())
        failed = state.to_string()
        assert world.charges == [5]
        before = await world.history()
        [pending] = await session.pending()
        operator = await world.restart()
        decision = await operator.resolve(
            pending.intent_id, "abandon", reason="customer refunded", actor="ops:ana"
        )
        assert decision.action is Action.DROPPED
        resumed_agent, model = approval_agent(world)
        with pytest.raises(ContinuationDenied) as refused:
            await run(
                resumed_agent,
                await resume_state(resumed_agent, failed),
                operator,
                streamed=streamed,
            )
        denial = refused.value.decision
        assert denial.reason is Reason.ABANDONED
        assert denial.evidence["resolution"] == "abandon"
        assert denial.evidence["actor"] == "ops:ana"
        assert model.calls == ()
        assert await world.history() == before
        assert "output:c1" not in before
        assert world.charges == [5]
        # A new run of the session is not held back by the abandoned write.
        fresh_agent, _ = approval_agent(world)
        await run(fresh_agent, "again", operator, streamed=False)
        assert (await world.history())[: len(before)] == before
    finally:
        await world.close()


@pytest.mark.parametrize("store_kind", ["revisioned_sqlite", "journal_server"])
async def test_a_worker_whose_refused_write_was_taken_over_meanwhile_does_not_write_it_again(
    place: Place, tmp_path: Path, store_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker on another host appends on a head others moved: the store refuses its
    compare-and-swap, and the worker is frozen past its lease before it takes its intent back
    (as a failover of the journal's server froze one). Another worker takes the expired intent
    over and replays the batch after the others' write. When the frozen worker wakes, taking
    its intent back is refused (``LeaseLost``): the batch is the new holder's, and stored once,
    never appended a second time after the replay."""
    lease = 0.3
    path = tmp_path / "revisioned.db"

    def open_store() -> Any:
        if store_kind == "revisioned_sqlite":
            return RevisionedSQLiteSession("s1", path)
        return place.store("s1")

    reader = open_store()
    frozen = place.journal()
    if store_kind == "journal_server":
        if not hasattr(reader, "append_if"):
            pytest.skip(f"{place.backend.name}: no revisioned store on the journal's server")
        if await fused_append(frozen, reader) is not None:
            pytest.skip("one step opens the intent and appends: a refused append records none")
    await reader.add_items([{"role": "user", "content": "hello"}])
    worker = Elsewhere(monkeypatch)
    appended, go_on = threading.Event(), threading.Event()
    stalled, wake = threading.Event(), threading.Event()
    opened_ids: list[str] = []
    open_intent, discard = frozen.open_intent, frozen.discard

    def in_worker() -> bool:
        return threading.current_thread() is worker.thread

    async def opening(intent: PendingWrite, **how: Any) -> Any:
        if in_worker() and intent.batch[0]["content"] == "A1":
            opened_ids.append(intent.intent_id)
        return await open_intent(intent, **how)

    async def taking_back(intent_id: str, **held: Any) -> None:
        if in_worker() and opened_ids[:1] == [intent_id] and not stalled.is_set():
            stalled.set()  # frozen between the store's refusal and taking its intent back
            await asyncio.to_thread(wake.wait, 20)
        await discard(intent_id, **held)

    monkeypatch.setattr(frozen, "open_intent", opening)
    monkeypatch.setattr(frozen, "discard", taking_back)

    async def append() -> None:
        config = ReconcileConfig(journal=frozen, lease_seconds=lease, on_extended="append")
        with held_apart(InFlight()):  # as another process's wrapper
            session = ReconcilingSession(open_store(), config=config)
        await session.add_items([{"role": "user", "content": "A0"}])
        appended.set()
        await asyncio.to_thread(go_on.wait, 10)
        await session.add_items([{"role": "user", "content": "A1"}])

    worker.start(append)
    assert await asyncio.to_thread(appended.wait, 10)
    await reader.add_items([{"role": "user", "content": "B0"}])  # the head moves under it
    go_on.set()
    assert await asyncio.to_thread(stalled.wait, 10)
    await asyncio.sleep(lease + 0.2)
    config = ReconcileConfig(journal=place.journal(), on_extended="append")
    other = ReconcilingSession(open_store(), config=config)
    [decision] = await other.reconcile()
    assert decision.intent_id == opened_ids[0]
    assert (decision.reason, decision.action) == (Reason.EXTENDED_BY_OTHERS, Action.REPLAYED)
    wake.set()
    outcome = await worker.join()
    contents = [item["content"] for item in await reader.get_items()]
    assert contents == ["hello", "A0", "B0", "A1"], contents
    assert isinstance(outcome, LeaseLost), outcome
    assert opened_ids == opened_ids[:1], "the worker built its batch again"
    assert await other.pending() == []
