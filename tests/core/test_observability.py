"""The decision trail in the SDK's own tracing and in logging records, and never a payload:
a secret string put in the items appears in no span, no log record, no decision and no CLI
output, on the replayed, committed and denied paths alike."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession, set_tracing_disabled
from agents.testing import assistant_message
from agents.tracing import set_trace_processors
from agents.tracing.processor_interface import TracingProcessor

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._cli import main
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import BACKENDS
from ..support.runner_support import World, first_run_steps, run

SECRET = "SECRET-7f3a-do-not-print"
SQLITE_STORE = next(store for store in BACKENDS if store.name == "sqlite")


class Collector(TracingProcessor):
    """Keeps every span and trace it is given."""

    def __init__(self) -> None:
        self.spans: list[Any] = []

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        self.spans.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass

    def ours(self) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for span in self.spans:
            exported = span.export() or {}
            data = exported.get("span_data", {})
            if str(data.get("name", "")).startswith("agents_reconcile."):
                found.append((data["name"], data.get("data", {})))
        return found

    def dumped(self) -> bytes:
        return orjson.dumps([span.export() for span in self.spans], default=str)


@pytest.fixture
def collector() -> Iterator[Collector]:
    from agents.tracing.processors import default_processor

    found = Collector()
    set_trace_processors([found])
    set_tracing_disabled(False)
    yield found
    set_tracing_disabled(True)
    set_trace_processors([default_processor()])


@pytest.fixture
async def world(tmp_path: Path) -> Any:
    found = World(SQLITE_STORE, tmp_path)
    yield found
    await found.close()


async def fail_tool_turn(world: World, fault: Fault, **config: Any) -> ReconcilingSession:
    session = await world.start(**config)
    assert world.faulty is not None
    world.faulty.plan(fault, at=2)
    agent, _ = world.agent(first_run_steps())
    with pytest.raises(BackendFailure):
        await run(agent, f"my card is {SECRET}", session, streamed=False)
    return await world.restart()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_replay_is_traced_in_the_runs_own_trace(
    world: World, collector: Collector, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    session = await fail_tool_turn(world, Fault.REJECT)
    caplog.set_level(logging.DEBUG, logger="agents_reconcile")
    agent, _ = world.agent([[assistant_message(f"done, {SECRET}")]])
    await run(agent, "next", session, streamed=streamed)
    names = [name for name, _ in collector.ours()]
    assert names[:3] == [
        "agents_reconcile.judge",
        "agents_reconcile.decision",
        "agents_reconcile.reconcile",
    ], names
    decision = next(data for name, data in collector.ours() if name.endswith("decision"))
    assert (decision["outcome"], decision["action"]) == ("unchanged", "replayed")
    assert len(decision["evidence"]["batch"]) == 2, "digests of the batch, not its items"
    # Runner.run prepares the run (reads the history, settling it) before its trace opens:
    # those spans come in the run's trace when the gate runs, marked as deferred.
    assert decision.get("deferred", False) is not streamed
    judged = next(data for name, data in collector.ours() if name.endswith("judge"))
    assert judged["reason"] == "batch_absent"
    records = [r for r in caplog.records if hasattr(r, "agents_reconcile")]
    assert {r.agents_reconcile["step"] for r in records} >= {"judge", "decision", "reconcile"}  # type: ignore[attr-defined]
    assert SECRET not in collector.dumped().decode()
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    assert all(SECRET not in repr(getattr(r, "agents_reconcile", "")) for r in caplog.records)


async def test_a_secret_reaches_no_span_log_decision_or_cli_output(
    world: World,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Replayed, committed, denied, resolved: the secret is in the stored history (it is the
    user's conversation) and nowhere else this package writes or prints."""
    caplog.set_level(logging.DEBUG, logger="agents_reconcile")
    for fault in (Fault.REJECT, Fault.LOST_ACK, Fault.CONCURRENT_WRITER):
        world.session_id = f"user-{fault.value}"
        session = await fail_tool_turn(world, fault)
        agent, _ = world.agent([[assistant_message(f"ok {SECRET}")]])
        try:
            await run(agent, f"again {SECRET}", session, streamed=False)
        except ContinuationDenied as denied:
            assert SECRET not in str(denied)
            await session.resolve(denied.intent_id, "abandon", reason="checked the ledger")
    assert SECRET in str(
        await SQLiteSession(world.session_id, world.directory / "chat.db").get_items()
    )
    journal = str(world.directory / "journal.db")
    outputs = []
    for argv in (
        ["status", "--journal", journal, "--json"],
        ["status", "--journal", journal],
        ["trail", "user-reject", "--journal", journal, "--json"],
        ["trail", "user-concurrent_writer", "--journal", journal],
        ["decisions", "--journal", journal, "--json"],
        ["decisions", "--journal", journal],
    ):
        await asyncio.to_thread(main, argv)
        outputs.append(capsys.readouterr())
    assert outputs and all(SECRET not in out.out + out.err for out in outputs)
    decisions = await world.session.decisions() if world.session else []
    assert decisions and all(SECRET not in d.encode().decode() for d in decisions)
    assert len(collector.ours()) >= 6
    assert SECRET not in collector.dumped().decode()
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert SECRET not in repr(getattr(record, "agents_reconcile", ""))
    assert any(r.levelno == logging.WARNING for r in caplog.records), "a denial warns"


def test_no_span_outside_a_trace(tmp_path: Path) -> None:
    """A read from an application's own code, with no run around it, makes no span (and no
    'no active trace' complaint from the SDK): only the logging record."""
    collector = Collector()
    set_trace_processors([collector])
    set_tracing_disabled(False)
    try:

        async def go() -> None:
            faulty = FaultInjectingSession(SQLiteSession("s", tmp_path / "chat.db"))
            session = ReconcilingSession(
                faulty, config=ReconcileConfig(journal=tmp_path / "journal.db")
            )
            faulty.plan(Fault.REJECT)
            with pytest.raises(BackendFailure):
                await session.add_items([{"role": "user", "content": SECRET}])
            await session.reconcile()

        asyncio.run(go())
    finally:
        from agents.tracing.processors import default_processor

        set_tracing_disabled(True)
        set_trace_processors([default_processor()])
    assert collector.ours() == []
