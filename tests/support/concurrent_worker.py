"""One process of the concurrency test: many wrappers appending to one session at once.

Run as ``python -m tests.support.concurrent_worker SPEC`` where SPEC is a JSON object (see
``main``).
Each wrapper appends its own numbered items, some of them through injected faults, and the
process prints one JSON line per append: its text, how it ended, and how long it took.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.registry import backend_named
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession


def open_journal(spec: dict[str, Any]) -> Any:
    """The journal the spec names, through the backend registry."""
    backend = backend_named(spec["backend"])
    return backend.open_journal(spec["address"], namespace=spec["namespace"])


def open_store(spec: dict[str, Any]) -> Any:
    directory = Path(spec["directory"])
    if spec["store"] == "revisioned_sqlite":
        return RevisionedSQLiteSession("shared", directory / "revisioned.db")
    return SQLiteSession("shared", directory / "chat.db")


async def append_all(spec: dict[str, Any], config: ReconcileConfig, wrapper: int) -> list[Any]:
    """One wrapper's appends, with faults planned at random (seeded) calls."""
    chooser = random.Random(f"{spec['seed']}-{spec['process']}-{wrapper}")
    faulty = FaultInjectingSession(open_store(spec))
    for call in range(1, spec["appends"] * 2 + 1):
        if chooser.random() < spec["fault_rate"]:
            faulty.plan(chooser.choice([Fault.REJECT, Fault.LOST_ACK]), at=call)
    session = ReconcilingSession(faulty, config=config)
    ended = []
    for number in range(spec["appends"]):
        text = f"p{spec['process']}-w{wrapper}-{number}"
        started = time.monotonic()
        try:
            await session.add_items([{"role": "user", "content": text}])
            outcome, reason = "ok", ""
        except BackendFailure as failure:
            # Settling an earlier write may fail before this batch ever started.
            unstarted = any("did not start" in note for note in getattr(failure, "__notes__", []))
            outcome, reason = ("unstarted", "") if unstarted else ("fault", "")
        except ContinuationDenied as denied:
            outcome, reason = "denied", denied.decision.reason.value
        ended.append(
            {
                "text": text,
                "outcome": outcome,
                "reason": reason,
                "seconds": time.monotonic() - started,
            }
        )
    return ended


async def main(spec: dict[str, Any]) -> None:
    journal = open_journal(spec)
    config = ReconcileConfig(
        journal=journal, in_flight_wait=spec["in_flight_wait"], on_extended="append"
    )
    # Start together: say ready, then wait (bounded) for the test to say go.
    directory = Path(spec["directory"])
    (directory / f"ready-{spec['process']}").touch()
    deadline = time.monotonic() + 60
    while not (directory / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        await asyncio.sleep(0.005)
    results = await asyncio.gather(
        *(append_all(spec, config, wrapper) for wrapper in range(spec["wrappers"]))
    )
    for ended in results:
        for line in ended:
            print(json.dumps(line))
    await journal.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
