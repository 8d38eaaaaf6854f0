"""One process of a fault-matrix cell: a multi-turn agent with a card-charging effect tool.

A cell runs two processes on the same files. The first runs the conversation with a crash
point armed (and perhaps a fault planned) and is expected to die by SIGKILL. The second
recovers the way the cell says: a fresh run with the next input, or a resume of the RunState
checkpoint saved before the crash, each with ``Runner.run`` or ``Runner.run_streamed``.

The tool is an effect tool (``agents_reconcile._effects``): its body charges an external
processor kept in the cell's directory, which, like a real one, dedupes on the idempotency key
the body gives it; its ``check`` asks that processor whether it holds a charge under a key.

Each process leaves evidence in the cell's directory, written before it moves on so that a
kill cannot lose it: ``acks.log`` (every batch the session acknowledged to the SDK),
``calls.log`` (every call of the tool by the runner), ``tools.log`` (every run of the tool's
body, with its key), ``processor.log`` (every charge request the processor received, and
whether it charged), ``checks.log`` (every question ``check`` asked it),
``checkpoint.json`` (the saved RunState) and, from the recovering process, ``recovery.json``.
Items are logged by name only (``user:buy 1``, ``call:charge-1``), which is what the judge
compares.
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, TypeAlias

import orjson
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    RunResultStreaming,
    RunState,
    TResponseInputItem,
    set_tracing_disabled,
)
from agents.memory import OpenAIConversationsSession, Session
from agents.run_context import RunContextWrapper
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.testing.model import ModelCall
from agents.tool_context import ToolContext

from .._backends.sqlite.journal import SQLiteJournal
from .._core import crashpoints
from .._core.crashpoints import CrashPoint
from .._effects.tool import NOT_FOUND, current_effect, effect_tool
from .._session.config import ReconcileConfig
from .._session.session import ReconcilingSession
from ..errors import ContinuationDenied
from ..testing import (
    BackendFailure,
    Fault,
    FaultInjectingConversationsClient,
    FaultInjectingSession,
)
from .stores import close_store, store_named

__all__ = [
    "CALLS_LOG",
    "CHECKS_LOG",
    "FOREIGN",
    "PROCESSOR_LOG",
    "SESSION_ID",
    "TOOLS_LOG",
    "AckLoggingSession",
    "Evidence",
    "Job",
    "Phase",
    "Processor",
    "RecoveryPath",
    "calls_logged",
    "charged",
    "item_name",
    "main_async",
    "read_log",
    "respond",
    "run_agent",
    "run_job",
    "scenario_agent",
    "with_faults",
]

SESSION_ID: Final = "customer-7"
FOREIGN: Final = {"role": "user", "content": "foreign"}
"""What another writer appends between the crash and the recovery, in cells that say so."""
MAX_MODEL_CALLS: Final = 8
CALLS_LOG: Final = "calls.log"
TOOLS_LOG: Final = "tools.log"
PROCESSOR_LOG: Final = "processor.log"
CHECKS_LOG: Final = "checks.log"


class RecoveryPath(enum.Enum):
    """How the conversation goes on after the crash."""

    RUN = "run"
    """A fresh ``Runner.run`` with the next input."""
    STREAMED = "streamed"
    """A fresh ``Runner.run_streamed`` with the next input."""
    RESUME_RUN = "resume_run"
    """``Runner.run`` on the RunState checkpoint saved before the crash."""
    RESUME_STREAMED = "resume_streamed"
    """``Runner.run_streamed`` on that checkpoint."""

    @property
    def resumes(self) -> bool:
        return self in (RecoveryPath.RESUME_RUN, RecoveryPath.RESUME_STREAMED)

    @property
    def streamed(self) -> bool:
        return self in (RecoveryPath.STREAMED, RecoveryPath.RESUME_STREAMED)


class Phase(enum.Enum):
    PROBE = "probe"
    """No crash: record which batches the conversation appends, for naming boundaries."""
    CRASH = "crash"
    RECOVER = "recover"


@dataclass(frozen=True)
class Job:
    """What one process of a cell does."""

    directory: str
    store: str
    path: RecoveryPath
    phase: Phase
    point: CrashPoint | None = None
    at: int = 1
    """Stop at the ``at``-th append after the checkpoint (fresh paths: after the start)."""
    fault: Fault | None = None
    """Fail the ``at``-th append this way, then recover in the same process, which is where
    a reconciliation crash point stops it."""
    foreign: bool = False
    """(Recovery) another writer appends to the store before the recovery starts."""
    keyed: bool = False
    """The effect tool has its own key (``effect_tool(key=...)``: the order's), not the
    per-call one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "store": self.store,
            "path": self.path.value,
            "phase": self.phase.value,
            "point": None if self.point is None else self.point.value,
            "at": self.at,
            "fault": None if self.fault is None else self.fault.value,
            "foreign": self.foreign,
            "keyed": self.keyed,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Job:
        return cls(
            directory=raw["directory"],
            store=raw["store"],
            path=RecoveryPath(raw["path"]),
            phase=Phase(raw["phase"]),
            point=None if raw["point"] is None else CrashPoint(raw["point"]),
            at=int(raw["at"]),
            fault=None if raw["fault"] is None else Fault(raw["fault"]),
            foreign=bool(raw["foreign"]),
            keyed=bool(raw.get("keyed", False)),
        )


Injector: TypeAlias = FaultInjectingSession | FaultInjectingConversationsClient
"""What plans a scenario's faults: ``plan(fault, at=n)``."""


def with_faults(inner: Any) -> tuple[Any, Injector]:
    """The session to wrap so that planned faults fire, and what plans them: a fault injector
    around ``inner``, or, for a Conversations session (wrapped as itself), its client's."""
    if isinstance(inner, OpenAIConversationsSession):
        client = inner._openai_client
        assert isinstance(client, FaultInjectingConversationsClient)
        return inner, client
    faulty = FaultInjectingSession(inner)
    return faulty, faulty


def item_name(item: Any) -> str:
    """``role:text``, ``call:<id>`` or ``output:<id>``: enough to compare histories."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True)
    kind = item.get("type")
    if kind == "function_call":
        return f"call:{item['call_id']}"
    if kind == "function_call_output":
        return f"output:{item['call_id']}"
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return f"{item.get('role')}:{content}"


def charged(amount: int) -> str:
    """The processor's answer for a charge of ``amount``: the tool's output, and its receipt."""
    return f"charged {amount}"


def read_log(log: Path) -> Iterator[dict[str, Any]]:
    """The records of one of a cell's logs, oldest first (none when it was never written)."""
    try:
        raw = log.read_bytes()
    except FileNotFoundError:
        return
    for line in raw.splitlines():
        if line.strip():
            yield orjson.loads(line)


class Evidence:
    """Append-only logs in the cell directory; each line reaches the OS before going on."""

    def __init__(self, directory: Path, phase: Phase) -> None:
        self.directory = directory
        self.phase = phase

    def log(self, name: str, record: dict[str, Any]) -> None:
        line = orjson.dumps({"phase": self.phase.value, **record}) + b"\n"
        fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def save(self, name: str, value: Any) -> None:
        target = self.directory / name
        temporary = target.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps(value))
        os.replace(temporary, target)


class AckLoggingSession(ReconcilingSession):
    """Logs each batch once the session has acknowledged it to the SDK."""

    evidence: Evidence

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        await super().add_items(items, wrapper=wrapper)
        self.evidence.log("acks.log", {"items": [item_name(item) for item in items]})


def respond(call: ModelCall) -> Any:
    # A model that reads the conversation: charge for the newest "buy N" once, then confirm.
    received = call.input
    names = [f"user:{received}"] if isinstance(received, str) else list(map(item_name, received))
    asks = [index for index, name in enumerate(names) if name.startswith("user:buy ")]
    if not asks:
        return [assistant_message("nothing to buy", item_id="msg-none")]
    number = names[asks[-1]].removeprefix("user:buy ")
    if f"output:charge-{number}" in names[asks[-1] :]:
        return [assistant_message(f"done {number}", item_id=f"msg-{number}")]
    return [function_call("charge_card", {"amount": int(number)}, call_id=f"charge-{number}")]


class Processor:
    """The card processor, an append-only log in the cell's directory. Like a real processor
    it dedupes on the idempotency key: a request under a key it holds a charge for charges
    nothing and answers with that charge. Every request is logged, with whether it charged."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence

    def held(self, key: str) -> int | None:
        """The amount charged under ``key``, or None."""
        for record in read_log(self.evidence.directory / PROCESSOR_LOG):
            if record["key"] == key and record["charged"]:
                return int(record["amount"])
        return None

    def charge(self, key: str, call_id: str, amount: int) -> str:
        held = self.held(key)
        record = {"key": key, "call_id": call_id, "amount": amount, "charged": held is None}
        self.evidence.log(PROCESSOR_LOG, record)
        return charged(amount if held is None else held)

    async def check(self, key: str) -> Any:
        """The tool's ``check``: the charge under ``key`` as the tool's output, if any."""
        held = self.held(key)
        self.evidence.log(CHECKS_LOG, {"key": key, "found": held is not None})
        return NOT_FOUND if held is None else charged(held)


def calls_logged(tool: FunctionTool, evidence: Evidence) -> FunctionTool:
    """``tool``, logging each call the runner makes (answered by the body or by the journal)."""
    invoke = tool.on_invoke_tool

    async def logged(context: ToolContext[Any], input_json: str) -> Any:
        evidence.log(CALLS_LOG, {"call_id": context.tool_call_id})
        return await invoke(context, input_json)

    return replace(tool, on_invoke_tool=logged)


def order_key(arguments: dict[str, Any]) -> str:
    """The effect's own key of a keyed cell's tool: the order (one per amount asked)."""
    return f"order-{arguments['amount']}"


def scenario_agent(
    evidence: Evidence, *, approval: bool, keyed: bool = False
) -> tuple[Agent[Any], ScriptedModel]:
    processor = Processor(evidence)

    @effect_tool(needs_approval=approval, check=processor.check, key=order_key if keyed else None)
    async def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        effect = current_effect()
        run = {"call_id": effect.call_id, "key": effect.key, "attempt": effect.attempt}
        evidence.log(TOOLS_LOG, run)
        return processor.charge(effect.key, effect.call_id, amount)

    model = ScriptedModel([ModelStep.respond(respond) for _ in range(MAX_MODEL_CALLS)])
    tool = calls_logged(charge_card, evidence)
    return Agent(name="shop", model=model, tools=[tool]), model


async def run_agent(
    agent: Agent[Any],
    start: Any,
    session: Session,
    config: RunConfig | None,
    *,
    streamed: bool,
    started: Callable[[RunResultStreaming], None] | None = None,
) -> Any:
    """Run ``agent`` from ``start`` (an input, or a RunState) on ``session``, as the scenario
    does; ``started`` is handed a streamed run's result before its events are consumed."""
    # A mapping context carries the session's marks; a RunState brings its own (passing
    # ``context=`` with a state would replace it).
    context: dict[str, Any] | None = None if isinstance(start, RunState) else {}
    hooks = session.hooks() if isinstance(session, ReconcilingSession) else None
    if not streamed:
        return await Runner.run(
            agent, start, session=session, run_config=config, context=context, hooks=hooks
        )
    result = Runner.run_streamed(
        agent, start, session=session, run_config=config, context=context, hooks=hooks
    )
    if started is not None:
        started(result)
    async for _ in result.stream_events():
        pass
    return result


class _Conversation:
    """The agent, the session and the evidence of one process."""

    def __init__(self, job: Job, inner: Any) -> None:
        self.job = job
        self.directory = Path(job.directory)
        self.evidence = Evidence(self.directory, job.phase)
        config = ReconcileConfig(journal=self.directory / "journal.db")
        self.faulty: Injector | None = None
        if job.phase is Phase.RECOVER:
            self.session = AckLoggingSession(inner, config=config)
        else:
            faulty_session, self.faulty = with_faults(inner)
            self.session = AckLoggingSession(faulty_session, config=config)
        self.session.evidence = self.evidence
        self.agent, self.model = scenario_agent(
            self.evidence, approval=job.path.resumes, keyed=job.keyed
        )

    def arm(self) -> None:
        """Arm the crash point (or plan the fault) for the ``at``-th append from now."""
        job = self.job
        self.evidence.log("acks.log", {"armed": True})
        if job.fault is not None:
            assert self.faulty is not None
            self.faulty.plan(job.fault, at=job.at)
        elif job.point is not None and job.phase is Phase.CRASH:
            crashpoints.arm(job.point, at=job.at)

    async def first_turn(self) -> None:
        """The conversation up to the crash: ``buy 1``, through an approval when resuming."""
        config = self.session.run_config()
        if not self.job.path.resumes:
            self.arm()
            await run_agent(
                self.agent, "buy 1", self.session, config, streamed=self.job.path.streamed
            )
            return
        result = await Runner.run(
            self.agent, "buy 1", session=self.session, run_config=config, context={}
        )
        state = result.to_state()
        for interruption in state.get_interruptions():
            state.approve(interruption)
        stored = [item_name(item) for item in await self.session.inner.get_items()]
        self.evidence.save("checkpoint.json", {"state": state.to_string(), "history": stored})
        self.arm()
        await run_agent(self.agent, state, self.session, config, streamed=self.job.path.streamed)

    async def go_on(self) -> None:
        """What the cell's path does after a crash."""
        config = self.session.run_config()
        path = self.job.path
        if not path.resumes:
            await run_agent(self.agent, "buy 2", self.session, config, streamed=path.streamed)
            return
        saved = orjson.loads((self.directory / "checkpoint.json").read_bytes())
        state = await RunState.from_string(self.agent, saved["state"])
        await run_agent(self.agent, state, self.session, config, streamed=path.streamed)


async def _crash(job: Job, inner: Any) -> None:
    conversation = _Conversation(job, inner)
    try:
        await conversation.first_turn()
    except BackendFailure:
        if job.fault is None:
            raise
        # The planned fault fired: recover in this process, with the point armed there.
        assert job.point is not None
        crashpoints.arm(job.point)
        await conversation.go_on()


async def _effects(session: ReconcilingSession) -> list[dict[str, Any]]:
    """The session's effects as the journal holds them: enough to judge by."""
    effects = session.journal.effects
    assert effects is not None, "the self-test's journal keeps effects"
    return [
        {
            "key": effect.key,
            "call_id": effect.call_id,
            "state": effect.state.value,
            "attempts": effect.attempts,
            "output": effect.output,
        }
        for effect in await effects.of_session(session.session_id)
    ]


async def _recover(job: Job, inner: Any) -> dict[str, Any]:
    if job.foreign:
        await inner.add_items([dict(FOREIGN)])
    before = [item_name(item) for item in await inner.get_items()]
    conversation = _Conversation(job, inner)
    pending = await conversation.session.pending()
    effects_before = await _effects(conversation.session)
    outcome, detail, reason = "completed", "", None
    try:
        await conversation.go_on()
    except ContinuationDenied as denied:
        outcome, detail = "denied", str(denied).splitlines()[0]
        reason = denied.decision.reason.value if denied.decision is not None else None
    except Exception as error:
        outcome, detail = "error", f"{type(error).__name__}: {error}"
    journal = SQLiteJournal(conversation.directory / "journal.db", read_only=True)
    try:
        decisions = await journal.decisions(session_id=conversation.session.session_id)
    finally:
        await journal.close()
    return {
        "outcome": outcome,
        "detail": detail,
        "reason": reason,
        "pending_before": len(pending),
        "pending_items": [item_name(item) for intent in pending for item in intent.batch],
        "history_before": before,
        "model_calls": len(conversation.model.calls),
        "decisions": [[d.outcome.value, d.action.value] for d in reversed(decisions)],
        "effects_before": effects_before,
        "effects": await _effects(conversation.session),
    }


async def _probe(job: Job, inner: Any) -> None:
    conversation = _Conversation(job, inner)
    await conversation.first_turn()


async def main_async(job: Job) -> None:
    set_tracing_disabled(True)
    inner = await store_named(job.store).open(SESSION_ID, Path(job.directory))
    try:
        if job.phase is Phase.CRASH:
            await _crash(job, inner)
        elif job.phase is Phase.PROBE:
            await _probe(job, inner)
        else:
            result = await _recover(job, inner)
            Evidence(Path(job.directory), job.phase).save("recovery.json", result)
    finally:
        # A probe only names the appends: its data on a server is of no further use.
        await close_store(inner, drop=job.phase is Phase.PROBE)


def run_job(job: Job) -> None:
    """The entry point of a cell's child process; its stderr goes to the cell's directory."""
    log = Path(job.directory) / f"stderr-{job.phase.value}.log"
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    asyncio.run(main_async(job))
