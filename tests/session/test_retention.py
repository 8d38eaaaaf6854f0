"""Retention on the real runner: a RunState older than the journal's retention is refused
(``RunStateExpired``, naming the retention) before its tool runs again or anything is written,
and a younger one goes on; the stamp that tells its age cannot be stripped from a signed state;
and wrappers prune their journal in the background as they append."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, RunState, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import (
    ConfigurationError,
    ContinuationDenied,
    IntentState,
    MemoryJournal,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
    Retention,
    RunStateExpired,
)
from agents_reconcile._session import pruning
from agents_reconcile._session.runstate import CONTEXT_KEY
from agents_reconcile.conformance._records import ME, make_decision, make_intent
from agents_reconcile.errors import BindingMismatch

from ..support.backends import BACKEND_PARAMS, Backend, store_rotation
from ..support.runner_support import World, run
from .test_approval_composition import approval_agent

SHORT = 0.6
"""A retention (seconds) short enough to outlive in a test."""
KEY = bytes(range(32))


def short(**kept: Any) -> Retention:
    return Retention(**({"decisions": SHORT, "receipts": SHORT, "idle_sessions": SHORT} | kept))


async def interrupted(world: World, **config: Any) -> tuple[Agent[Any], str]:
    """Run until the tool waits for approval; return the agent and the approved state."""
    session = await world.start(**config)
    agent, _ = approval_agent(world)
    result = await run(agent, "hi", session, streamed=False, context={})
    state = result.to_state()
    state.approve(result.interruptions[0])
    return agent, state.to_string()


@store_rotation("backend")
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_runstate_older_than_the_retention_is_refused_before_its_tool_runs(
    backend: Backend, tmp_path: Path, streamed: bool
) -> None:
    world = World(backend, tmp_path)
    try:
        agent, text = await interrupted(world, retention=short())
        await asyncio.sleep(SHORT + 0.2)
        session = await world.restart()
        state = await RunState.from_string(agent, text)
        with pytest.raises(RunStateExpired) as denied:
            await with_hooks(agent, state, session, streamed=streamed)
        decision = denied.value.decision
        assert decision.reason is Reason.RUNSTATE_EXPIRED
        assert isinstance(denied.value, ContinuationDenied)
        assert decision.evidence["retention_seconds"] == SHORT
        assert decision.evidence["age_seconds"] > SHORT
        # The state is refused, not an intent: no "intent unknown", no hint that finds nothing.
        message = str(denied.value)
        assert "intent unknown" not in message and "show unknown" not in message
        assert "the run was refused (runstate_expired)" in message
        assert world.charges == [], "the approved tool did not run"
        assert await world.history() == ["user:hi", "call:c1"]
    finally:
        await world.close()


async def with_hooks(
    agent: Agent[Any], state: Any, session: ReconcilingSession, *, streamed: bool
) -> Any:
    """Resume ``state`` with the gate before every model call and every tool call."""
    if not streamed:
        return await Runner.run(
            agent, state, session=session, run_config=session.run_config(), hooks=session.hooks()
        )
    result = Runner.run_streamed(
        agent, state, session=session, run_config=session.run_config(), hooks=session.hooks()
    )
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
async def test_a_runstate_younger_than_the_retention_goes_on(
    backend: Backend, tmp_path: Path
) -> None:
    world = World(backend, tmp_path)
    try:
        agent, text = await interrupted(
            world, retention=short(decisions=3600, receipts=3600, idle_sessions=3600)
        )
        await asyncio.sleep(SHORT + 0.2)
        session = await world.restart()
        state = await RunState.from_string(agent, text)
        result = await run(agent, state, session, streamed=False)
        assert result.final_output == "done"
        assert world.charges == [5]
    finally:
        await world.close()


async def test_without_hooks_an_expired_state_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """Without the gate's hooks the SDK runs an approved plain tool before it reads the
    session (an effect tool refuses there itself); the append that follows is refused."""
    from ..support.backends import BACKENDS

    world = World(BACKENDS[0], tmp_path)
    try:
        agent, text = await interrupted(world, retention=short())
        await asyncio.sleep(SHORT + 0.2)
        session = await world.restart()
        state = await RunState.from_string(agent, text)
        with pytest.raises(RunStateExpired):
            await run(agent, state, session, streamed=False)
        assert world.charges == [5], "the SDK runs an approved plain tool first"
        assert await world.history() == ["user:hi", "call:c1"], "its output is not appended"
    finally:
        await world.close()


async def test_the_age_stamp_cannot_be_stripped_from_a_signed_state(tmp_path: Path) -> None:
    """A signed state whose stamp was removed (to pass for a state from an earlier release)
    no longer verifies: refused as unsigned, not taken as ageless."""
    from ..support.backends import BACKENDS

    world = World(BACKENDS[0], tmp_path)
    try:
        agent, text = await interrupted(world, retention=short(), signing_key=KEY)
        body = json.loads(text)
        carried = body["context"]["context"][CONTEXT_KEY]
        assert carried["seen_at"], "a run stamps the count it records"
        del carried["seen_at"]
        session = await world.restart()
        state = await RunState.from_string(agent, json.dumps(body))
        with pytest.raises(BindingMismatch) as denied:
            await with_hooks(agent, state, session, streamed=False)
        assert denied.value.decision.reason is Reason.STATE_UNSIGNED
        assert world.charges == []
    finally:
        await world.close()


async def test_a_carried_intent_older_than_the_retention_is_refused_when_the_journal_forgot_it(
    tmp_path: Path,
) -> None:
    """A state from an earlier release (no stamp) carrying a failed intent the journal no
    longer knows (its decision pruned) is refused by the intent's own age, not judged again."""
    journal = MemoryJournal()
    config = ReconcileConfig(journal=journal, retention=short())
    session = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    intent = make_intent("old-1", session_id="s", created_at=time.time() - 3600.0)
    intent = intent.__class__(**{**intent.__dict__, "backend": session.backend_identity})
    context: dict[str, Any] = {}
    session.carried.put(context, intent)
    agent = Agent(name="a", model=ScriptedModel([[assistant_message("hello")]]))
    with pytest.raises(RunStateExpired) as denied:
        await run(agent, "next", session, streamed=False, context=context)
    assert "intent_created_at" in denied.value.decision.evidence
    assert await session.inner.get_items() == []


async def test_wrappers_prune_their_journal_in_the_background_as_they_append(
    tmp_path: Path,
) -> None:
    journal = MemoryJournal()
    old = make_intent("settled-long-ago", session_id="elsewhere", created_at=1.0)
    await journal.record(old, state=IntentState.FAILED, owner=ME)
    await journal.settle(make_decision(old, decided_at=1.0))
    config = ReconcileConfig(journal=journal, retention=Retention(decisions=timedelta(days=1)))
    session = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    await session.add_items([{"role": "user", "content": "one"}])
    pruner = pruning.pruner_for(journal, config.retention)
    assert pruner is not None and pruner.last is None, "not due before its interval"
    pruner.due = 0.0
    await session.add_items([{"role": "user", "content": "two"}])
    await pruner.wait()
    assert pruner.last is not None and pruner.last.decisions == 1
    assert await journal.decisions(session_id="elsewhere") == []
    assert pruner.due > time.monotonic() + pruning.INTERVAL - 5


async def test_no_pruning_when_retention_keeps_everything(tmp_path: Path) -> None:
    journal = MemoryJournal()
    config = ReconcileConfig(journal=journal, retention=None)
    session = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    await session.add_items([{"role": "user", "content": "one"}])
    assert pruning.pruner_for(journal, None) is None
    assert session.journal_client._pruner is None


def test_wrappers_sharing_a_journal_prune_by_the_longest_retention() -> None:
    journal = MemoryJournal()
    first = pruning.pruner_for(journal, Retention(decisions=10, receipts=None, idle_sessions=5))
    second = pruning.pruner_for(journal, Retention(decisions=20, receipts=3, idle_sessions=1))
    assert first is second and first is not None
    assert (
        first.retention.seconds("decisions"),
        first.retention.seconds("receipts"),
        first.retention.seconds("idle_sessions"),
    ) == (20.0, None, 5.0)


def test_retention_refuses_what_it_cannot_mean() -> None:
    for bad in ("30d", -1, True):
        with pytest.raises(ConfigurationError):
            Retention(decisions=bad)
    assert Retention(decisions=60).seconds("decisions") == 60.0
    assert Retention(None, None, None).runstates is None
    assert Retention(decisions=5, receipts=3, idle_sessions=None).runstates == timedelta(seconds=3)


def slow_agent(world: World, seconds: float, *, approval: bool) -> Agent[Any]:
    """An agent whose one tool takes ``seconds`` (and needs approval, if asked)."""
    from agents import function_tool
    from agents.testing import function_call

    charges = world.charges

    @function_tool(needs_approval=approval)
    async def charge_card(amount: int) -> str:
        """Charge the customer's card, slowly."""
        await asyncio.sleep(seconds)
        charges.append(amount)
        return f"charged {amount}"

    model = ScriptedModel(
        [
            [function_call("charge_card", {"amount": 5}, call_id="c1")],
            [assistant_message("done")],
        ]
    )
    return Agent(name="assistant", model=model, tools=[charge_card])


LIVE = 1.2
"""A retention (seconds) that a turn in progress outlasts in the tests below."""


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_turn_in_progress_is_never_refused_for_the_time_it_takes(
    tmp_path: Path, streamed: bool
) -> None:
    """A state resumed within the retention whose approved tool then takes past it goes on:
    the state's age is judged once, when the run takes it up; the same state resumed again
    once it is older than the retention is refused, in the same process too."""
    from ..support.backends import BACKENDS

    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start(
            retention=short(decisions=LIVE, receipts=LIVE, idle_sessions=LIVE)
        )
        agent = slow_agent(world, LIVE * 0.8, approval=True)
        result = await run(agent, "hi", session, streamed=False, context={})
        state = result.to_state()
        state.approve(result.interruptions[0])
        text = state.to_string()
        await asyncio.sleep(LIVE * 0.4)

        session = await world.restart()
        agent = slow_agent(world, LIVE * 0.8, approval=True)
        await with_hooks(agent, await RunState.from_string(agent, text), session, streamed=streamed)
        assert await world.history() == ["user:hi", "call:c1", "output:c1", "assistant:done"]
        assert world.charges == [5]

        again = await RunState.from_string(agent, text)
        with pytest.raises(RunStateExpired):
            await with_hooks(agent, again, await world.restart(), streamed=streamed)
        assert world.charges == [5]
    finally:
        await world.close()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_fresh_run_whose_tool_outlasts_the_retention_goes_on(
    tmp_path: Path, streamed: bool
) -> None:
    """A fresh run is never refused for a tool that takes longer than the retention."""
    from ..support.backends import BACKENDS

    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start(
            retention=short(decisions=LIVE, receipts=LIVE, idle_sessions=LIVE)
        )
        agent = slow_agent(world, LIVE * 1.3, approval=False)
        await run(agent, "hi", session, streamed=streamed, context={}, hooks=session.hooks())
        assert await world.history() == ["user:hi", "call:c1", "output:c1", "assistant:done"]
    finally:
        await world.close()
