"""One host of the lease-stall test: a worker process that appends to a shared session when
told to, and can freeze itself (SIGSTOP) just before its batch reaches the store.

Run as ``python -m tests.support.stall_worker SPEC``, where SPEC is a JSON object naming the
host the process expects to run on (``{"host": "stall-a"}``; the test starts it in a UTS
namespace of its own with that host name). Importing the SDK takes seconds, so one process
serves many cases: it reads one JSON command a line on stdin and answers with JSON lines on
stdout. Each command names its own journal, store and session, and runs on a loop of its own.

Commands (``op``):

- ``stall``: append ``seed``, then the batch ``A0, A1``, and freeze before that batch
  reaches the store: at ``after_intent_recorded`` of the append itself (``path`` ``append``),
  or (``path`` ``replay``) after a first attempt the store rejects, at ``before_replay`` of
  the retried call, which claims the failed intent, finds the batch missing and replays it.
  Prints ``rejected`` when the first attempt failed (``replay``), ``stopping`` just before
  freezing, and ``done`` with how the append ended once woken.
- ``append``: append ``text`` alone and print ``done`` with how it ended.

A command that fails outside the call under test (opening, seeding, closing) prints
``broken``. The process leaves at the end of its input.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile import errors as reconcile_errors
from agents_reconcile._backends.registry import backend_named
from agents_reconcile._core.crashpoints import CrashPoint, arm, disarm
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._selftest.stores import close_store
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

SEED = "seed"
BATCH = ("A0", "A1")


def say(event: str, **fields: Any) -> None:
    """One JSON line to the test."""
    print(json.dumps({"event": event, **fields}), flush=True)


def item(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def open_journal(spec: dict[str, Any]) -> Any:
    journal = spec["journal"]
    return backend_named(journal["backend"]).open_journal(
        journal["address"], namespace=journal["namespace"]
    )


def open_store(spec: dict[str, Any]) -> Any:
    """The case's store: the SDK's own ``SQLiteSession`` on a file, or a revisioned store of
    a registered backend (``revisioned_<backend>``)."""
    store = spec["store"]
    if store["kind"] == "sqlite_session":
        return SQLiteSession(spec["session_id"], Path(store["address"]))
    backend = backend_named(store["kind"].removeprefix("revisioned_"))
    return backend.open_store(spec["session_id"], store["address"], namespace=store["namespace"])


def config(spec: dict[str, Any], journal: Any, **options: Any) -> ReconcileConfig:
    return ReconcileConfig(journal=journal, lease_seconds=spec["lease_seconds"], **options)


def ended(error: BaseException | None) -> dict[str, Any]:
    """How a call ended, in words the test compares."""
    if error is None:
        return {"outcome": "ok"}
    lease_lost = getattr(reconcile_errors, "LeaseLost", None)
    if isinstance(error, ContinuationDenied):
        return {
            "outcome": "denied",
            "reason": error.decision.reason.value,
            "message": str(error),
        }
    if lease_lost is not None and isinstance(error, lease_lost):
        return {"outcome": "lease_lost", "message": str(error)}
    return {
        "outcome": "error",
        "type": type(error).__name__,
        "message": str(error),
        "notes": getattr(error, "__notes__", []),
        "trace": "".join(traceback.format_exception(error)),
    }


def freeze(point: CrashPoint) -> None:
    """Stop this process where it stands, as a long pause (GC, a suspended VM) would."""
    say("stopping", point=point.value)
    os.kill(os.getpid(), signal.SIGSTOP)


async def stall(spec: dict[str, Any]) -> dict[str, Any]:
    journal = open_journal(spec)
    store = open_store(spec)
    # Through the injector on both paths: where the journal and the store share one Redis
    # server, the bare store's append records the intent and writes the batch in one script,
    # and there is no moment between the two to freeze in.
    faulty = FaultInjectingSession(store)
    # The default wait bound: a pause longer than it must not make A's own call give up.
    session = ReconcilingSession(faulty, config=config(spec, journal))
    batch = [item(text) for text in BATCH]
    try:
        await session.add_items([item(SEED)])
        await session.pending()  # the seed's intent is cleared before anything else starts
        if spec["path"] == "replay":
            faulty.plan(Fault.REJECT, at=1)
            try:
                await session.add_items(batch)
            except BackendFailure:
                say("rejected")
            else:
                raise AssertionError("the planned rejection did not fire")
            arm(CrashPoint.BEFORE_REPLAY, action=freeze)
        else:
            arm(CrashPoint.AFTER_INTENT_RECORDED, action=freeze)
        error: BaseException | None = None
        try:
            # A retry sends the same batch: once the failed intent is replayed, the history
            # ends with it and the retry is the same write, not another.
            await session.add_items(batch)
            await session.pending()  # its clearing is done before the test goes on
        except Exception as exc:
            error = exc
        return ended(error)
    finally:
        disarm()
        await close_store(store)
        await journal.close()


async def append(spec: dict[str, Any]) -> dict[str, Any]:
    journal = open_journal(spec)
    store = open_store(spec)
    wait = config(spec, journal, in_flight_wait=spec["in_flight_wait"])
    session = ReconcilingSession(store, config=wait)
    try:
        error: BaseException | None = None
        try:
            await session.add_items([item(spec["text"])])
            await session.pending()
        except Exception as exc:
            error = exc
        return ended(error)
    finally:
        await close_store(store)
        await journal.close()


COMMANDS = {"stall": stall, "append": append}


def main(spec: dict[str, Any]) -> None:
    if socket.gethostname() != spec["host"]:
        raise SystemExit(f"expected host {spec['host']!r}, runs on {socket.gethostname()!r}")
    say("ready", host=socket.gethostname(), pid=os.getpid(), owner=str(current_owner()))
    while line := sys.stdin.readline():
        command = json.loads(line)
        try:
            result = asyncio.run(COMMANDS[command["op"]](command))
        except Exception as exc:
            # The command failed outside the call under test (opening, seeding, closing).
            say("broken", **ended(exc))
        else:
            say("done", **result)
    # Each command closed what it opened; nothing is left to shut down.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
