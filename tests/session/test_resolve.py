"""An operator resolves a denied session (``ReconcilingSession.resolve``), on the real runner,
over the SQLite, Redis and PostgreSQL journals: each resolution leaves the history a person
would expect, is recorded in the trail with its actor and reason, never races a settlement,
and a stale RunState copy of a resolved intent is recognised as resolved."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents.testing import assistant_message

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._core.policy import Resolution
from agents_reconcile._core.records import Action, Outcome, Reason
from agents_reconcile.errors import ResolutionRefused
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import BACKENDS, Place, registered
from ..support.runner_support import World, first_run_steps, resume_state, run

SQLITE_STORE = next(store for store in BACKENDS if store.name == "sqlite")
JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]
FOREIGN = "user:written by someone else"


@pytest.fixture(params=JOURNALS)
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    found = Place(request.param, tmp_path, "journal")
    yield found
    await found.cleanup()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    found = World(SQLITE_STORE, tmp_path)
    yield found
    await found.close()


async def start(world: World, place: Place, **config: Any) -> ReconcilingSession:
    world.config = ReconcileConfig(journal=place.journal(), **config)
    world.inner = await world.open_store()
    world.faulty = FaultInjectingSession(world.inner)
    world.session = ReconcilingSession(world.faulty, config=world.config)
    return world.session


async def denied(
    world: World, place: Place, fault: Fault, *, streamed: bool = False, **config: Any
) -> tuple[ReconcilingSession, str, str | None]:
    """A first run whose tool turn's save fails with ``fault``, then a next run denied.
    Returns a new wrapper (a new process), the intent id, and the failed run's state when
    it was streamed."""
    session = await start(world, place, **config)
    assert world.faulty is not None
    world.faulty.plan(fault, at=2)
    agent, _ = world.agent(first_run_steps())
    with pytest.raises(BackendFailure) as raised:
        await run(agent, "hi", session, streamed=streamed, context={})
    state = None
    if streamed:
        state = raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]
    [pending] = await session.pending()
    session = await world.restart()
    agent, model = world.agent([[assistant_message("ok")]])
    with pytest.raises(ContinuationDenied) as refusal:
        await run(agent, "next", session, streamed=False)
    assert model.calls == ()
    assert refusal.value.intent_id == pending.intent_id
    return session, pending.intent_id, state


async def next_run(world: World, session: ReconcilingSession, *, streamed: bool) -> None:
    agent, _ = world.agent([[assistant_message("ok")]])
    await run(agent, "next", session, streamed=streamed)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_committed_settles_and_the_next_run_goes_on(
    world: World, place: Place, streamed: bool
) -> None:
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    decision = await session.resolve(
        intent_id, "committed", reason="checked the store by hand", actor="ops:ana"
    )
    assert (decision.outcome, decision.reason, decision.action) == (
        Outcome.COMMITTED,
        Reason.OPERATOR_RESOLVED,
        Action.SETTLED,
    )
    assert decision.evidence["actor"] == "ops:ana"
    assert decision.evidence["operator_reason"] == "checked the store by hand"
    assert decision.evidence["judged"] == "ambiguous"
    assert decision.evidence["judged_reason"] == "history_changed"
    assert await session.pending() == []
    await next_run(world, session, streamed=streamed)
    assert await world.history() == ["user:hi", FOREIGN, "user:next", "assistant:ok"]
    trail = await session.decisions()
    assert trail[0] == decision, "the resolution is the newest decision"
    assert [d.action for d in trail if d.intent_id == intent_id] == [
        Action.SETTLED,
        Action.DENIED,
    ], "one denial, however often it was met, then the resolution"


async def test_abandon_drops_the_intent_and_writes_nothing(world: World, place: Place) -> None:
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    decision = await session.resolve(intent_id, Resolution.ABANDON, reason="customer retried")
    assert decision.action is Action.DROPPED
    assert decision.outcome is Outcome.AMBIGUOUS, "abandon asserts nothing about the batch"
    assert "@" in decision.evidence["actor"], "a default actor: user@host"
    assert await world.history() == ["user:hi", FOREIGN]
    await next_run(world, session, streamed=False)
    assert await world.history() == ["user:hi", FOREIGN, "user:next", "assistant:ok"]


async def test_replay_is_refused_where_the_rule_sees_another_history(
    world: World, place: Place
) -> None:
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    with pytest.raises(ResolutionRefused, match="history_changed") as refused:
        await session.resolve(intent_id, "replay", reason="put the tool output back")
    assert refused.value.evidence["judged"] == "ambiguous"
    assert await world.history() == ["user:hi", FOREIGN], "nothing written"
    [entry] = await session.journal.pending(session.session_id)
    assert entry.intent.intent_id == intent_id, "the intent stays, released for the next try"
    decision = await session.resolve(
        intent_id, "replay", reason="the foreign item is harmless", override=True
    )
    assert decision.action is Action.REPLAYED
    assert decision.evidence["override"] is True
    await next_run(world, session, streamed=True)
    assert await world.history() == [
        "user:hi",
        FOREIGN,
        "call:c1",
        "output:c1",
        "user:next",
        "assistant:ok",
    ]


async def test_replay_where_the_operator_was_asked_to(world: World, place: Place) -> None:
    """``on_unchanged="fail"`` leaves a missing batch to an operator: ``replay`` appends it
    where it was meant to go, once, and the run goes on from there."""
    session, intent_id, _ = await denied(world, place, Fault.REJECT, on_unchanged="fail")
    assert await world.history() == ["user:hi"]
    decision = await session.resolve(intent_id, "replay", reason="verified with the payer")
    assert (decision.outcome, decision.action) == (Outcome.UNCHANGED, Action.REPLAYED)
    assert decision.evidence["judged"] == "unchanged"
    await next_run(world, session, streamed=False)
    assert await world.history() == [
        "user:hi",
        "call:c1",
        "output:c1",
        "user:next",
        "assistant:ok",
    ]
    assert world.charges == [5], "the tool ran once"


async def test_a_resolved_intent_cannot_be_resolved_again(world: World, place: Place) -> None:
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    await session.resolve(intent_id, "abandon", reason="duplicate ticket")
    with pytest.raises(ResolutionRefused, match="settled already"):
        await session.resolve(intent_id, "committed", reason="again")
    with pytest.raises(ResolutionRefused, match="no pending intent"):
        await session.resolve("f" * 32, "committed", reason="typo")
    with pytest.raises(ResolutionRefused, match="needs a reason"):
        await session.resolve(intent_id, "committed", reason="  ")
    with pytest.raises(ResolutionRefused, match="not a resolution"):
        await session.resolve(intent_id, "forget", reason="x")


async def test_a_stale_state_of_a_resolved_intent_is_recognised(world: World, place: Place) -> None:
    """The failed run's RunState still carries its copy of the intent; resumed after the
    operator replayed it, the copy is dropped as settled (not a mismatch), the batch is not
    stored again, and the run goes on. (A copy of an abandoned intent is refused instead:
    tests/session/test_fenced_writers.py.)"""
    session, intent_id, state = await denied(
        world, place, Fault.REJECT, streamed=True, on_unchanged="fail"
    )
    decision = await session.resolve(intent_id, "replay", reason="checked: the save is missing")
    assert decision.action is Action.REPLAYED
    stored = await world.history()
    assert state is not None
    agent, model = world.agent([[assistant_message("done")]])
    await run(agent, await resume_state(agent, state), session, streamed=False)
    assert len(model.calls) == 1
    assert await session.pending() == []
    after = await world.history()
    assert after[: len(stored)] == stored
    assert len(after) == len(set(after)), "nothing stored twice"
    assert (await session.decisions())[0].action is not Action.DENIED


async def test_a_resolution_racing_a_settlement_settles_once(world: World, place: Place) -> None:
    """Two workers of one process meet the same failed intent: one settles it by the rule
    (a replay), the other resolves it. Exactly one of them settles it; the batch is stored
    once; the other is told, and writes nothing."""
    for attempt in range(5):
        world.session_id = f"race-{attempt}"
        session = await start(world, place)
        assert world.faulty is not None
        world.faulty.plan(Fault.REJECT, at=2)
        agent, _ = world.agent(first_run_steps())
        with pytest.raises(BackendFailure):
            await run(agent, "hi", session, streamed=False)
        [pending] = await session.pending()
        worker = await world.restart()
        operator = await world.restart()
        results = await asyncio.gather(
            worker.reconcile(),
            operator.resolve(pending.intent_id, "replay", reason="race"),
            return_exceptions=True,
        )
        settled = [d for d in await operator.decisions() if d.settled]
        assert len(settled) == 1, results
        assert await world.history() == ["user:hi", "call:c1", "output:c1"], results
        refused = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(r, ResolutionRefused) for r in refused), refused


async def test_a_denial_met_again_is_counted_not_stored_again(world: World, place: Place) -> None:
    """Six attempts on a denied session (runs, reads, writes, reconcile) leave one denial in
    the trail, counted, with the time it was last met."""
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    [first] = [d for d in await session.decisions() if d.intent_id == intent_id]
    attempts = [
        session.get_items(),
        session.add_items([{"role": "user", "content": "x"}]),
        session.pop_item(),
        session.clear_session(),
        session.reconcile(),
    ]
    for attempt in attempts:
        with pytest.raises(ContinuationDenied):
            await attempt
    [counted] = [d for d in await session.decisions() if d.intent_id == intent_id]
    assert counted.action is Action.DENIED
    assert counted.repeats == first.repeats + len(attempts)
    assert counted.last_seen is not None and counted.last_seen >= counted.decided_at
    assert counted.decided_at == first.decided_at, "the first denial, counted"


REVISIONED_SQLITE = next(store for store in BACKENDS if store.name == "revisioned_sqlite")


@pytest.mark.parametrize("resolution", ["abandon", "committed"])
@pytest.mark.parametrize("store", [SQLITE_STORE, REVISIONED_SQLITE], ids=lambda s: s.name)
async def test_a_batch_resolved_without_being_stored_is_written_when_sent_again(
    store: Any, place: Place, tmp_path: Path, resolution: str
) -> None:
    """A batch the store does not hold, abandoned (or called committed against the rule),
    leaves nothing behind that would take a later identical batch for it: sent again, it is
    appended (on a revisioned store too, whose head has not moved)."""
    world = World(store, tmp_path)
    try:
        session = await start(world, place, on_unchanged="fail")
        assert world.faulty is not None
        world.faulty.plan(Fault.REJECT)
        batch = [{"role": "user", "content": "pay 5"}]
        with pytest.raises(BackendFailure):
            await session.add_items(batch)
        [pending] = await session.pending()
        with pytest.raises(ContinuationDenied):
            await session.reconcile()
        # Against the rule, committed needs the override: the store shows the batch missing.
        override = resolution == "committed"
        await session.resolve(
            pending.intent_id, resolution, reason="sent again by the user", override=override
        )
        await session.add_items(list(batch))
        assert await world.history() == ["user:pay 5"]
    finally:
        await world.close()


async def test_replay_over_a_stored_batch_is_refused_even_with_override(
    world: World, place: Place
) -> None:
    session = await start(world, place)
    assert world.faulty is not None
    world.faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([{"role": "user", "content": "hi"}])
    [pending] = await session.pending()
    with pytest.raises(ResolutionRefused, match="in the history already"):
        await session.resolve(pending.intent_id, "replay", reason="r", override=True)
    assert await world.history() == ["user:hi"]
    decision = await session.resolve(pending.intent_id, "committed", reason="it is there")
    assert decision.evidence["judged"] == "committed"


async def test_a_busy_session_refuses_a_resolution_and_records_nothing(
    world: World, place: Place
) -> None:
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    session = ReconcilingSession(
        world.inner,
        config=ReconcileConfig(
            journal=world.config.journal if world.config else None, in_flight_wait=0.05
        ),
    )
    before = await session.decisions()
    holding = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with session._lock.held():
            holding.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    try:
        with pytest.raises(ResolutionRefused, match="busy"):
            await session.resolve(intent_id, "abandon", reason="r")
    finally:
        release.set()
        await holder
    assert await session.decisions() == before
    assert [p.intent_id for p in await session.pending()] == [intent_id]


async def test_a_resolution_with_a_bad_argument_is_refused_and_writes_nothing(
    world: World, place: Place
) -> None:
    """``override`` must be a real bool (the text "no" is not False) and ``actor`` a name:
    anything else is refused before anything is claimed, replayed or recorded."""
    session, intent_id, _ = await denied(world, place, Fault.CONCURRENT_WRITER)
    before = await world.history()
    trail = await session.decisions()
    for bad in ({"override": "no"}, {"override": 1}, {"actor": 1234}):
        with pytest.raises(ResolutionRefused):
            await session.resolve(intent_id, "replay", reason="checked", **bad)
    assert [p.intent_id for p in await session.pending()] == [intent_id]
    assert await world.history() == before
    assert await session.decisions() == trail
