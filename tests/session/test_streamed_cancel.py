"""A streamed run cancelled at once (``result.cancel()``) while a session save is under way,
then resumed from the state it hands out: the write ends after its caller gave up (before or
after landing), the state still carries its copy, and the resumed run goes on with every item
stored once, in order, as the bare session goes on, over every store kind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import Runner

from agents_reconcile._backends.journal import IntentState
from agents_reconcile.testing import Fault

from ..support.backends import BACKEND_PARAMS, store_rotation
from ..support.runner_support import (
    FIRST_RUN,
    SAVE_NAMES,
    World,
    first_run_steps,
    model_input,
    resume_state,
    run,
)


class EndedWrites:
    """Counts the writes through a session that have ended (returned, raised or were
    cancelled, before or after reaching the store)."""

    def __init__(self, store: Any) -> None:
        self.count = 0
        for name in ("add_items", "append_if"):
            if hasattr(store, name):
                setattr(store, name, self._counted(getattr(store, name)))

    def _counted(self, write: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                return await write(*args, **kwargs)
            finally:
                self.count += 1

        return counted


async def cancel_during_save(
    world: World, save: int, *, write_first: bool
) -> tuple[str, EndedWrites]:
    """Run streamed, cancel at once while save ``save`` is under way; return the state text
    taken right after the stream ends (the write has not ended yet), and the count of the
    session's writes that have ended."""
    session = await world.start()
    assert world.faulty is not None
    ended = EndedWrites(world.faulty)
    planned = world.faulty.plan(Fault.SLOW, at=save, delay=0.3, write_first=write_first)
    agent, _ = world.agent(first_run_steps())
    result = Runner.run_streamed(
        agent, "hi", session=session, run_config=session.run_config(), context={}
    )

    async def cancel_when_saving() -> None:
        await planned.fired.wait()
        await asyncio.sleep(0.05)
        result.cancel()

    canceller = asyncio.ensure_future(cancel_when_saving())
    async for _ in result.stream_events():
        pass
    await canceller
    text: str = result.to_state().to_string()
    return text, ended


@store_rotation()
@pytest.mark.parametrize("world", BACKEND_PARAMS, indirect=True)
@pytest.mark.parametrize("write_first", [False, True], ids=["lands_after", "lands_before"])
@pytest.mark.parametrize("save", [1, 2], ids=lambda s: SAVE_NAMES[s])
async def test_a_streamed_run_cancelled_during_a_save_resumes_with_every_item_once(
    world: World, save: int, write_first: bool
) -> None:
    state_text, ended = await cancel_during_save(world, save, write_first=write_first)
    # The cancelled write ends by itself (it outlives its caller, bounded); where the store's
    # record of writes will judge it, its intent is left for the next use, else it is cleared.
    assert world.session is not None
    deadline = time.monotonic() + 30
    while ended.count < save or {
        entry.state for entry in await world.session.journal.pending(None)
    } - {IntentState.CANCELLED}:
        assert time.monotonic() < deadline, "the cancelled write never ended"
        await asyncio.sleep(0.02)
    charges = len(world.charges)

    session = await world.restart()
    agent, model = world.agent(first_run_steps()[save - 1 :])
    await run(agent, await resume_state(agent, state_text), session, streamed=True)

    stored = await world.history()
    assert stored == FIRST_RUN
    assert await session.pending() == []
    assert len(world.charges) == 1 == charges + (save == 1), "the tool ran once in all"
    assert model_input(model) == stored[:-1], "the model saw what is stored, nothing twice"
