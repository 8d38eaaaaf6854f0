"""On a revisioned store, the wrapper's own writes and its own runs' reads move the head it
builds on: they are never taken for someone else's write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._selftest.scenario import item_name as summarize

from ..support.backends import BACKENDS, Backend, close

REVISIONED = [
    pytest.param(backend, id=backend.name)
    for backend in BACKENDS
    if backend.name.startswith("revisioned") and backend.available()
]


class Fleet:
    """Workers over one revisioned session, each its own store object and wrapper."""

    def __init__(self, backend: Backend, directory: Path) -> None:
        self.backend = backend
        self.directory = directory
        self.stores: list[Any] = []

    async def worker(self) -> ReconcilingSession:
        store = await self.backend.open("s", self.directory)
        self.stores.append(store)
        config = ReconcileConfig(journal=self.directory / "journal.db")
        return ReconcilingSession(store, config=config)

    async def history(self) -> list[str]:
        store = await self.backend.open("s", self.directory)
        self.stores.append(store)
        return [summarize(item) for item in await store.get_items()]

    async def close(self) -> None:
        for index, store in enumerate(self.stores):
            await close(store, drop=index == 0)


@pytest.fixture(params=REVISIONED)
async def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Fleet]:
    opened = Fleet(request.param, tmp_path)
    yield opened
    await opened.close()


def agent(*answers: str) -> Agent[Any]:
    return Agent(
        name="assistant", model=ScriptedModel([[assistant_message(text)] for text in answers])
    )


async def run(session: ReconcilingSession, text: str, model: Agent[Any], **base: Any) -> Any:
    config = session.run_config(RunConfig(**base) if base else None)
    return await Runner.run(model, text, session=session, run_config=config)


@pytest.mark.parametrize("edit", ["pop", "clear"])
async def test_the_wrappers_own_pop_or_clear_then_an_append_goes_on(
    fleet: Fleet, edit: str
) -> None:
    """A pop or a clear through the wrapper is its own write: the append after it goes on,
    instead of being refused as extended by others (whose writers were the wrapper itself)."""
    session = await fleet.worker()
    await session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    if edit == "pop":
        assert await session.pop_item() is not None
    else:
        await session.clear_session()
    await session.add_items([{"role": "user", "content": "c"}])
    expected = ["user:a", "user:c"] if edit == "pop" else ["user:c"]
    assert await fleet.history() == expected


@pytest.mark.parametrize("edit", ["pop", "clear"])
async def test_editing_the_last_exchange_then_running_with_a_limit_goes_on(
    fleet: Fleet, edit: str
) -> None:
    """On the runner: a run, then an edit through the wrapper (pop twice, or clear), then a
    run whose RunConfig limits the history it reads: it appends."""
    session = await fleet.worker()
    scripted = agent("first answer", "second answer")
    limited = {"session_settings": SessionSettings(limit=20)}
    await run(session, "first question", scripted, **limited)
    if edit == "pop":
        assert await session.pop_item() is not None
        assert await session.pop_item() is not None
    else:
        await session.clear_session()
    await run(session, "edited question", scripted, **limited)
    assert await fleet.history() == ["user:edited question", "assistant:second answer"]


async def test_a_pop_racing_another_writer_is_not_taken_for_the_wrappers_own(
    fleet: Fleet,
) -> None:
    """When another worker wrote between what this wrapper saw and its own pop, the next
    append still meets the other worker's write and is refused as an extension."""
    one, two = await fleet.worker(), await fleet.worker()
    await one.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    await two.add_items([{"role": "user", "content": "c"}])  # one has not seen it
    await one.pop_item()
    with pytest.raises(ContinuationDenied) as denied:
        await one.add_items([{"role": "user", "content": "d"}])
    assert denied.value.decision.reason.value == "extended_by_others"


async def test_a_history_limit_in_the_run_config_is_a_fresh_runs_read(fleet: Fleet) -> None:
    """Worker A runs, worker B runs, then A runs again with a history limit in its RunConfig:
    A's read of the history (through that limit) is what it builds on, so it goes on."""
    one, two = await fleet.worker(), await fleet.worker()
    limited = {"session_settings": SessionSettings(limit=20)}
    await run(one, "from a", agent("to a"), **limited)
    await run(two, "from b", agent("to b"), **limited)
    await run(one, "from a again", agent("to a again"), **limited)
    assert await fleet.history() == [
        "user:from a",
        "assistant:to a",
        "user:from b",
        "assistant:to b",
        "user:from a again",
        "assistant:to a again",
    ]
