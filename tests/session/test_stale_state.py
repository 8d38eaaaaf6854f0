"""A RunState checkpoint older than the session's history is refused: resuming it would act on
a history the run has not seen (run an approved tool again, append what is already there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Runner
from agents.testing import assistant_message

from agents_reconcile import BindingMismatch, ContinuationDenied, Reason, ReconcilingSession
from agents_reconcile._session.runstate import CONTEXT_KEY
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS, BACKENDS, Backend
from ..support.runner_support import World, resume_state
from .test_approval_composition import interrupted_run

COMPLETE = ["user:hi", "call:c1", "output:c1", "assistant:done"]


async def resume(agent: Any, text: str, session: ReconcilingSession, *, hooks: bool) -> Any:
    state = await resume_state(agent, text)
    return await Runner.run(
        agent,
        state,
        session=session,
        run_config=session.run_config(),
        hooks=session.hooks() if hooks else None,
    )


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
async def test_an_old_checkpoint_is_refused_before_its_tool_runs_again(
    backend: Backend, tmp_path: Path
) -> None:
    """Resumed once to the end, the approval checkpoint is resumed again: with the gate's
    hooks the run is denied before the approved tool runs a second time."""
    world = World(backend, tmp_path)
    try:
        agent, _, text = await interrupted_run(world)
        session = await world.restart()
        await resume(agent, text, session, hooks=True)
        assert await world.history() == COMPLETE and world.charges == [5]

        again = await world.restart()
        with pytest.raises(ContinuationDenied) as denied:
            await resume(agent, text, again, hooks=True)
        assert denied.value.decision.reason is Reason.STALE_STATE
        assert world.charges == [5]
        assert await world.history() == COMPLETE
    finally:
        await world.close()


async def test_without_hooks_the_sdk_runs_the_tool_but_nothing_is_appended(
    tmp_path: Path,
) -> None:
    """``run_config()`` alone cannot stop the SDK from running an approved tool on resume;
    the append that follows is refused, so the history keeps one copy."""
    world = World(BACKENDS[0], tmp_path)
    try:
        agent, _, text = await interrupted_run(world)
        await resume(agent, text, await world.restart(), hooks=False)
        with pytest.raises(ContinuationDenied) as denied:
            await resume(agent, text, await world.restart(), hooks=False)
        assert denied.value.decision.reason is Reason.STALE_STATE
        assert world.charges == [5, 5]
        assert await world.history() == COMPLETE
    finally:
        await world.close()


async def test_retrying_the_checkpoint_before_a_failed_resume_is_refused_with_hooks(
    tmp_path: Path,
) -> None:
    """The resume failed after the tool ran; the intent holds its output. Retrying the older
    checkpoint replays that output and is refused before the tool runs again."""
    world = World(BACKENDS[0], tmp_path)
    try:
        agent, state, text = await interrupted_run(world)
        assert world.session is not None and world.faulty is not None
        world.faulty.plan(Fault.REJECT, at=1)
        with pytest.raises(BackendFailure):
            await Runner.run(
                agent, state, session=world.session, run_config=world.session.run_config()
            )
        with pytest.raises(ContinuationDenied) as denied:
            await resume(agent, text, await world.restart(), hooks=True)
        assert denied.value.decision.reason is Reason.STALE_STATE
        assert world.charges == [5]
        assert await world.history() == ["user:hi", "call:c1", "output:c1"]
    finally:
        await world.close()


async def test_the_newest_state_and_fresh_runs_with_a_reused_context_go_on(
    tmp_path: Path,
) -> None:
    """A fresh run reads the whole history, so a context reused across runs is never stale,
    even when another wrapper wrote in between."""
    world = World(BACKENDS[0], tmp_path)
    try:
        session = await world.start()
        context: dict[str, Any] = {}
        agent, _ = world.agent([[assistant_message("one")], [assistant_message("two")]])
        await Runner.run(
            agent, "a", session=session, run_config=session.run_config(), context=context
        )
        assert CONTEXT_KEY in context
        other = await world.restart()
        await other.add_items([{"role": "user", "content": "from elsewhere"}])
        await Runner.run(
            agent, "b", session=session, run_config=session.run_config(), context=context
        )
        assert await world.history() == [
            "user:a",
            "assistant:one",
            "user:from elsewhere",
            "user:b",
            "assistant:two",
        ]
    finally:
        await world.close()


async def test_a_tampered_seen_write_count_is_refused(tmp_path: Path) -> None:
    world = World(BACKENDS[0], tmp_path)
    try:
        agent, state, _ = await interrupted_run(world)
        marks = state._context.context[CONTEXT_KEY]["seen_write_counts"]  # type: ignore[union-attr]
        for key in marks:
            marks[key] = "many"
        assert world.session is not None
        with pytest.raises(BindingMismatch) as denied:
            await resume(agent, state.to_string(), await world.restart(), hooks=True)
        assert denied.value.decision.reason is Reason.RECORD_UNTRUSTED
        assert world.charges == []
    finally:
        await world.close()
