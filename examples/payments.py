"""Payments: a card-charging tool is killed mid-run, and the recovery charges once.

Run it with::

    python examples/payments.py

A customer asks to be charged; the agent's ``charge_card`` tool needs approval, so the first
run stops at an approval checkpoint, saved as ``RunState.to_string()``. A worker process picks
the checkpoint up, approves it and resumes: the tool charges the card at the payment
processor (a local file here, which, like real processors, dedupes on an idempotency key), and
the worker is killed with SIGKILL right after the charge, before anything recorded its output.

The tool is an effect tool (``agents_reconcile.effect_tool``): before its body ran,
the effect's intent was durable in the journal under a key derived from the session, the call,
the tool and its arguments, and the body gave that key to the processor. The recovery resumes
the same checkpoint: the same call, the same key, an intent without a receipt. The tool's
``check(key)`` asks the processor, which holds a charge under the key: that answer becomes the
receipt, the body does not run again, and the run goes on. One charge; the receipts printed.

Offline (a scripted model); bounded (every wait has a timeout).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, RunState, SQLiteSession, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import (
    NOT_FOUND,
    ReconcileConfig,
    ReconcilingSession,
    current_effect,
    effect_tool,
)
from agents_reconcile.testing import CrashPoint, arm_crash_point, crash_point_reached

SESSION_ID = "order-42"
CHILD_TIMEOUT = 60.0


class Processor:
    """A card processor in a file: a charge per idempotency key, never two."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def charges(self) -> dict[str, int]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def charge(self, key: str, amount: int) -> str:
        charges = self.charges()
        if key not in charges:
            charges[key] = amount
            self.path.write_text(json.dumps(charges))
        return f"charged {amount} (ref {key[:12]})"

    async def find(self, key: str) -> Any:
        """The processor's answer to "is there a charge under this key?"."""
        amount = self.charges().get(key)
        return NOT_FOUND if amount is None else f"charged {amount} (ref {key[:12]})"


def agent(directory: Path, steps: list[Any]) -> Agent[Any]:
    processor = Processor(directory / "processor.json")

    @effect_tool(needs_approval=True, check=processor.find)
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        charged = processor.charge(current_effect().key, amount)
        # What a crash right after the charge looks like: the worker dies here.
        crash_point_reached(CrashPoint.BEFORE_RECEIPT)
        return charged

    return Agent(name="cashier", model=ScriptedModel(steps), tools=[charge_card])


def session(directory: Path) -> ReconcilingSession:
    return ReconcilingSession(
        SQLiteSession(SESSION_ID, directory / "chat.db"),
        config=ReconcileConfig(journal=directory / "journal.db"),
    )


async def resume(directory: Path, steps: list[Any]) -> Any:
    """Approve the saved checkpoint and run it to the end."""
    cashier = agent(directory, steps)
    state = await RunState.from_string(cashier, (directory / "checkpoint.json").read_text())
    for interruption in state.get_interruptions():
        state.approve(interruption)
    wrapped = session(directory)
    from agents import Runner

    return await Runner.run(cashier, state, session=wrapped, run_config=wrapped.run_config())


def worker(directory: Path) -> None:
    """The child: resume the approved checkpoint and be killed after the charge."""
    set_tracing_disabled(True)
    arm_crash_point(CrashPoint.BEFORE_RECEIPT)
    asyncio.run(resume(directory, [[assistant_message("Your card is charged.")]]))
    raise SystemExit("the worker was meant to be killed after the charge")


async def demo(directory: Path) -> int:
    from agents import Runner

    set_tracing_disabled(True)
    cashier = agent(
        directory,
        [[function_call("charge_card", {"amount": 42}, call_id="call_charge_42")]],
    )
    wrapped = session(directory)
    first = await Runner.run(
        cashier, "Please charge my card 42.", session=wrapped, run_config=wrapped.run_config()
    )
    print(f"1. The run stops for approval: {[i.name for i in first.interruptions]}")
    (directory / "checkpoint.json").write_text(first.to_state().to_string())

    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, __file__, "--worker", str(directory)],
        timeout=CHILD_TIMEOUT,
        capture_output=True,
        text=True,
    )
    processor = Processor(directory / "processor.json")
    print(
        f"2. A worker approves and resumes; it is killed after the charge "
        f"(exit {child.returncode}): the processor holds {len(processor.charges())} charge(s)"
    )
    journal: Any = session(directory).journal
    [effect] = await journal.effects.of_session(SESSION_ID)
    print(f"   the journal holds the effect's intent, no receipt: {effect.state.value}")

    result = await resume(directory, [[assistant_message("Your card is charged.")]])
    print(f"3. The recovery resumes the same checkpoint: {result.final_output!r}")
    charges = processor.charges()
    print(f"   the processor holds {len(charges)} charge(s): {charges}")
    for effect in await journal.effects.of_session(SESSION_ID):
        print(
            f"   receipt: key {effect.key[:12]}, tool {effect.tool}, call {effect.call_id}, "
            f"{effect.state.value}, attempts {effect.attempts}, output {effect.output!r}"
        )
    ok = child.returncode == -9 and len(charges) == 1 and effect.output is not None
    print("Charged once." if ok else "UNEXPECTED: see above.")
    return 0 if ok else 1


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]))
        return 1
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-payments-") as directory:
        return asyncio.run(demo(Path(directory)))


if __name__ == "__main__":
    sys.exit(main())
