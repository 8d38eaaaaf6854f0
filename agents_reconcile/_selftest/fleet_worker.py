"""The processes of the fleet self-test: a fork server, its workers, and the final pass.

Run as ``python -m agents_reconcile._selftest.fleet_worker``. The server imports the SDK and the
drivers once, then reads one JSON command per line on stdin and answers one JSON line each:

- ``{"spawn": SPEC}`` forks a child on a host of its own (a UTS namespace whose host name is
  ``SPEC["host"]``, when the kernel allows it) that runs ``SPEC["role"]``; answers its pid;
- ``{"wait": SECONDS}`` waits for every child, kills what is left with SIGKILL when the time is
  up, and answers how each ended.

A worker appends unique numbered items to sessions chosen at random, through one
``ReconcilingSession`` per session, and writes one JSON line per event to its log (flushed per
line, so a SIGKILL loses nothing written): ``intent`` when an intent id is minted for an item,
``start`` and ``end`` around each append (``end`` holds the outcome), ``paused`` when it stops
itself inside an append. On SIGUSR1 it stops itself (SIGSTOP) at the next append, just after the
intent is durable and before the store is written. On SIGTERM it ends after the append under
way.

The final pass (role ``reconcile``) settles what is pending on every session with a fresh
process on a fresh host and logs each decision or denial.

The settlement throughput phase has two roles. ``prepare`` leaves one failed intent on each of
its sessions: an append through ``FaultInjectingSession`` whose first write is rejected before
anything is written, so the journal holds the intent as failed and the store holds nothing.
``settle`` says it is ready (a file), waits for the driver's go (another file), then calls
``reconcile()`` on every session in an order of its own, again on those where it was denied,
until none is left or its time is up; it logs each call's decisions or denial.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import random
import select
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any, Final

__all__ = ["main", "open_journal", "open_store", "settle_item"]

_CLONE_NEWUTS: Final = 0x04000000
APPEND_TIMEOUT: Final = 30.0
"""Seconds one append may take before the worker gives up on it (every loop is bounded)."""


def _new_host(name: str) -> bool:
    """Move this process into a UTS namespace of its own named ``name``; False when the kernel
    refuses (no privilege): the process then keeps the machine's host name."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWUTS) != 0:
        return False
    socket.sethostname(name)
    return True


def open_journal(spec: dict[str, Any]) -> Any:
    """The journal a spec names (``journal``: backend name, address, namespace)."""
    from .._backends.registry import backend_named

    backend, address, namespace = spec["journal"]
    # The self-test's names are identifiers: ``redis_cluster`` is the backend ``redis-cluster``.
    return backend_named(backend.replace("_", "-")).open_journal(address, namespace=namespace)


def worker_config(spec: dict[str, Any], journal: str) -> Any:
    """What every worker runs with: the cell's journal and lease. On a revisioned store,
    ``on_extended="append"``: workers of a fleet share sessions, so another worker's writes
    after a failed one are expected, and the failed batch goes after them (as a fleet would
    configure it; the default denies)."""
    from .. import ReconcileConfig

    revisioned = spec["store"][0] != "sqlite"
    return ReconcileConfig(
        journal=journal,
        lease_seconds=spec["lease"],
        in_flight_wait=spec["in_flight_wait"],
        on_extended="append" if revisioned else "fail",
    )


def open_store(spec: dict[str, Any], session_id: str) -> Any:
    """The store a spec names (``store``: kind, address, namespace) for one session."""
    from agents import SQLiteSession

    from .._backends.registry import backend_named

    kind, address, namespace = spec["store"]
    if kind == "sqlite":
        return SQLiteSession(session_id, address)
    backend = backend_named(kind.removeprefix("revisioned_").replace("_", "-"))
    return backend.open_store(session_id, address, namespace=namespace)


class _Log:
    """One JSON line per event, flushed at once."""

    def __init__(self, path: str) -> None:
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, **event: Any) -> None:
        event["t"] = time.time()
        self._file.write(json.dumps(event) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _watch_intents(log: _Log) -> None:
    """Log the intent id minted for each item (the id the journal's decisions name)."""
    from .._session.writer import Writer

    minted = Writer.new_intent

    def logged(self: Writer, *args: Any, **kwargs: Any) -> Any:
        intent = minted(self, *args, **kwargs)
        for item in intent.batch:
            if isinstance(item, dict):
                log.write(event="intent", item=item.get("content"), intent=intent.intent_id)
        return intent

    Writer.new_intent = logged  # type: ignore[method-assign]


def _pause_on_request(log: _Log, current: dict[str, Any]) -> None:
    """On SIGUSR1, stop this process at the next append once its intent is durable."""
    from .._core.crashpoints import CrashPoint, arm

    def stop_here(_: CrashPoint) -> None:
        log.write(event="paused", item=current.get("item"), session=current.get("session"))
        os.kill(os.getpid(), signal.SIGSTOP)

    def requested() -> None:
        arm(CrashPoint.AFTER_INTENT_RECORDED, action=stop_here)

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, requested)


def _failure(exc: BaseException) -> dict[str, Any]:
    from ..errors import ContinuationDenied, ReconcileError

    if isinstance(exc, ContinuationDenied):
        return {"outcome": "denied", "reason": exc.decision.reason.value}
    reason = getattr(getattr(getattr(exc, "decision", None), "reason", None), "value", "")
    failure = {"outcome": "error", "error": type(exc).__name__, "reason": reason}
    if not isinstance(exc, ReconcileError):
        # Not the package's own: where it was raised, so a report can name the place.
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        failure["where"] = " <- ".join(
            f"{Path(frame.filename).name}:{frame.lineno} {frame.name}" for frame in reversed(frames)
        )
        failure["message"] = str(exc)[:200]
    return failure


async def _work(spec: dict[str, Any]) -> None:
    from .. import ReconcilingSession

    log = _Log(spec["log"])
    current: dict[str, Any] = {}
    _watch_intents(log)
    _pause_on_request(log, current)
    journal = open_journal(spec)
    config = worker_config(spec, journal)
    stores = {sid: open_store(spec, sid) for sid in spec["sessions"]}
    wrappers = {sid: ReconcilingSession(store, config=config) for sid, store in stores.items()}
    chooser = random.Random(spec["seed"])
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    log.write(event="ready", host=socket.gethostname(), pid=os.getpid())
    for number in range(spec["max_appends"]):
        if stop.is_set():
            break
        sid = chooser.choice(spec["sessions"])
        text = f"{spec['name']}-{sid}-{number}"
        current.update(item=text, session=sid)
        log.write(event="start", item=text, session=sid)
        ended: dict[str, Any] = {"outcome": "ok"}
        try:
            async with asyncio.timeout(APPEND_TIMEOUT):
                await wrappers[sid].add_items([{"role": "user", "content": text}])
        except Exception as exc:
            ended = _failure(exc)
        log.write(event="end", item=text, session=sid, **ended)
        if spec["think"]:
            await asyncio.sleep(chooser.uniform(0, spec["think"]))
    for store in stores.values():
        with contextlib.suppress(Exception):
            await _close(store)
    with contextlib.suppress(Exception):
        await journal.close()
    log.close()


async def _reconcile(spec: dict[str, Any]) -> None:
    """Settle what is pending on every session; log each decision, or the denial."""
    from .. import ReconcilingSession

    log = _Log(spec["log"])
    journal = open_journal(spec)
    config = worker_config(spec, journal)
    for sid in spec["sessions"]:
        store = open_store(spec, sid)
        wrapper = ReconcilingSession(store, config=config)
        # A denial leaves its intent pending; the next intent behind it is not reached, so a
        # few attempts are made (bounded) and every outcome is logged.
        for _ in range(spec["final_attempts"]):
            try:
                decisions = await wrapper.reconcile()
            except Exception as exc:
                log.write(event="final", session=sid, **_failure(exc))
                continue
            for decision in decisions:
                log.write(
                    event="final",
                    session=sid,
                    outcome="decided",
                    intent=decision.intent_id,
                    action=decision.action.value,
                    reason=decision.reason.value,
                )
            if not await wrapper.pending():
                break
        with contextlib.suppress(Exception):
            await _close(store)
    with contextlib.suppress(Exception):
        await journal.close()
    log.close()


def settle_item(session_id: str) -> dict[str, Any]:
    """The one item the settlement phase's failed append holds for ``session_id``."""
    return {"role": "user", "content": f"settle-{session_id}"}


_PREPARED_AT_ONCE: Final = 16


async def _prepare(spec: dict[str, Any]) -> None:
    """Leave one failed intent on each session: its only write rejected before writing."""
    from .. import ReconcilingSession
    from ..testing import BackendFailure, Fault, FaultInjectingSession

    log = _Log(spec["log"])
    journal = open_journal(spec)
    config = worker_config(spec, journal)

    async def one(sid: str) -> None:
        store = open_store(spec, sid)
        faulty = FaultInjectingSession(store)
        faulty.plan(Fault.REJECT, at=1)
        outcome = "failed"
        try:
            batch: list[Any] = [settle_item(sid)]
            await ReconcilingSession(faulty, config=config).add_items(batch)
            outcome = "written"
        except BackendFailure:
            pass
        except Exception as exc:
            outcome = type(exc).__name__
        finally:
            with contextlib.suppress(Exception):
                await _close(store)
        log.write(event="prepared", session=sid, outcome=outcome)

    sessions = list(spec["sessions"])
    for start in range(0, len(sessions), _PREPARED_AT_ONCE):
        await asyncio.gather(*(one(sid) for sid in sessions[start : start + _PREPARED_AT_ONCE]))
    with contextlib.suppress(Exception):
        await journal.close()
    log.close()


def _ready_then_go(spec: dict[str, Any], seconds: float = 60.0) -> bool:
    """Say ready (a file), then wait (bounded, nothing else runs meanwhile) for the go."""
    with open(spec["ready"], "w", encoding="ascii"):
        pass
    deadline = time.monotonic() + seconds
    while not os.path.exists(spec["go"]):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


async def _settle(spec: dict[str, Any]) -> None:
    """Reconcile every session, in an order of its own, until each call on each session has
    returned without a denial (another worker may have settled it first), or time is up."""
    from .. import ReconcilingSession

    log = _Log(spec["log"])
    journal = open_journal(spec)
    config = worker_config(spec, journal)
    chooser = random.Random(spec["seed"])
    wrappers: dict[str, Any] = {}
    stores: list[Any] = []
    if not _ready_then_go(spec):
        log.write(event="settle_end", remaining=len(spec["sessions"]), told=False)
        return
    stop_at = time.monotonic() + spec["settle_seconds"]
    remaining = list(spec["sessions"])
    while remaining and time.monotonic() < stop_at:
        chooser.shuffle(remaining)
        left: list[str] = []
        for sid in remaining:
            if time.monotonic() >= stop_at:
                left.append(sid)
                continue
            if sid not in wrappers:
                store = open_store(spec, sid)
                stores.append(store)
                wrappers[sid] = ReconcilingSession(store, config=config)
            try:
                async with asyncio.timeout(APPEND_TIMEOUT):
                    decisions = await wrappers[sid].reconcile()
            except Exception as exc:
                log.write(event="settle", session=sid, **_failure(exc))
                left.append(sid)
                continue
            made = [[d.intent_id, d.action.value, d.reason.value] for d in decisions]
            log.write(event="settle", session=sid, outcome="ok", decisions=made)
        remaining = left
    log.write(event="settle_end", remaining=len(remaining), told=True)
    for store in stores:
        with contextlib.suppress(Exception):
            await _close(store)
    with contextlib.suppress(Exception):
        await journal.close()
    log.close()


_ROLES: Final = {"work": _work, "reconcile": _reconcile, "prepare": _prepare, "settle": _settle}


async def _close(store: Any) -> None:
    closer = getattr(store, "close", None)
    if callable(closer):
        result = closer()
        if hasattr(result, "__await__"):
            await result


def _child(spec: dict[str, Any], namespaces: bool) -> None:
    code = 0
    # The server's pipes are its protocol: a child never reads nor writes them.
    # Its own output goes to a file beside its log, read when something went wrong.
    devnull = os.open(os.devnull, os.O_RDWR)
    errors = os.open(spec["log"].removesuffix(".log") + ".err", os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(devnull, 0)
    os.dup2(errors, 1)
    os.dup2(errors, 2)
    # The package's own log lines (a batch not appended again, a write waited out, ...) go
    # there too, with their times, for tracing a broken promise back to what a worker saw.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(created).6f %(levelname)s %(message)s"))
    package_log = logging.getLogger("agents_reconcile")
    package_log.addHandler(handler)
    package_log.setLevel(logging.INFO)
    try:
        if namespaces:
            _new_host(spec["host"])
        asyncio.run(_ROLES[spec["role"]](spec))
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _probe_namespaces() -> bool:
    """Whether a child may take a UTS namespace of its own here."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if _new_host("probe") else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _reap(children: dict[int, int | None]) -> None:
    for pid, code in list(children.items()):
        if code is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children[pid] = os.waitstatus_to_exitcode(status)


def _wait_all(children: dict[int, int | None], seconds: float) -> dict[str, int | None]:
    deadline = time.monotonic() + seconds
    while any(code is None for code in children.values()) and time.monotonic() < deadline:
        _reap(children)
        time.sleep(0.02)
    for pid, code in children.items():
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            children[pid] = os.waitstatus_to_exitcode(status)
    ended = {str(pid): code for pid, code in children.items()}
    children.clear()
    return ended


def _answer(reply: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def main() -> None:
    """Serve spawn and wait commands until stdin closes."""
    # Imported here, once: every child starts with the SDK and the drivers loaded.
    import agents  # noqa: F401

    from .._backends.registry import BACKENDS
    from .._session import session  # noqa: F401

    for backend in BACKENDS:
        if backend.available():
            with contextlib.suppress(Exception):
                backend.journal_class()
                if backend.store:
                    backend.store_class()
    namespaces = _probe_namespaces()
    _answer({"namespaces": namespaces})
    children: dict[int, int | None] = {}
    stdin = sys.stdin
    while True:
        ready, _, _ = select.select([stdin], [], [], 0.05)
        _reap(children)
        if not ready:
            continue
        line = stdin.readline()
        if not line:
            break
        command = json.loads(line)
        if "spawn" in command:
            spec = command["spawn"]
            pid = os.fork()
            if pid == 0:
                _child(spec, namespaces)
            children[pid] = None
            _answer({"pid": pid})
        elif "wait" in command:
            _answer({"ended": _wait_all(children, float(command["wait"]))})
    _wait_all(children, 5.0)


if __name__ == "__main__":
    main()
