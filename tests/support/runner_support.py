"""A scripted agent with a tool, and helpers to drive it through the real SDK runner."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunHooks, Runner, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._selftest.scenario import item_name as summarize
from agents_reconcile.testing import FaultInjectingSession

from .backends import Backend, close

FOREIGN = {"role": "user", "content": "written by someone else"}
FIRST_RUN = ["user:hi", "call:c1", "output:c1", "assistant:done"]
"""What a complete first run stores; its saves are [0:1], [1:3] and [3:4]."""
SAVE_BOUNDS = {1: (0, 1), 2: (1, 3), 3: (3, 4)}
SAVE_NAMES = {1: "input", 2: "tool_turn", 3: "final_output"}


def first_run_steps() -> list[Any]:
    return [
        [function_call("charge_card", {"amount": 5}, call_id="c1")],
        [assistant_message("done")],
    ]


@dataclass
class World:
    """One conversation on real files: the store, a fault injector, the wrapper, the tool."""

    backend: Backend
    directory: Path
    session_id: str = "user-42"
    charges: list[int] = field(default_factory=list)
    opened: list[Any] = field(default_factory=list)
    inner: Any = None
    faulty: FaultInjectingSession | None = None
    session: ReconcilingSession | None = None
    config: ReconcileConfig | None = None

    async def start(self, **config: Any) -> ReconcilingSession:
        self.config = ReconcileConfig(journal=self.directory / "journal.db", **config)
        self.inner = await self.open_store()
        self.faulty = FaultInjectingSession(self.inner)
        self.session = ReconcilingSession(self.faulty, config=self.config)
        return self.session

    async def open_store(self) -> Any:
        store = await self.backend.open(self.session_id, self.directory)
        self.opened.append(store)
        return store

    async def restart(self, journal: Path | None = None) -> ReconcilingSession:
        """A new wrapper over a new store object on the same files, as a new process has."""
        assert self.config is not None
        config = self.config
        if journal is not None:
            config = dataclasses.replace(config, journal=journal)
        self.inner = await self.open_store()
        self.faulty = None
        self.session = ReconcilingSession(self.inner, config=config)
        return self.session

    async def history(self) -> list[str]:
        store = await self.open_store()
        return [summarize(item) for item in await store.get_items()]

    async def close(self) -> None:
        # A server store's data lives in a namespace of this test's own: drop it once.
        for index, store in enumerate(self.opened):
            await close(store, drop=index == 0)

    def tool(self) -> FunctionTool:
        charges = self.charges

        @function_tool
        def charge_card(amount: int) -> str:
            """Charge the customer's card."""
            charges.append(amount)
            return f"charged {amount}"

        return charge_card

    def agent(self, steps: list[Any]) -> tuple[Agent[Any], ScriptedModel]:
        model = ScriptedModel(steps)
        return Agent(name="assistant", model=model, tools=[self.tool()]), model


async def run(
    agent: Agent[Any],
    start: Any,
    session: ReconcilingSession,
    *,
    streamed: bool,
    context: Any = None,
    run_config: RunConfig | None = None,
    hooks: RunHooks[Any] | None = None,
) -> Any:
    """Run to completion, streamed or not; return the result (streamed results too)."""
    config = run_config if run_config is not None else session.run_config()
    if streamed:
        result = Runner.run_streamed(
            agent, start, session=session, run_config=config, context=context, hooks=hooks
        )
        try:
            async for _ in result.stream_events():
                pass
        except BaseException as exc:
            exc.streamed_result = result  # type: ignore[attr-defined]
            raise
        return result
    return await Runner.run(
        agent, start, session=session, run_config=config, context=context, hooks=hooks
    )


async def resume_state(agent: Agent[Any], text: str) -> RunState[Any]:
    return await RunState.from_string(agent, text)


def model_input(model: ScriptedModel, call: int = -1) -> list[str]:
    """Summaries of what the model received in one call."""
    received = model.calls[call].input
    if isinstance(received, str):
        return [f"user:{received}"]
    return [summarize(item) for item in received]
