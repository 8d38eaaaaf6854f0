"""Effect tools whose caller is cancelled (a client that disconnects), on the real runner and
every registered journal: a sync body running on in its thread keeps its key and leaves its
receipt, and a retry meanwhile never runs the body again; a body that ended without a receipt,
or never started, is recorded as such, so a retry elsewhere goes to ``check`` (or runs it)
instead of waiting forever on a live owner that runs nothing.

Run as ``python -m tests.effects.test_effect_cancellation SPEC`` it is worker B of the
cross-process test: it resumes an approval checkpoint on the shared journal and prints how it
ended.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunState, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.effect_records import EffectState, effect_key
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._effects import tool as effect_tools
from agents_reconcile._effects.tool import NOT_FOUND, current_effect, effect_tool
from agents_reconcile.errors import EffectUnknown

from ..support.backends import Place
from ..support.runner_support import run

KEY = effect_key("user-42", "c1", "charge_card", '{"amount":5}')
REPO = Path(__file__).resolve().parents[2]


class Ledger:
    """A processor that appends every charge (and every check) to a file: the count of
    bodies run, across processes."""

    def __init__(self, directory: Path) -> None:
        self.charges = directory / "charges.log"
        self.checks = directory / "checks.log"

    def charge(self, key: str, amount: int) -> str:
        with self.charges.open("a") as log:
            log.write(f"{key} {amount}\n")
        return f"charged {amount}"

    def charged(self) -> list[str]:
        return self.charges.read_text().split("\n")[:-1] if self.charges.exists() else []

    def asked(self) -> list[str]:
        return self.checks.read_text().split("\n")[:-1] if self.checks.exists() else []

    async def find(self, key: str) -> Any:
        found = any(line.split()[0] == key for line in self.charged())
        with self.checks.open("a") as log:
            log.write(f"{key} {found}\n")
        return "charged 5" if found else NOT_FOUND


def agent_with(body: Callable[..., Any], steps: list[Any], **options: Any) -> Agent[Any]:
    tool = effect_tool(needs_approval=True, name_override="charge_card", **options)(body)
    return Agent(name="a", model=ScriptedModel(steps), tools=[tool])


def first_steps() -> list[Any]:
    return [
        [function_call("charge_card", {"amount": 5}, call_id="c1")],
        [assistant_message("done")],
    ]


def session_on(journal: Any, directory: Path) -> ReconcilingSession:
    chat = SQLiteSession("user-42", directory / "chat.db")
    return ReconcilingSession(chat, config=ReconcileConfig(journal=journal))


async def checkpoint(journal: Any, directory: Path, body: Callable[..., Any]) -> str:
    """The approval checkpoint of one ``charge_card`` call (nothing ran yet)."""
    result = await run(
        agent_with(body, first_steps()), "pay", session_on(journal, directory), streamed=False
    )
    assert result.interruptions
    state_text: str = result.to_state().to_string()
    return state_text


def resumed(
    journal: Any, directory: Path, state_text: str, body: Callable[..., Any], **options: Any
) -> asyncio.Task[Any]:
    """The checkpoint approved and resumed, as a new request would: in a task and a context
    of its own, with a new wrapper."""

    async def go() -> Any:
        agent = agent_with(body, [[assistant_message("done")]], **options)
        state = await RunState.from_string(agent, state_text)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        return await run(agent, state, session_on(journal, directory), streamed=False)

    return asyncio.create_task(go(), context=contextvars.Context())


async def cancelled(task: asyncio.Task[Any], entered: asyncio.Event) -> None:
    """Cancel ``task`` once its body (or journal call) was entered, as a disconnect does."""
    await asyncio.wait_for(entered.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def effect_when(journal: Any, done: Callable[[Any], bool], seconds: float = 10) -> Any:
    """The effect's record once ``done`` says so (or as it is after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while True:
        effect = await journal.effects.get(KEY)
        if (effect is not None and done(effect)) or time.monotonic() > deadline:
            return effect
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("with_check", [True, False], ids=["check", "no_check"])
async def test_a_sync_body_cancelled_mid_run_keeps_its_key_and_its_receipt_answers_the_retry(
    journal: Any, tmp_path: Path, with_check: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client disconnects while a sync body runs in its thread: the thread runs on, the key
    stays held and the receipt is written when it returns. The immediate retry of the same
    approval never runs the body again (with ``check``: it waits, and gets the receipt;
    refused as running while the thread runs, then answered by the receipt)."""
    ledger = Ledger(tmp_path)
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()
    gate = threading.Event()

    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        loop.call_soon_threadsafe(entered.set)
        assert gate.wait(timeout=30)
        return ledger.charge(current_effect().key, amount)

    options: dict[str, Any] = {"check": ledger.find} if with_check else {}
    state_text = await checkpoint(journal, tmp_path, charge_card)
    first = resumed(journal, tmp_path, state_text, charge_card, **options)
    await cancelled(first, entered)
    try:
        if with_check:
            loop.call_later(0.3, gate.set)  # the charge goes through while the retry waits
        else:
            monkeypatch.setattr(effect_tools, "RUNNING_WAIT_SECONDS", 0.2, raising=False)
            with pytest.raises(EffectUnknown, match="running"):
                await resumed(journal, tmp_path, state_text, charge_card, **options)
            gate.set()
            await effect_when(journal, lambda e: e.state is EffectState.DONE)
        result = await resumed(journal, tmp_path, state_text, charge_card, **options)
    finally:
        gate.set()
    assert result.final_output == "done"
    assert ledger.charged() == [f"{KEY} 5"], "charged once, by the thread that ran on"
    assert ledger.asked() == [], "the receipt answered: nobody asked the processor"
    effect = await journal.effects.get(KEY)
    assert (effect.state, effect.output, effect.attempts) == (EffectState.DONE, "charged 5", 1)


async def test_a_cancellation_while_the_intent_is_written_leaves_the_retry_free_to_run(
    journal: Any, tmp_path: Path
) -> None:
    """The caller is cancelled while ``effects.begin`` waits for the journal, and the write
    lands anyway (as a server's does): no body ran, so the record says it never started, and
    the retry runs the body (without ``check``, not idempotent) instead of being refused
    ``effect_unknown`` until an operator acts."""
    ledger = Ledger(tmp_path)

    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        return ledger.charge(current_effect().key, amount)

    state_text = await checkpoint(journal, tmp_path, charge_card)
    entered, gate = asyncio.Event(), asyncio.Event()
    real_begin = journal.effects.begin

    async def slow_begin(effect: Any) -> Any:
        async def lands() -> Any:
            await gate.wait()
            return await real_begin(effect)

        entered.set()
        return await asyncio.shield(asyncio.ensure_future(lands()))

    journal.effects.begin = slow_begin
    first = resumed(journal, tmp_path, state_text, charge_card)
    await cancelled(first, entered)
    gate.set()
    result = await resumed(journal, tmp_path, state_text, charge_card)
    assert result.final_output == "done"
    assert ledger.charged() == [f"{KEY} 5"]
    effect = await journal.effects.get(KEY)
    assert (effect.state, effect.output) == (EffectState.DONE, "charged 5")


async def test_an_async_body_cancelled_on_a_live_idle_worker_is_checked_by_another(
    place: Place, tmp_path: Path
) -> None:
    """An async body is cancelled on worker A (this process, which stays alive and idle):
    the record says it ended without a receipt, so worker B (another process) asks ``check``
    and records its answer, instead of being refused as "running under a live owner" for as
    long as A lives. The body ran once."""
    if not place.backend.durable:
        pytest.skip(f"{place.backend.name}: each journal object holds its own data")
    ledger = Ledger(tmp_path)
    journal = place.journal()
    entered = asyncio.Event()

    async def charge_card(amount: int) -> str:
        """Charge the customer's card, then hang (the client disconnects meanwhile)."""
        ledger.charge(current_effect().key, amount)
        entered.set()
        await asyncio.Event().wait()
        return "unreachable"

    state_text = await checkpoint(journal, tmp_path, charge_card)
    first = resumed(journal, tmp_path, state_text, charge_card, check=ledger.find)
    await cancelled(first, entered)
    await effect_when(journal, lambda e: e.owner != str(current_owner()), seconds=5)
    (tmp_path / "state.json").write_text(state_text)
    spec = {
        "backend": place.backend.name,
        "address": place.address,
        "namespace": place.space,
        "directory": str(tmp_path),
    }
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.effects.test_effect_cancellation",
        json.dumps(spec),
        cwd=REPO,
        env=os.environ.copy(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(worker.communicate(), timeout=120)
    assert worker.returncode == 0, err.decode()[-3000:]
    stdout = out.decode()
    ended = json.loads(stdout.strip().splitlines()[-1])
    assert ended == {"outcome": "done", "output": "done"}, ended
    assert ledger.asked() == [f"{KEY} True"], "B asked the processor, which had the charge"
    assert ledger.charged() == [f"{KEY} 5"], "charged once"
    effect = await journal.effects.get(KEY)
    assert (effect.state, effect.output, effect.attempts) == (EffectState.DONE, "charged 5", 2)


async def _worker_b(spec: dict[str, Any]) -> dict[str, Any]:
    """Worker B: resume the approval checkpoint on the shared journal, with ``check``."""
    from agents_reconcile._backends.registry import backend_named

    directory = Path(spec["directory"])
    ledger = Ledger(directory)
    journal = backend_named(spec["backend"]).open_journal(
        spec["address"], namespace=spec["namespace"]
    )

    async def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        return ledger.charge(current_effect().key, amount)

    state_text = (directory / "state.json").read_text()
    try:
        result = await resumed(journal, directory, state_text, charge_card, check=ledger.find)
    except EffectUnknown as refused:
        return {"outcome": "refused", "problem": refused.decision.evidence.get("problem")}
    finally:
        await journal.close()
    return {"outcome": "done", "output": result.final_output}


if __name__ == "__main__":
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    print(json.dumps(asyncio.run(_worker_b(json.loads(sys.argv[1])))))
