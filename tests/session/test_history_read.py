"""``session.history()``: what a denied session holds, readable for a person while the
session waits for an operator, over every store kind. A run whose save failed after another
writer appended is denied; ``get_items()`` raises ``ContinuationDenied`` as it must, while
``history()`` gives the store's items as they are, and leaves everything as it found it: the
intent still pending, no decision added, the next run still denied."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ContinuationDenied
from agents_reconcile._selftest.scenario import item_name
from agents_reconcile.testing import BackendFailure, Fault

from ..support.backends import BACKEND_PARAMS
from ..support.runner_support import World, run


def agent(answer: str) -> Agent[Any]:
    return Agent(name="a", model=ScriptedModel([[assistant_message(answer)]]))


@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_denied_session_s_history_is_read_without_settling_or_unblocking_it(
    world: World, streamed: bool
) -> None:
    """Denied after another writer changed the history, the session's ``get_items()``
    raises while ``history()`` gives what the store holds (the last item too, by limit);
    afterwards the same intent is pending, no decision was added, and a run is still
    denied before any model call."""
    session = await world.start()
    assert world.faulty is not None
    await run(agent("hello"), "hi", session, streamed=streamed)
    world.faulty.plan(Fault.CONCURRENT_WRITER, at=1)
    with pytest.raises(BackendFailure):
        await run(agent("lost?"), "again", session, streamed=streamed)
    session = await world.restart()
    with pytest.raises(ContinuationDenied):
        await session.get_items()
    pending = [intent.intent_id for intent in await session.pending()]
    decisions = len(await session.decisions())
    assert pending, "the failed write waits for an operator"

    held = [item_name(item) for item in await session.history()]
    assert held == await world.history()
    assert held[:2] == ["user:hi", "assistant:hello"], "what the person saw is there"
    assert [item_name(item) for item in await session.history(limit=1)] == held[-1:]

    assert [intent.intent_id for intent in await session.pending()] == pending
    assert len(await session.decisions()) == decisions
    with pytest.raises(ContinuationDenied):
        await session.get_items()
    model = agent("never")
    with pytest.raises(ContinuationDenied):
        await run(model, "and now?", session, streamed=streamed)
    assert isinstance(model.model, ScriptedModel) and model.model.calls == ()
