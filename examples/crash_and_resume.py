"""Crash and resume: a worker is SIGKILLed while its session appends are in flight.

Run it with::

    python examples/crash_and_resume.py

The script starts a copy of itself as a child process: a worker serving two conversations at
once. In each, an agent's ``charge_card`` tool charges a card, and then the save of the tool
turn (the call and its output) stalls:

- ``landed``: the store writes the batch, and the append never returns;
- ``lost``: the append never returns, and nothing is written.

When both appends are in flight the worker prints a marker line per conversation, and the
parent kills it with SIGKILL: no exception handler, no ``finally``, no chance to record
anything. The parent then opens the same SQLite session file and journal, as a restarted
worker would, and carries each conversation on. The wrapper stored each intent in the
journal before its append started (write-ahead), so it survived the kill; its owner is
gone, so the intent is settled: ``landed`` is COMMITTED (never replayed), ``lost`` is
UNCHANGED (replayed once). Either way the card was charged once and the history holds the
tool call once.

Offline (a scripted model) and bounded: every wait has a timeout.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from agents import Agent, FunctionTool, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ReconcileConfig, ReconcilingSession

MARKER = "APPEND-IN-FLIGHT"
CASES = ("landed", "lost")
MARKER_TIMEOUT = 20.0
CHILD_STALL_LIMIT = 30.0
TOOL_TURN_SAVE = 2  # the runner saves the input first, then the tool turn
CALL_ID = "call_charge_42"


def session_id_for(case: str) -> str:
    return f"order-42-{case}"


# -- shared by both processes -------------------------------------------------------------------


def paths(directory: Path) -> tuple[Path, Path, Path]:
    return directory / "chat.db", directory / "agents-reconcile.db", directory / "charges.log"


def open_session(directory: Path, session_id: str, inner: Any = None) -> ReconcilingSession:
    chat, journal, _ = paths(directory)
    store = inner if inner is not None else SQLiteSession(session_id, chat)
    return ReconcilingSession(store, config=ReconcileConfig(journal=journal))


def charge_card_tool(ledger: Path, session_id: str) -> FunctionTool:
    @function_tool
    def charge_card(amount: int, order: str) -> str:
        """Charge the customer's card for an order."""
        # A file the kill cannot take back: it plays the payment provider's records.
        with ledger.open("a", encoding="utf-8") as handle:
            handle.write(f"{session_id} order={order} amount={amount}\n")
        return f"charged ${amount} for order {order}"

    return charge_card


# -- the child: runs until its appends stall, then waits to be killed ----------------------------


class StallingSession:
    """Forwards to ``inner``; its ``stall_at``-th ``add_items`` never returns.

    In the ``landed`` case the batch is written before the stall (the write landed, the reply
    never came); in the ``lost`` case nothing is written. The marker tells the parent it may
    kill.
    """

    def __init__(self, inner: SQLiteSession, *, case: str, stall_at: int) -> None:
        # Named ``inner`` so the journal binds intents to the SQLite store underneath, which
        # is what the parent opens without this wrapper.
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings = inner.session_settings
        self._case = case
        self._stall_at = stall_at
        self._calls = 0

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await self.inner.get_items(limit)

    async def add_items(self, items: list[Any]) -> None:
        self._calls += 1
        if self._calls != self._stall_at:
            await self.inner.add_items(items)
            return
        if self._case == "landed":
            await self.inner.add_items(items)
        print(f"{MARKER} {self._case}", flush=True)
        await asyncio.sleep(CHILD_STALL_LIMIT)
        raise TimeoutError("the parent never killed this process")

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


async def serve(case: str, directory: Path) -> None:
    chat, _, ledger = paths(directory)
    session_id = session_id_for(case)
    store = StallingSession(SQLiteSession(session_id, chat), case=case, stall_at=TOOL_TURN_SAVE)
    session = open_session(directory, session_id, inner=store)
    model = ScriptedModel(
        [[function_call("charge_card", {"amount": 20, "order": "42"}, call_id=CALL_ID)]]
    )
    agent = Agent(name="cashier", model=model, tools=[charge_card_tool(ledger, session_id)])
    await Runner.run(
        agent, "Please charge $20 for order 42.", session=session, run_config=session.run_config()
    )


async def child(directory: Path) -> int:
    set_tracing_disabled(True)
    print(f"worker pid {os.getpid()}: serving {len(CASES)} conversations", flush=True)
    await asyncio.gather(*(serve(case, directory) for case in CASES))
    return 3  # reached only if the stalls ended without a kill


# -- the parent: starts the worker, kills it mid-append, resumes -------------------------------


def line_reader(stream: IO[str]) -> queue.Queue[str | None]:
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def kill_when_in_flight(directory: Path) -> bool:
    """Start the worker, echo its lines until every case is in flight, then SIGKILL that pid."""
    worker = subprocess.Popen(
        [sys.executable, __file__, "--child", str(directory)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        lines = line_reader(worker.stdout)
        in_flight: set[str] = set()
        deadline = time.monotonic() + MARKER_TIMEOUT
        while in_flight != set(CASES):
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                print(f"no markers within {MARKER_TIMEOUT:.0f}s; giving up")
                return False
            if line is None:
                print(f"the worker exited early (status {worker.wait(timeout=5)})")
                return False
            print(f"  worker says: {line}")
            if line.startswith(MARKER):
                in_flight.add(line.split()[-1])
        os.kill(worker.pid, signal.SIGKILL)
        # Reaping matters: a killed but unreaped child keeps its /proc entry and would still
        # look like a live owner of its intents.
        status = worker.wait(timeout=5)
        print(f"  parent: SIGKILL sent to pid {worker.pid} (exit status {status})")
        return True
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=5)


async def resume(case: str, directory: Path) -> bool:
    _, _, ledger = paths(directory)
    session_id = session_id_for(case)
    session = open_session(directory, session_id)
    try:
        pending = await session.pending()
        for intent in pending:
            entry = await session.journal.get(intent.intent_id)
            state = entry.state.value if entry is not None else "?"
            owner = f"pid {entry.owner.pid} (killed)" if entry is not None else "?"
            print(
                f"  pending intent {intent.intent_id[:8]}: {len(intent.batch)} items, "
                f"state {state}, owner {owner}"
            )
        model = ScriptedModel([[assistant_message("Yes: order 42 was charged $20, once.")]])
        agent = Agent(name="cashier", model=model, tools=[charge_card_tool(ledger, session_id)])
        result = await Runner.run(
            agent, "Did it go through?", session=session, run_config=session.run_config()
        )
        trail = await session.decisions(limit=1)
        history = await session.get_items()
        left = await session.pending()
    finally:
        session.inner.close()
        await session.journal.close()
    if trail:
        decision = trail[0]
        print(
            f"  decision: {decision.outcome.value} / {decision.reason.value} -> "
            f"{decision.action.value}"
        )
        print(f"    {decision.reason.explanation}")
    print(f"  answer: {result.final_output}")
    print("  history:")
    for number, item in enumerate(history, start=1):
        print(f"    {number} {describe(item)}")

    expected = {"landed": ("committed", "settled"), "lost": ("unchanged", "replayed")}[case]
    charges = [line for line in ledger.read_text().splitlines() if line.startswith(session_id)]
    calls = sum(1 for item in history if item.get("type") == "function_call")
    outputs = sum(1 for item in history if item.get("type") == "function_call_output")
    got = (trail[0].outcome.value, trail[0].action.value) if trail else None
    problems = [
        text
        for failed, text in (
            (len(pending) != 1, f"expected 1 pending intent after the kill, found {len(pending)}"),
            (got != expected, f"expected decision {expected}, got {got}"),
            (len(charges) != 1, f"the card was charged {len(charges)} times"),
            ((calls, outputs) != (1, 1), f"history holds {calls} calls and {outputs} outputs"),
            (bool(left), f"{len(left)} intents still pending"),
        )
        if failed
    ]
    for problem in problems:
        print(f"  CHECK FAILED: {problem}")
    if not problems:
        print("  OK: charged once; the call and its output are stored once")
    return not problems


def describe(item: Any) -> str:
    kind = item.get("type") or item.get("role")
    if kind == "function_call":
        return f"function_call         {item['name']}({item['arguments']})"
    if kind == "function_call_output":
        return f"function_call_output  {item['output']}"
    content = item.get("content")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return f"{item.get('role', kind):<21} {content}"


async def parent() -> int:
    set_tracing_disabled(True)
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-crash-") as tmp:
        directory = Path(tmp)
        print(f"session file and journal in {directory}")
        if not kill_when_in_flight(directory):
            print("\nSome checks FAILED.")
            return 1
        ok = True
        for case in CASES:
            landed = "the write had landed" if case == "landed" else "nothing had been written"
            print(f"\nconversation {session_id_for(case)} ({landed}), resumed by the parent:")
            ok = await resume(case, directory) and ok
    print("\nAll checks passed." if ok else "\nSome checks FAILED.")
    return 0 if ok else 1


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return asyncio.run(child(Path(sys.argv[2])))
    return asyncio.run(parent())


if __name__ == "__main__":
    sys.exit(main())
