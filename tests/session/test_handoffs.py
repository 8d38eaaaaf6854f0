"""Handoffs on the real runner: the turn that hands the conversation to another agent is saved
like any other, and a failure of that save recovers the same way (a rejected batch replayed
once, a landed one never, a changed history denied before any model call); a handoff followed
by an approval whose tool-turn save fails resumes to the answer with the tool run once. Run and
streamed, fresh and resumed, over every store kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ContinuationDenied
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS, store_rotation
from ..support.runner_support import World, model_input, resume_state, run
from .test_runner_matrix import EXPECTED_OUTCOME, EXPECTED_REVISIONED, FAULTS, PATHS

HANDED_OFF = ["user:hi", "call:h1", "output:h1", "assistant:billed"]
"""What a complete run stores: the input, the handoff turn, the other agent's answer."""


def triage(handoff: bool = True, answer: bool = True, tools: list[Any] | None = None) -> Agent[Any]:
    """A triage agent that hands off to billing (its model's first step), and billing."""
    billing = Agent(
        name="billing",
        model=ScriptedModel([[assistant_message("billed")]] if answer else []),
        tools=tools or [],
    )
    steps = [[function_call("transfer_to_billing", {}, call_id="h1")]] if handoff else []
    return Agent(name="triage", model=ScriptedModel(steps), handoffs=[billing])


def _resumes_at(state_text: str) -> str:
    """The name of the agent a serialised ``RunState`` resumes with."""
    agent = json.loads(state_text)["current_agent"]
    return str(agent["name"] if isinstance(agent, dict) else agent)


def billing_of(agent: Agent[Any]) -> Agent[Any]:
    found = agent.handoffs[0]
    assert isinstance(found, Agent)
    return found


@store_rotation()
@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.value)
@pytest.mark.parametrize("path", PATHS)
async def test_a_handoff_turn_whose_save_fails_recovers(
    world: World, path: str, fault: Fault
) -> None:
    """The handoff turn's save fails; the next run (or the resumed state) replays it once,
    never duplicates it, or is denied before any model call when another writer changed the
    history."""
    streamed_first = path != "run"
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(fault, at=2)
    with pytest.raises(BackendFailure) as raised:
        await run(
            triage(), "hi", session, streamed=streamed_first, context={}, hooks=session.hooks()
        )
    state_text = (
        raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]
        if streamed_first
        else None
    )

    session = await world.restart()
    streamed = path in ("run_streamed", "resume_streamed")
    if path.startswith("resume"):
        assert state_text is not None
        if _resumes_at(state_text) != "billing" and fault is not Fault.CONCURRENT_WRITER:
            pytest.skip(
                "this SDK release's streamed state, saved when the handoff turn's save failed, "
                f"resumes at {_resumes_at(state_text)!r}, the agent that handed off (the SDK's "
                "state, whatever the session; later releases resume at the handoff's target)"
            )
        # Resumed where the handoff turn left it: billing answers next.
        agent = triage(handoff=False)
        start: Any = await resume_state(agent, state_text)
        expected = HANDED_OFF
        answering = billing_of(agent)
    else:
        agent = Agent(name="billing", model=ScriptedModel([[assistant_message("ok")]]))
        start = "next"
        kept = HANDED_OFF[:3] if fault is not Fault.CONCURRENT_WRITER else []
        expected = [*kept, "user:next", "assistant:ok"]
        answering = agent
    model = answering.model
    assert isinstance(model, ScriptedModel)

    if fault is Fault.CONCURRENT_WRITER:
        untouched = await world.history()
        with pytest.raises(ContinuationDenied) as denied:
            await run(agent, start, session, streamed=streamed, hooks=session.hooks())
        outcome, reason = (EXPECTED_REVISIONED if world.backend.revisioned else EXPECTED_OUTCOME)[
            fault
        ]
        assert (denied.value.decision.outcome, denied.value.decision.reason) == (outcome, reason)
        assert model.calls == ()
        assert await world.history() == untouched
        return

    await run(agent, start, session, streamed=streamed, hooks=session.hooks())
    stored = await world.history()
    assert stored == expected
    assert stored.count("call:h1") == stored.count("output:h1") == 1
    assert await session.pending() == []
    assert model_input(model) == stored[:-1], "the model saw what is stored, nothing twice"


@store_rotation()
@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("fault", [Fault.REJECT, Fault.LOST_ACK], ids=lambda f: f.value)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_handoff_then_an_approval_whose_save_fails_runs_the_tool_once(
    world: World, fault: Fault, streamed: bool
) -> None:
    """Triage hands off to billing, whose tool waits for approval; approved and resumed, the
    tool turn's save fails; the state the failed run left resumes to the answer, the tool run
    once and its output stored once."""
    charges = world.charges

    @function_tool(needs_approval=True)
    def charge_card(amount: int) -> str:
        """Charge the customer's card (needs a person's approval)."""
        charges.append(amount)
        return f"charged {amount}"

    billing = Agent(
        name="billing",
        model=ScriptedModel(
            [
                [function_call("charge_card", {"amount": 5}, call_id="c1")],
                [assistant_message("billed")],
            ]
        ),
        tools=[charge_card],
    )
    agent = Agent(
        name="triage",
        model=ScriptedModel([[function_call("transfer_to_billing", {}, call_id="h1")]]),
        handoffs=[billing],
    )
    session = await world.start()
    assert world.faulty is not None
    result = await run(agent, "hi", session, streamed=streamed, context={}, hooks=session.hooks())
    assert len(result.interruptions) == 1
    state = result.to_state()
    state.approve(result.interruptions[0])
    checkpoint = state.to_string()

    world.faulty.plan(fault, at=1)
    state = await resume_state(agent, checkpoint)
    with pytest.raises(BackendFailure) as raised:
        await run(agent, state, session, streamed=streamed, hooks=session.hooks())
    left = raised.value.streamed_result.to_state() if streamed else state  # type: ignore[attr-defined]
    assert charges == [5]

    session = await world.restart()
    await run(
        agent,
        await resume_state(agent, left.to_string()),
        session,
        streamed=streamed,
        hooks=session.hooks(),
    )
    stored = await world.history()
    assert stored == ["user:hi", "call:h1", "output:h1", "call:c1", "output:c1", "assistant:billed"]
    assert charges == [5]
    assert await session.pending() == []
