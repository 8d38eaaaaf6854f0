"""A three-scene, offline demonstration of what ``ReconcilingSession`` decides and why.

Each scene runs a scripted agent whose tool charges a card, breaks the save of the tool turn
in one of the ways real backends break, and then runs the agent again on the same session:

- (a) the backend rejects the write: the batch is missing, so it is replayed once;
- (b) the write lands but the acknowledgement is lost: the batch is there, never replayed;
- (c) another writer changes the history after the failure: the next run is refused before
  any model call, with the history left as it was.

Everything runs on the embedded default: an ``SQLiteSession`` file and the SQLite journal,
both inside the directory given to ``run_demo``. The demo checks its own claims and returns
a non-zero exit code if any of them does not hold.
"""

from __future__ import annotations

import logging
import shlex
import textwrap
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from agents import Agent, FunctionTool, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from ._core.records import Action, Decision, Outcome, Reason
from ._core.signing import signer_for
from ._session.config import ENV_FLAG, ReconcileConfig, env_disabled
from ._session.default_runner import env_install
from ._session.session import ReconcilingSession
from .errors import ContinuationDenied
from .testing import BackendFailure, Fault, FaultInjectingSession

__all__ = ["JOURNAL_FILE", "SESSION_FILE", "check_settings", "run_demo"]

SESSION_FILE: Final = "chat.db"
JOURNAL_FILE: Final = "agents-reconcile.db"

_ORDER_REQUEST: Final = "Please charge $20 for order 42."
_FOLLOW_UP: Final = "Did it go through?"
_ANSWER: Final = "Yes: order 42 was charged $20, once."
_CALL_ID: Final = "call_charge_42"
# The runner's saves of one turn with a tool: 1 = the user's input, 2 = the tool turn
# (the call and its output), 3 = the final answer. Every scene breaks save 2.
_TOOL_TURN_SAVE: Final = 2
_WIDTH: Final = 100
_LABEL: Final = 10


@dataclass
class _Scene:
    letter: str
    title: str
    fault: Fault
    injected: str
    expected: Outcome
    expected_action: Action


@dataclass
class _Result:
    """What one scene observed, gathered before any of it is printed."""

    first_error: BaseException | None = None
    second_answer: str | None = None
    denied: ContinuationDenied | None = None
    decision: Decision | None = None
    history: list[Any] = field(default_factory=list)
    history_before_retry: list[Any] = field(default_factory=list)
    model_input: list[Any] = field(default_factory=list)
    model_calls: int = 0
    model_calls_on_retry: int = 0
    charges: list[str] = field(default_factory=list)
    still_pending: int = 0


_SCENES: Final = (
    _Scene(
        "a",
        "The backend rejects the tool turn's write",
        Fault.REJECT,
        "the store rejected the save of its call and output",
        Outcome.UNCHANGED,
        Action.REPLAYED,
    ),
    _Scene(
        "b",
        "The write lands, but its acknowledgement is lost",
        Fault.LOST_ACK,
        "the store wrote its call and output, then the reply was lost",
        Outcome.COMMITTED,
        Action.SETTLED,
    ),
    _Scene(
        "c",
        "Another writer changes the history after the failure",
        Fault.CONCURRENT_WRITER,
        "another writer appended first, then the save was rejected",
        Outcome.AMBIGUOUS,
        Action.DENIED,
    ),
)


def check_settings(directory: Path | None) -> None:
    """Refuse, before anything is created, what the scenes would refuse once under way: the
    on/off variables and the signing keys of the environment, and the configuration the
    scenes build (with its journal in ``directory``, when it is known already)."""
    disabled = env_disabled()
    env_install()
    if not disabled:
        signer_for(())
    journal = None if directory is None else directory.expanduser() / JOURNAL_FILE
    ReconcileConfig(journal=journal)


async def run_demo(directory: Path, out: TextIO) -> int:
    """Run the three scenes with files in ``directory``; return 0 when every check holds.
    The settings are checked (``check_settings``) before the directory is created."""
    check_settings(directory)
    directory = _prepare(directory)
    set_tracing_disabled(True)
    run_token = uuid.uuid4().hex[:6]
    session_file = directory / SESSION_FILE
    journal_file = directory / JOURNAL_FILE
    say = _printer(out)
    say("agents-reconcile demo: a scripted agent whose charge_card tool has a real effect")
    if env_disabled():
        say(f"  note: {ENV_FLAG} switches reconciliation off, so the checks below will fail")
    say(f"  session store {session_file}")
    say(f"  journal       {journal_file}")
    passed = 0
    denied: list[tuple[str, str]] = []
    with _quiet_package_warnings():
        for scene in _SCENES:
            session_id = f"demo-{scene.letter}-{run_token}"
            result = await _play(scene, session_id, session_file, journal_file)
            say("")
            ok = _report(scene, session_id, result, say)
            passed += ok
            if result.denied is not None and result.decision is not None:
                denied.append((scene.letter, result.decision.intent_id))
    say("")
    say(f"{passed} of {len(_SCENES)} scenes behaved as described.")
    journal = ["--journal", str(journal_file)]
    if denied:
        scenes = " and ".join(letter for letter, _ in denied)
        say(f"Scene {scenes} left its session waiting for an operator, as a denied session")
        say("would in production: what is pending, then the evidence and the ways to resolve it:")
        say(f"  {shlex.join(['agents-reconcile', 'status', *journal])}")
        for _, intent_id in denied:
            say(f"  {shlex.join(['agents-reconcile', 'show', *journal, '--', intent_id])}")
    say("Every decision stays in the journal:")
    say(f"  {shlex.join(['agents-reconcile', 'decisions', *journal])}")
    return 0 if passed == len(_SCENES) else 1


def _prepare(directory: Path) -> Path:
    directory = directory.expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    return directory


async def _play(scene: _Scene, session_id: str, session_file: Path, journal_file: Path) -> _Result:
    result = _Result()
    store = SQLiteSession(session_id, session_file)
    faulty = FaultInjectingSession(store)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal_file))
    model = ScriptedModel(
        [
            [function_call("charge_card", {"amount": 20, "order": "42"}, call_id=_CALL_ID)],
            [assistant_message(_ANSWER)],
        ]
    )
    agent: Agent[Any] = Agent(
        name="cashier",
        instructions="Charge cards when asked.",
        model=model,
        tools=[_charge_card_tool(result.charges)],
    )
    try:
        faulty.plan(scene.fault, at=_TOOL_TURN_SAVE)
        try:
            await Runner.run(
                agent, _ORDER_REQUEST, session=session, run_config=session.run_config()
            )
        except Exception as exc:  # the wrapper re-raises the backend's own error
            result.first_error = exc
        result.history_before_retry = await store.get_items()
        calls_before_retry = len(model.calls)
        try:
            second = await Runner.run(
                agent, _FOLLOW_UP, session=session, run_config=session.run_config()
            )
            result.second_answer = str(second.final_output)
        except ContinuationDenied as denied:
            result.denied = denied
            result.decision = denied.decision
        if result.decision is None:
            trail = await session.decisions(limit=1)
            result.decision = trail[0] if trail else None
        result.model_calls = len(model.calls)
        result.model_calls_on_retry = result.model_calls - calls_before_retry
        last_call = model.last_call
        if result.model_calls_on_retry and last_call is not None:
            result.model_input = list(last_call.input) if isinstance(last_call.input, list) else []
        result.history = await store.get_items()
        result.still_pending = len(await session.pending())
    finally:
        store.close()
        await session.journal.close()
    return result


def _charge_card_tool(charges: list[str]) -> FunctionTool:
    @function_tool
    def charge_card(amount: int, order: str) -> str:
        """Charge the customer's card for an order."""
        # Stands in for the payment provider: every entry here is money that really moved.
        charges.append(order)
        return f"charged ${amount} for order {order} (receipt R-{len(charges)})"

    return charge_card


def _report(scene: _Scene, session_id: str, result: _Result, say: Callable[[str], None]) -> bool:
    say(f"[{scene.letter}] {scene.title}  (session {session_id})")
    error = result.first_error
    failure = f"{type(error).__name__}: {error}" if error is not None else "no error (unexpected)"
    _field(say, "run 1", f'"{_ORDER_REQUEST}" -> charge_card ran; {scene.injected}')
    _field(say, "", f"the runner raised {failure}")
    if result.denied is not None:
        _field(say, "run 2", f'"{_FOLLOW_UP}" -> ContinuationDenied, raised before the model')
    else:
        _field(say, "run 2", f'"{_FOLLOW_UP}" -> "{result.second_answer}"')
    decision = result.decision
    if decision is None:
        _field(say, "decision", "none recorded (unexpected)")
    else:
        _field(
            say,
            "decision",
            f"{decision.outcome.value} / {decision.reason.value} -> {decision.action.value}"
            f"  (intent {decision.intent_id[:8]})",
        )
        _field(say, "", decision.reason.explanation)
        _field(say, "", f"evidence: {decision.evidence_text()}")
    for number, item in enumerate(result.history, start=1):
        kind, text = _describe(item)
        _field(say, "history" if number == 1 else "", f"{number} {kind:<21} {text}")
    if not result.history:
        _field(say, "history", "(empty)")
    _field(
        say,
        "counts",
        f"model calls {result.model_calls} ({result.model_calls_on_retry} in run 2), "
        f"tool executions {len(result.charges)}",
    )
    ok, verdict = _verdict(scene, result)
    _field(say, "PASS" if ok else "FAIL", verdict)
    return ok


def _verdict(scene: _Scene, result: _Result) -> tuple[bool, str]:
    """Check the scene's claims; return whether they hold and a one-line account of them."""
    decision = result.decision
    decided = (
        decision is not None
        and decision.outcome is scene.expected
        and decision.action is scene.expected_action
        and isinstance(result.first_error, BackendFailure)
    )
    wrong = "" if decided else f"expected {scene.expected.value} -> {scene.expected_action.value}; "
    ran = len(result.charges)
    if scene.expected is Outcome.AMBIGUOUS:
        untouched = result.history == result.history_before_retry
        ok = (
            decided
            and decision is not None
            and decision.reason is Reason.HISTORY_CHANGED
            and result.denied is not None
            and result.model_calls_on_retry == 0
            and untouched
            and result.still_pending == 1
            and ran == 1
        )
        calls = result.model_calls_on_retry
        return ok, wrong + (
            f"{'denied' if result.denied else 'NOT denied'} with {calls} model "
            f"call{'' if calls == 1 else 's'} in run 2; history "
            f"{'unchanged' if untouched else 'CHANGED'} ({len(result.history)} items); "
            f"{result.still_pending} intent{'' if result.still_pending == 1 else 's'} left "
            "for an operator"
        )
    stored_calls = _copies(result.history, "function_call")
    stored_outputs = _copies(result.history, "function_call_output")
    seen_calls = _copies(result.model_input, "function_call")
    ok = (
        decided
        and ran == 1
        and stored_calls == 1
        and stored_outputs == 1
        and seen_calls == 1
        and result.still_pending == 0
    )
    return ok, wrong + (
        f"tool ran {_times(ran)}; history has {stored_calls} "
        f"cop{'y' if stored_calls == 1 else 'ies'} of the call and {stored_outputs} of its "
        f"output; the model saw {seen_calls}"
    )


def _copies(items: list[Any], kind: str) -> int:
    return sum(
        1
        for item in items
        if isinstance(item, dict) and item.get("type") == kind and item.get("call_id") == _CALL_ID
    )


def _times(count: int) -> str:
    return "1 time" if count == 1 else f"{count} times"


def _describe(item: Any) -> tuple[str, str]:
    """An item as (role or type, short text), for people."""
    if not isinstance(item, dict):
        return type(item).__name__, ""
    kind = item.get("type")
    if kind == "function_call":
        text = f"{item.get('name')}({item.get('arguments')})"
    elif kind == "function_call_output":
        text = _text_of(item.get("output"))
    elif kind in (None, "message"):
        kind = str(item.get("role", "message"))
        text = _text_of(item.get("content"))
    else:
        text = ""
    return str(kind), textwrap.shorten(text, width=60, placeholder="...")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return "" if content is None else str(content)


def _field(say: Callable[[str], None], label: str, text: str) -> None:
    lines = textwrap.wrap(
        text,
        width=_WIDTH,
        initial_indent=f"  {label:<{_LABEL}}",
        subsequent_indent=" " * (_LABEL + 2),
        break_on_hyphens=False,
    )
    for line in lines or [f"  {label}"]:
        say(line)


def _printer(out: TextIO) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(line, file=out)

    return say


@contextmanager
def _quiet_package_warnings() -> Iterator[None]:
    # The demo prints every decision itself; without a handler, Python's last-resort handler
    # would also write the package's warnings to stderr, in the middle of the account.
    log = logging.getLogger("agents_reconcile")
    if log.hasHandlers():
        yield
        return
    silent = logging.NullHandler()
    log.addHandler(silent)
    try:
        yield
    finally:
        log.removeHandler(silent)
