"""A run's final output is stored once, whatever the SDK checks: a RunState whose final-output
save raised (rejected, or written with its acknowledgement lost) is refused by the wrapper when
resumed (``RunFinished``), after its save is settled, even where the SDK would resume it and ask
the model again; a new run on the session goes on. Over every store kind, run and streamed."""

from __future__ import annotations

from typing import Any

import pytest
from agents import RunState
from agents.testing import assistant_message

from agents_reconcile import ContinuationDenied, Reason, RunFinished
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS, store_rotation
from ..support.runner_support import World, model_input, resume_state, run


async def final_save_fails(world: World, fault: Fault) -> str:
    """A streamed run whose final-output save fails with ``fault``; its state as text."""
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(fault, at=2)
    agent, _ = world.agent([[assistant_message("done")]])
    with pytest.raises(BackendFailure) as raised:
        await run(agent, "hi", session, streamed=True, context={}, hooks=session.hooks())
    text: str = raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]
    return text


def as_if_the_sdk_did_not_check(state: RunState[Any]) -> RunState[Any]:
    """The state as an SDK without its own terminal check resumes it."""
    if hasattr(state, "_terminal_unrecoverable"):
        state._terminal_unrecoverable = False
    return state


@store_rotation()
@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("fault", [Fault.REJECT, Fault.LOST_ACK], ids=lambda f: f.value)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_state_whose_final_output_save_failed_never_stores_a_second_answer(
    world: World, fault: Fault, streamed: bool
) -> None:
    """Resumed, the state is refused before any model call, its answer stored once."""
    state_text = await final_save_fails(world, fault)
    session = await world.restart()
    agent, model = world.agent([[assistant_message("a second answer")]])
    state = as_if_the_sdk_did_not_check(await resume_state(agent, state_text))

    with pytest.raises(RunFinished) as refused:
        await run(agent, state, session, streamed=streamed, hooks=session.hooks())

    assert isinstance(refused.value, ContinuationDenied)
    assert refused.value.decision.reason is Reason.RUN_FINISHED
    assert "start a new run" in str(refused.value)
    assert model.calls == (), "no model call"
    assert await world.history() == ["user:hi", "assistant:done"]
    assert await session.pending() == []

    # The session itself is fine: a new run goes on from the stored answer.
    agent, model = world.agent([[assistant_message("ok")]])
    await run(agent, "next", session, streamed=streamed, hooks=session.hooks())
    assert await world.history() == ["user:hi", "assistant:done", "user:next", "assistant:ok"]
    assert model_input(model) == ["user:hi", "assistant:done", "user:next"]


@pytest.mark.parametrize("world", BACKEND_PARAMS[:1], indirect=True)
async def test_a_context_reused_after_a_finished_run_does_not_mark_a_later_save_final(
    world: World,
) -> None:
    """A run that saved its final output leaves no mark: a later run on the same context
    whose input save fails resumes as any other."""
    session = await world.start()
    assert world.faulty is not None
    context: dict[str, Any] = {}
    agent, _ = world.agent([[assistant_message("done")]])
    await run(agent, "hi", session, streamed=True, context=context, hooks=session.hooks())

    world.faulty.plan(Fault.REJECT, at=1)
    agent, _ = world.agent([[assistant_message("again")]])
    with pytest.raises(BackendFailure) as raised:
        await run(agent, "more", session, streamed=True, context=context, hooks=session.hooks())
    text = raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]

    agent, _ = world.agent([[assistant_message("again")]])
    await run(agent, await resume_state(agent, text), session, streamed=True, hooks=session.hooks())
    assert (await world.history())[:3] == ["user:hi", "assistant:done", "user:more"]
