"""Composition with the SDK's own pending write on a resumed approval run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import Outcome
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS, Backend, store_rotation
from ..support.runner_support import World, resume_state, run


def approval_agent(world: World) -> tuple[Agent[Any], ScriptedModel]:
    charges = world.charges

    @function_tool(needs_approval=True)
    def charge_card(amount: int) -> str:
        """Charge the customer's card (needs a person's approval)."""
        charges.append(amount)
        return f"charged {amount}"

    model = ScriptedModel(
        [
            [function_call("charge_card", {"amount": 5}, call_id="c1")],
            [assistant_message("done")],
            [assistant_message("done")],
        ]
    )
    return Agent(name="assistant", model=model, tools=[charge_card]), model


async def interrupted_run(world: World, **config: Any) -> tuple[Agent[Any], Any, str]:
    """Run until the tool waits for approval; approve it; return the agent, state and its text
    (the wrapper configured with ``config``)."""
    session = await world.start(**config)
    agent, _ = approval_agent(world)
    result = await Runner.run(
        agent, "hi", session=session, run_config=session.run_config(), context={}
    )
    assert len(result.interruptions) == 1
    state = result.to_state()
    state.approve(result.interruptions[0])
    return agent, state, state.to_string()


@store_rotation("backend")
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("fault", [Fault.REJECT, Fault.LOST_ACK], ids=lambda f: f.value)
@pytest.mark.parametrize("streamed", [False, True], ids=["retry_run", "retry_streamed"])
async def test_approved_tool_runs_once_and_is_stored_once(
    backend: Backend, tmp_path: Path, fault: Fault, streamed: bool
) -> None:
    """The approved tool's save fails on resume; retrying the same RunState runs the tool once
    and stores its output once, whether the retry is run or streamed."""
    world = World(backend, tmp_path)
    try:
        agent, state, _ = await interrupted_run(world)
        assert world.session is not None and world.faulty is not None
        world.faulty.plan(fault, at=1)
        with pytest.raises(BackendFailure):
            await Runner.run(
                agent, state, session=world.session, run_config=world.session.run_config()
            )
        assert world.charges == [5]

        await run(agent, state, world.session, streamed=streamed)
        stored = await world.history()
        assert stored == ["user:hi", "call:c1", "output:c1", "assistant:done"]
        assert world.charges == [5]
        expected = Outcome.UNCHANGED if fault is Fault.REJECT else Outcome.COMMITTED
        assert [d.outcome for d in await world.session.decisions()] == [expected]
    finally:
        await world.close()


@pytest.mark.parametrize("backend", BACKEND_PARAMS[:1])
async def test_retry_from_the_checkpoint_before_the_failure_stores_the_output_once(
    backend: Backend, tmp_path: Path
) -> None:
    """Retrying from the approval checkpoint taken before the failed resume keeps one copy of
    the output in history (the SDK itself re-executes the tool from that older checkpoint)."""
    world = World(backend, tmp_path)
    try:
        agent, state, text = await interrupted_run(world)
        assert world.session is not None and world.faulty is not None
        world.faulty.plan(Fault.REJECT, at=1)
        with pytest.raises(BackendFailure):
            await Runner.run(
                agent, state, session=world.session, run_config=world.session.run_config()
            )
        session = await world.restart()
        await run(agent, await resume_state(agent, text), session, streamed=False)
        assert await world.history() == ["user:hi", "call:c1", "output:c1", "assistant:done"]
        # The older checkpoint still says "approved, not executed": the SDK runs the tool
        # again before any session call. Effect receipts are what will close this gap.
        assert world.charges == [5, 5]
    finally:
        await world.close()
