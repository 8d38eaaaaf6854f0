"""The core promise on the real SDK runner, one row per cell of the matrix:

{fresh ``Runner.run``, fresh ``Runner.run_streamed``, resumed from ``RunState.to_string()``
with ``run`` and with ``run_streamed``} x {the input save, a tool turn's save, the final
output's save} x {rejected, acknowledgement lost, history changed by another writer},
over every wrapped SQLite-family backend.

A failing first run leaves an intent; recovery then goes the way the row says. Expected:
a rejected batch is replayed exactly once, in order, before anything newer; a landed one is
never replayed; a changed history is denied before any model call, with history untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents.exceptions import UserError
from agents.testing import assistant_message

from agents_reconcile import ContinuationDenied, Outcome, Reason
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS, store_rotation
from ..support.runner_support import (
    FIRST_RUN,
    SAVE_BOUNDS,
    SAVE_NAMES,
    World,
    first_run_steps,
    model_input,
    resume_state,
    run,
    summarize,
)

PATHS = ["run", "run_streamed", "resume_run", "resume_streamed"]
FAULTS = [Fault.REJECT, Fault.LOST_ACK, Fault.CONCURRENT_WRITER]
EXPECTED_OUTCOME = {
    Fault.REJECT: (Outcome.UNCHANGED, Reason.BATCH_ABSENT),
    Fault.LOST_ACK: (Outcome.COMMITTED, Reason.BATCH_PRESENT),
    Fault.CONCURRENT_WRITER: (Outcome.AMBIGUOUS, Reason.HISTORY_CHANGED),
}
EXPECTED_REVISIONED = {
    # A revisioned store proves each case from its record of writes: another writer's append
    # is a legitimate extension (denied by default), never an ambiguity.
    Fault.REJECT: (Outcome.UNCHANGED, Reason.WRITE_ABSENT),
    Fault.LOST_ACK: (Outcome.COMMITTED, Reason.WRITE_FOUND),
    Fault.CONCURRENT_WRITER: (Outcome.EXTENDED, Reason.EXTENDED_BY_OTHERS),
}


async def fail_first_run(world: World, save: int, fault: Fault, *, streamed: bool) -> str | None:
    """Run the scripted conversation, failing the given save; return the RunState text when
    the run was streamed (the SDK can only hand out a state then)."""
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(fault, at=save)
    agent, _ = world.agent(first_run_steps())
    with pytest.raises(BackendFailure) as raised:
        await run(agent, "hi", session, streamed=streamed, context={})
    assert any("intent" in note for note in getattr(raised.value, "__notes__", []))
    assert len(await session.pending()) == 1
    if not streamed:
        return None
    state_text: str = raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]
    return state_text


def stored_after_failure(save: int, fault: Fault) -> list[str]:
    start, end = SAVE_BOUNDS[save]
    if fault is Fault.CONCURRENT_WRITER:
        return [*FIRST_RUN[:start], "user:written by someone else"]
    if fault is Fault.LOST_ACK:
        return FIRST_RUN[:end]
    return FIRST_RUN[:start]


@store_rotation()
@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.value)
@pytest.mark.parametrize("save", [1, 2, 3], ids=lambda s: SAVE_NAMES[s])
@pytest.mark.parametrize("path", PATHS)
async def test_recovery(world: World, path: str, save: int, fault: Fault) -> None:
    """Each cell: a rejected batch replays once, a landed one never, a changed history is denied."""
    streamed_first = path != "run"
    state_text = await fail_first_run(world, save, fault, streamed=streamed_first)
    assert await world.history() == stored_after_failure(save, fault)
    charges_before = len(world.charges)

    session = await world.restart()
    _, end = SAVE_BOUNDS[save]
    resumable = path.startswith("resume") and save != 3

    if path.startswith("resume") and save == 3:
        # The SDK marks a run whose final-output save failed as terminal and refuses every
        # resume; the user can still start a new run on the session, which reconciles.
        agent, model = world.agent([])
        assert state_text is not None
        # The SDK's own refusal; its words changed in 0.24.0 ("unrecoverable" boundary).
        with pytest.raises(UserError, match=r"unrecoverable|cannot be resumed"):
            await run(
                agent, await resume_state(agent, state_text), session, streamed=path.endswith("d")
            )
        assert model.calls == ()

    if resumable:
        assert state_text is not None
        remaining = first_run_steps()[1:] if save == 2 else first_run_steps()
        agent, model = world.agent(remaining)
        start: Any = await resume_state(agent, state_text)
        expected = list(FIRST_RUN)
    else:
        agent, model = world.agent([[assistant_message("ok")]])
        start = "next"
        expected = [*FIRST_RUN[:end], "user:next", "assistant:ok"]

    streamed = path in ("run_streamed", "resume_streamed")
    outcome, reason = (EXPECTED_REVISIONED if world.backend.revisioned else EXPECTED_OUTCOME)[fault]
    if fault is Fault.CONCURRENT_WRITER:
        untouched = await world.history()
        with pytest.raises(ContinuationDenied) as denied:
            await run(agent, start, session, streamed=streamed)
        assert denied.value.decision.outcome is outcome
        assert denied.value.decision.reason is reason
        assert model.calls == (), "no model call after a denial"
        assert await world.history() == untouched
        assert len(await session.pending()) == 1, "the intent stays for an operator"
        assert len(world.charges) == charges_before
        return

    await run(agent, start, session, streamed=streamed)
    stored = await world.history()
    assert stored == expected
    assert await session.pending() == []
    decisions = await session.decisions()
    assert [(d.outcome, d.reason) for d in decisions] == [(outcome, reason)]
    # The tool ran once in all, and its output is stored exactly once.
    assert len(world.charges) == stored.count("output:c1") == stored.count("call:c1")
    # The model saw what is stored, nothing twice.
    assert model_input(model) == stored[:-1]


@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_retried_input_after_lost_ack_is_stored_and_seen_once(
    world: World, streamed: bool
) -> None:
    """A user who resends the input whose save lost its acknowledgement gets it once in
    history and once in the model's input."""
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(Fault.LOST_ACK, at=1)
    agent, _ = world.agent([[assistant_message("x")]])
    with pytest.raises(BackendFailure):
        await run(agent, "hi", session, streamed=streamed)

    agent, model = world.agent([[assistant_message("ok")]])
    await run(agent, "hi", session, streamed=streamed)
    assert await world.history() == ["user:hi", "assistant:ok"]
    assert model_input(model) == ["user:hi"]


@pytest.mark.parametrize("world", BACKEND_PARAMS[:1], indirect=True)
async def test_resume_with_only_the_runstate_copy(world: World, tmp_path: Path) -> None:
    """The RunState copy alone is enough: resuming against an empty journal still replays once."""
    state_text = await fail_first_run(world, 2, Fault.REJECT, streamed=True)
    assert state_text is not None
    session = await world.restart(journal=tmp_path / "other-journal.db")
    assert await session.pending() == []
    agent, _model = world.agent(first_run_steps()[1:])
    await run(agent, await resume_state(agent, state_text), session, streamed=False)
    assert await world.history() == FIRST_RUN
    assert len(world.charges) == 1
    assert [d.action.value for d in await session.decisions()] == ["replayed"]


@pytest.mark.parametrize("world", BACKEND_PARAMS[:1], indirect=True)
async def test_journal_alone_is_enough_without_a_mapping_context(world: World) -> None:
    """Without a mapping context the journal alone carries the intent to the next run."""
    session = await world.start()
    assert world.faulty is not None
    world.faulty.plan(Fault.REJECT, at=2)
    agent, _ = world.agent(first_run_steps())
    with pytest.raises(BackendFailure):
        await run(agent, "hi", session, streamed=False, context=None)
    session = await world.restart()
    agent, _model = world.agent([[assistant_message("ok")]])
    await run(agent, "next", session, streamed=False)
    assert await world.history() == [*FIRST_RUN[:3], "user:next", "assistant:ok"]
    assert [summarize(i) for i in (await session.get_items())][-1] == "assistant:ok"
