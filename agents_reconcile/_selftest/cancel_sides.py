"""One side of a cancellation-matrix cell, played in this process: the wrapped session or its
bare twin, through the cancelled request and the user's continuation.

The script is the crash matrix's (``scenario.py``): ``buy 1`` on a fresh run, or, on the resume
path, ``buy 1`` up to its approval and the RunState checkpoint saved there, then resumed. A
recovery point needs a failed append first: that request fails (an injected fault) and the
next one is cancelled inside its reconciliation. After the cancellation the side waits for
what runs on in the background (bounded), then continues as a user would: resumes the
checkpoint (resume path) and sends the next input, each request with the scenario's agent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agents import Agent, RunConfig, RunState, function_tool
from agents.testing import ModelStep, ScriptedModel
from agents.tool_context import ToolContext

from .._backends.components import JournalEffects
from .._backends.journal import ACTIVE_STATES
from .._core.crashpoints import CrashPoint, reached
from .._core.ownership import current_owner
from .._effects import holds
from .._session.claims import PROCESS_IN_FLIGHT
from .._session.config import ReconcileConfig
from ..testing import Fault
from .cancel_judge import IntentRow, Side, Step
from .cancel_modes import LateLanding, Mode, Started, cancelled_request, describe
from .scenario import (
    MAX_MODEL_CALLS,
    TOOLS_LOG,
    AckLoggingSession,
    Evidence,
    Phase,
    Processor,
    calls_logged,
    item_name,
    respond,
    run_agent,
    scenario_agent,
    with_faults,
)

__all__ = ["IN_FLIGHT_WAIT", "QUIET_BOUND", "Script", "play"]

IN_FLIGHT_WAIT: Final = 1.0
"""How long a wrapped session waits for a write under way before denying (``in_flight_wait``)."""
QUIET_BOUND: Final = 2.0
"""How long a side waits for the background to settle, after the cancellation and at the end."""


@dataclass
class Script:
    """What a side plays: the cell's path, its failed append (if any), and where it cancels."""

    resumes: bool
    mode: Mode
    point: CrashPoint
    """Cancel the request the ``at``-th time it reaches this point."""
    at: int
    fault: Fault | None = None
    """Fail the request before at its ``fault_at``-th append this way (recovery points)."""
    fault_at: int = 1
    keyed: bool = False
    """The wrapped side's effect tool has its own key, the order's (``effect_tool(key=...)``);
    the bare side charges under the call's id either way."""


def bare_agent(
    evidence: Evidence, *, approval: bool, keyed: bool = False
) -> tuple[Agent[Any], ScriptedModel]:
    """The scenario's agent without the library: a plain ``function_tool`` charging the same
    kind of processor under the call's id, reaching ``BEFORE_EFFECT`` before it charges and
    ``BEFORE_RECEIPT`` after (where its twin's effect tool reaches them)."""
    processor = Processor(evidence)

    @function_tool(name_override="charge_card", needs_approval=approval)
    async def charge_card(ctx: ToolContext[Any], amount: int) -> str:
        """Charge the customer's card."""
        reached(CrashPoint.BEFORE_EFFECT)
        await asyncio.sleep(0)
        key = ctx.tool_call_id
        evidence.log(TOOLS_LOG, {"call_id": key, "key": key, "attempt": 1})
        output = processor.charge(key, key, amount)
        reached(CrashPoint.BEFORE_RECEIPT)
        await asyncio.sleep(0)
        return output

    model = ScriptedModel([ModelStep.respond(respond) for _ in range(MAX_MODEL_CALLS)])
    return Agent(name="shop", model=model, tools=[calls_logged(charge_card, evidence)]), model


class _BareSession:
    """The bare store (under a fault injector), logging each batch it acknowledged."""

    def __init__(self, inner: Any, evidence: Evidence) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.evidence = evidence

    @property
    def session_settings(self) -> Any:
        return self.inner.session_settings

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items: list[Any] = await self.inner.get_items(limit)
        return items

    async def add_items(self, items: list[Any]) -> None:
        await self.inner.add_items(items)
        self.evidence.log("acks.log", {"items": [item_name(item) for item in items]})

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


class _Talk:
    """The session, the evidence and the agents of one side."""

    def __init__(
        self, directory: Path, inner: Any, *, wrapped: bool, approval: bool, keyed: bool = False
    ) -> None:
        self.directory = directory
        self.inner = inner
        self.evidence = Evidence(directory, Phase.CRASH)
        faulty_session, self.faulty = with_faults(inner)
        self.wrapped: AckLoggingSession | None = None
        self.config: RunConfig | None = None
        self.session: Any
        if wrapped:
            settings = ReconcileConfig(
                journal=directory / "journal.db", in_flight_wait=IN_FLIGHT_WAIT
            )
            self.wrapped = AckLoggingSession(faulty_session, config=settings)
            self.wrapped.evidence = self.evidence
            self.session = self.wrapped
            self.config = self.wrapped.run_config()
        else:
            self.session = _BareSession(faulty_session, self.evidence)
        self.approval = approval
        self.keyed = keyed
        self._model: ScriptedModel | None = None

    def agent(self) -> Agent[Any]:
        """A new agent (with a new scripted model) for one request."""
        make = scenario_agent if self.wrapped is not None else bare_agent
        agent, model = make(self.evidence, approval=self.approval, keyed=self.keyed)
        self._model = model
        return agent

    def calls(self) -> int:
        """The model calls of the latest request."""
        return 0 if self._model is None else len(self._model.calls)

    def run(
        self, start: str | Callable[[Agent[Any]], Awaitable[RunState[Any]]], *, streamed: bool
    ) -> Callable[[Started | None], Awaitable[Any]]:
        """A request: ``start`` is the input, or makes the RunState to resume."""

        async def request(started: Started | None) -> Any:
            agent = self.agent()
            first = start if isinstance(start, str) else await start(agent)
            return await run_agent(
                agent, first, self.session, self.config, streamed=streamed, started=started
            )

        return request

    async def history(self) -> list[str]:
        return [item_name(item) for item in await self.inner.get_items()]

    def journal_effects(self) -> JournalEffects | None:
        if self.wrapped is None:
            return None
        effects = self.wrapped.journal.effects
        assert effects is not None, "the self-test's journal keeps effects"
        return effects

    async def effects(self) -> list[dict[str, Any]]:
        journal = self.journal_effects()
        if journal is None:
            return []
        return [
            {
                "key": effect.key,
                "call_id": effect.call_id,
                "state": effect.state.value,
                "attempts": effect.attempts,
                "output": effect.output,
                "owner": effect.owner,
            }
            for effect in await journal.of_session(self.session_id)
        ]

    @property
    def session_id(self) -> str:
        return str(self.inner.session_id)

    async def intents(self) -> list[IntentRow]:
        if self.wrapped is None:
            return []
        return [
            IntentRow(entry.intent.intent_id, entry.state.value, str(entry.owner))
            for entry in await self.wrapped.journal.pending(self.session_id)
        ]

    async def quiet(self) -> bool:
        """Wait (at most ``QUIET_BOUND``) until nothing of this side runs on in the
        background: no late write on its way, no background task of the library, no intent
        held active by this process, no effect being settled; whether it got there."""
        deadline = time.monotonic() + QUIET_BOUND
        me = current_owner()
        while True:
            busy = bool(LateLanding.landing)
            if self.wrapped is not None and not busy:
                busy = bool(PROCESS_IN_FLIGHT.background) or any(
                    row.state in {state.value for state in ACTIVE_STATES}
                    and row.owner.startswith(f"{me.host}/{me.pid}/")
                    for row in await self.intents()
                )
                busy = busy or any(holds.finishing(e["key"]) for e in await self.effects())
            if not busy:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)

    async def step(
        self,
        name: str,
        start: str | Callable[[Agent[Any]], Awaitable[RunState[Any]]],
        *,
        streamed: bool,
    ) -> Step:
        """One request of the continuation, with the history around it."""
        before = await self.history()
        pending = await self.wrapped.pending() if self.wrapped is not None else []
        outcome = await describe(
            asyncio.ensure_future(self.run(start, streamed=streamed)(None)), streamed=streamed
        )
        step = Step(
            name,
            outcome,
            before,
            await self.history(),
            [item_name(item) for intent in pending for item in intent.batch],
            self.calls(),
        )
        return step


async def play(script: Script, directory: Path, inner: Any, *, wrapped: bool) -> Side:
    """Play one side of a cell on ``inner`` (the store, opened on ``directory``)."""
    talk = _Talk(directory, inner, wrapped=wrapped, approval=script.resumes, keyed=script.keyed)
    try:
        return await _play(script, talk)
    finally:
        if talk.wrapped is not None:
            await talk.wrapped.journal.close()


async def _play(script: Script, talk: _Talk) -> Side:
    side = Side(talk.directory)
    streamed = script.mode.streamed
    checkpoint = ""

    async def resumed(agent: Agent[Any]) -> RunState[Any]:
        return await RunState.from_string(agent, checkpoint)

    if script.resumes:
        result = await talk.run("buy 1", streamed=False)(None)
        state = result.to_state()
        for interruption in state.get_interruptions():
            state.approve(interruption)
        checkpoint = state.to_string()
        side.checkpoint = await talk.history()
    number = 1
    if script.fault is not None:
        talk.faulty.plan(script.fault, at=script.fault_at)
        start: str | Callable[[Agent[Any]], Awaitable[RunState[Any]]]
        start = resumed if script.resumes else f"buy {number}"
        failing = asyncio.ensure_future(talk.run(start, streamed=streamed)(None))
        ended = await describe(failing, streamed=streamed)
        if ended != "failed":
            side.problems.append(f"the request meant to fail ended {ended}")
        number += 1
    start = resumed if script.resumes else f"buy {number}"
    request = talk.run(start, streamed=streamed)
    side.cancelled, side.fired = await cancelled_request(
        request, script.mode, script.point, at=script.at
    )
    if not await talk.quiet():
        side.problems.append(f"still busy {QUIET_BOUND} s after the cancellation")
    side.effects_before = await talk.effects()
    talk.evidence.phase = Phase.RECOVER
    if script.resumes:
        side.steps.append(await talk.step("resume", resumed, streamed=streamed))
    side.steps.append(await talk.step("fresh", f"buy {number + 1}", streamed=streamed))
    if not await talk.quiet():
        side.problems.append(f"still busy {QUIET_BOUND} s after the continuation")
    side.stored = await talk.history()
    side.effects = await talk.effects()
    side.intents = await talk.intents()
    side.busy = frozenset(PROCESS_IN_FLIGHT.busy)
    side.running = frozenset(e["key"] for e in side.effects if holds.running(e["key"]))
    side.me = str(current_owner())
    side.tasks = len(asyncio.all_tasks()) - 1
    if talk.wrapped is not None:
        decisions = await talk.wrapped.journal.decisions(session_id=talk.session_id)
        side.decisions = [decision.action.value for decision in reversed(decisions)]
    return side
