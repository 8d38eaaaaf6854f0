"""A resumed approval whose tool-turn save fails has a way forward: the state the failed run
left (the ``RunState`` object given to ``Runner.run``, which the SDK advances in place, or the
streamed result's ``to_state()``) resumes to the answer without running the tool again, on both
run paths and every store kind. The checkpoint from before the failed resume is refused
(resuming it would run the approved tool again), and the refusal says which state to resume."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Runner

from agents_reconcile import ContinuationDenied, Reason
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS, store_rotation
from ..support.runner_support import World, resume_state, run
from .test_approval_composition import interrupted_run

COMPLETE = ["user:hi", "call:c1", "output:c1", "assistant:done"]


async def failed_resume(world: World, fault: Fault, *, streamed: bool) -> tuple[Any, str, str]:
    """Approve, resume, fail the tool turn's save; return the agent, the approval checkpoint's
    text, and the text of the state the failed run left."""
    agent, state, checkpoint = await interrupted_run(world)
    session = world.session
    assert session is not None and world.faulty is not None
    world.faulty.plan(fault, at=1)
    with pytest.raises(BackendFailure) as raised:
        await run(agent, state, session, streamed=streamed, hooks=session.hooks())
    # Streamed, the result hands out the state; run, the SDK advanced the one it was given.
    left = raised.value.streamed_result.to_state() if streamed else state  # type: ignore[attr-defined]
    return agent, checkpoint, left.to_string()


@store_rotation()
@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("fault", [Fault.REJECT, Fault.LOST_ACK], ids=lambda f: f.value)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_the_state_a_failed_resume_left_goes_on_without_running_the_tool_again(
    world: World, fault: Fault, streamed: bool
) -> None:
    """Resumed in a new process, the state the failed run left settles its save and ends with
    the answer; the tool ran once, its output is stored once."""
    agent, _, left = await failed_resume(world, fault, streamed=streamed)
    assert world.charges == [5]

    session = await world.restart()
    await run(
        agent, await resume_state(agent, left), session, streamed=streamed, hooks=session.hooks()
    )
    assert await world.history() == COMPLETE
    assert world.charges == [5]
    assert await session.pending() == []


@pytest.mark.parametrize("world", BACKEND_PARAMS[:1], indirect=True)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_the_checkpoint_before_a_failed_resume_is_refused_naming_the_way_forward(
    world: World, streamed: bool
) -> None:
    """Resuming the approval checkpoint again would run the approved tool a second time: it is
    refused before the tool runs, and the refusal names the state to resume instead; that
    state then goes on."""
    agent, checkpoint, left = await failed_resume(world, Fault.REJECT, streamed=streamed)

    again = await world.restart()
    with pytest.raises(ContinuationDenied) as denied:
        await Runner.run(
            agent,
            await resume_state(agent, checkpoint),
            session=again,
            run_config=again.run_config(),
            hooks=again.hooks(),
        )
    assert denied.value.decision.reason is Reason.STALE_STATE
    assert "the state the failed run left" in str(denied.value)
    assert world.charges == [5]

    session = await world.restart()
    await run(
        agent, await resume_state(agent, left), session, streamed=streamed, hooks=session.hooks()
    )
    assert await world.history() == COMPLETE
    assert world.charges == [5]
