"""Streaming, a failed save, and a resume from a saved ``RunState`` in a new process.

Run it with::

    python examples/streaming_resume.py

Part 1 streams a run (``Runner.run_streamed`` with a mapping ``context={}``) whose tool turn
(the ``charge_card`` call and its output) fails to save: the store rejects it. The exception
surfaces while iterating ``stream_events()``; the app catches it and saves
``result.to_state().to_string()``, which also carries a copy of the pending intent inside the
context. Part 2 plays a new process: a fresh session object on the same files, the state
rebuilt with ``RunState.from_string``, and ``Runner.run_streamed(agent, state, ...)``. Before
the model is called again the batch is found missing and replayed once: the card was charged
once, and the call and its output are stored once.

Part 3 shows a path the SDK itself refuses: when the save of the *final answer* fails, the
SDK marks the RunState unrecoverable and rejects every resume. The way on is a fresh run on
the same session; the wrapper settles the missing answer before that run reads the history.

Offline (a scripted model); the files live in a temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Runner,
    RunState,
    SQLiteSession,
    UserError,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import (
    Action,
    ContinuationDenied,
    Decision,
    Outcome,
    ReconcileConfig,
    ReconcilingSession,
)
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

# The runner's saves: 1 = the input, 2 = the tool turn, 3 = the final answer.
TOOL_TURN_SAVE = 2
FINAL_ANSWER_SAVE = 3

# Stands in for the payment provider, which outlives any process: one entry per real charge.
CHARGES: list[str] = []


def charge_card_tool() -> FunctionTool:
    @function_tool
    def charge_card(amount: int, order: str) -> str:
        """Charge the customer's card for an order."""
        CHARGES.append(order)
        return f"charged ${amount} for order {order}"

    return charge_card


def build_agent(*steps: list[Any]) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(list(steps))
    return Agent(name="cashier", model=model, tools=[charge_card_tool()]), model


def open_session(
    directory: Path, session_id: str, *, faulty: bool = False
) -> tuple[ReconcilingSession, Any]:
    """The wrapper, and the store under it (a fault injector over SQLite, or SQLite itself)."""
    store: Any = SQLiteSession(session_id, directory / "chat.db")
    if faulty:
        store = FaultInjectingSession(store)
    config = ReconcileConfig(journal=directory / "agents-reconcile.db")
    return ReconcilingSession(store, config=config), store


async def close(session: ReconcilingSession) -> None:
    """What ending the process would do: the next open starts from the files alone."""
    sqlite = session.inner.inner if isinstance(session.inner, FaultInjectingSession) else None
    (sqlite or session.inner).close()
    await session.journal.close()


async def drain(stream: Any, seen: list[str]) -> None:
    """Consume a streamed run, noting the run-item events (tool called, output, message)."""
    async for event in stream.stream_events():
        if event.type == "run_item_stream_event":
            seen.append(event.name)


def carried_intents(state_text: str) -> int:
    context = json.loads(state_text).get("context", {}).get("context") or {}
    return len(context.get("agents_reconcile", {}).get("pending", []))


def count(items: Any, kind: str, call_id: str) -> int:
    if not isinstance(items, list):
        return 0
    return sum(1 for item in items if item.get("type") == kind and item.get("call_id") == call_id)


def decision_text(decision: Decision) -> str:
    return f"{decision.outcome.value} / {decision.reason.value} -> {decision.action.value}"


async def tool_turn_case(directory: Path) -> list[str]:
    session_id, call_id = "order-42-streamed", "call_charge_42"
    print("Part 1: a streamed run whose tool-turn save is rejected")
    session, faulty = open_session(directory, session_id, faulty=True)
    faulty.plan(Fault.REJECT, at=TOOL_TURN_SAVE)
    agent, _ = build_agent(
        [function_call("charge_card", {"amount": 20, "order": "42"}, call_id=call_id)]
    )
    stream = Runner.run_streamed(
        agent,
        "Please charge $20 for order 42.",
        session=session,
        run_config=session.run_config(),
        context={},  # a mapping: the intent's copy travels inside the RunState
    )
    seen: list[str] = []
    try:
        await drain(stream, seen)
    except BackendFailure as exc:
        print(f"  stream_events() raised {type(exc).__name__}: {exc}")
    # The streamed result still yields a RunState after the exception.
    state_text = stream.to_state().to_string()
    print(f"  events before it: {', '.join(seen)}; cards charged: {CHARGES.count('42')}")
    print(
        f"  saved the RunState ({len(state_text)} characters); its context carries "
        f"{carried_intents(state_text)} pending intent"
    )
    await close(session)

    print("Part 2: a new process resumes the saved RunState, streamed")
    session, _ = open_session(directory, session_id)
    agent, model = build_agent([assistant_message("Order 42 is paid: $20, charged once.")])
    state = await RunState.from_string(agent, state_text)
    resumed = Runner.run_streamed(agent, state, session=session, run_config=session.run_config())
    await drain(resumed, [])
    decision = (await session.decisions(limit=1))[0]
    history = await session.get_items()
    left = await session.pending()
    await close(session)
    last_call = model.last_call
    seen_by_model = last_call.input if last_call is not None else []
    calls, outputs = (
        count(history, kind, call_id) for kind in ("function_call", "function_call_output")
    )
    # Without the wrapper, openai-agents 0.24 resumes this RunState but never saves the failed
    # turn again: the call and its output would be missing from the history for good.
    print(f"  decision: {decision_text(decision)}")
    print(f"  answer: {resumed.final_output}")
    print(
        f"  cards charged: {CHARGES.count('42')}; history: {len(history)} items with {calls} "
        f"call and {outputs} output; the model saw {count(seen_by_model, 'function_call', call_id)}"
        " call"
    )
    problems = []
    if (decision.outcome, decision.action) != (Outcome.UNCHANGED, Action.REPLAYED):
        problems.append(f"expected unchanged -> replayed, got {decision_text(decision)}")
    if CHARGES.count("42") != 1:
        problems.append(f"order 42 was charged {CHARGES.count('42')} times")
    if (calls, outputs) != (1, 1):
        problems.append("the history does not hold the call and its output exactly once")
    if count(seen_by_model, "function_call", call_id) != 1:
        problems.append("the model did not see the call exactly once")
    carried = resumed.context_wrapper.context.get("agents_reconcile", {})
    if carried.get("pending"):
        problems.append("the settled intent is still carried in the run context")
    if left:
        problems.append(f"{len(left)} intent(s) still pending")
    return problems


async def final_answer_case(directory: Path) -> list[str]:
    session_id, call_id = "order-43-streamed", "call_charge_43"
    print("Part 3: the final answer's save is rejected; the SDK refuses to resume that")
    session, faulty = open_session(directory, session_id, faulty=True)
    faulty.plan(Fault.REJECT, at=FINAL_ANSWER_SAVE)
    agent, _ = build_agent(
        [function_call("charge_card", {"amount": 15, "order": "43"}, call_id=call_id)],
        [assistant_message("Charged $15 for order 43.")],
    )
    stream = Runner.run_streamed(
        agent,
        "Please charge $15 for order 43.",
        session=session,
        run_config=session.run_config(),
        context={},
    )
    try:
        await drain(stream, [])
    except BackendFailure as exc:
        print(f"  stream_events() raised {type(exc).__name__}: {exc}")
    state_text = stream.to_state().to_string()
    await close(session)

    session, _ = open_session(directory, session_id)
    agent, _ = build_agent([assistant_message("Yes, order 43 was charged once.")])
    state = await RunState.from_string(agent, state_text)
    refused = False
    try:
        resumed = Runner.run_streamed(
            agent, state, session=session, run_config=session.run_config()
        )
        await drain(resumed, [])
    except ContinuationDenied:
        raise  # ours is a UserError too; only the SDK's own refusal is expected here
    except UserError as exc:
        # The SDK's own refusal, raised while streaming and before any session call: the
        # pending intent is untouched, and settles on the next use of the session.
        refused = True
        print(f"  the SDK refused the resume: {exc}")
    # What works instead: a fresh run on the same session. Its first history read settles the
    # missing answer (replayed once) before the new input is stored or the model is called.
    follow_up = Runner.run_streamed(
        agent, "Did it go through?", session=session, run_config=session.run_config()
    )
    await drain(follow_up, [])
    decision = (await session.decisions(limit=1))[0]
    history = await session.get_items()
    await close(session)
    answers = [item for item in history if item.get("role") == "assistant"]
    print(f"  a fresh run on the same session instead: {decision_text(decision)}")
    print(f"  answer: {follow_up.final_output}")
    print(
        f"  cards charged: {CHARGES.count('43')}; history: {len(history)} items with "
        f"{len(answers)} assistant answers (the replayed one and the new one)"
    )
    problems = []
    if not refused:
        problems.append("the SDK resumed a RunState it used to refuse; revisit this example")
    if (decision.outcome, decision.action) != (Outcome.UNCHANGED, Action.REPLAYED):
        problems.append(f"expected unchanged -> replayed, got {decision_text(decision)}")
    if len(answers) != 2 or CHARGES.count("43") != 1:
        problems.append(
            f"expected 2 answers and 1 charge, got {len(answers)} and {CHARGES.count('43')}"
        )
    return problems


async def main() -> int:
    set_tracing_disabled(True)
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-streaming-") as tmp:
        directory = Path(tmp)
        problems = await tool_turn_case(directory)
        print()
        problems += await final_answer_case(directory)
    for problem in problems:
        print(f"CHECK FAILED: {problem}")
    print("\nAll checks passed." if not problems else "\nSome checks FAILED.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
