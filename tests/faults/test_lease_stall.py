"""A worker frozen past its lease must not have its write taken over where the store cannot
fence it off.

Worker A, on one host, appends the batch ``A0, A1`` to a session and is frozen (SIGSTOP, as a
long pause, a suspended VM or a debugger would) just before that batch reaches the store:
during its own append, or while replaying that batch after a failed first attempt. Once A's
lease has run out, worker B, on another host (a UTS namespace of its own, so its owner names
another host), appends ``B-item`` to the same session through the same journal. Then A wakes
and finishes.

Nothing can tell a frozen worker from a dead one, and the SDK's own sessions have no way to
refuse a write from an owner that lost its claim: if B replayed A's batch there, A would write
it again on waking. So B is refused (``lease_expired``) until A has finished, and a retry
then succeeds. A revisioned store fences A off instead: B takes the write over and replays it
by compare-and-swap, and A, on waking, cannot write it again. Either way the history ends
with each item exactly once. On one host the owner's pid settles it: B is refused
(``in_flight_elsewhere``) while A's process lives, however old its claim.

The cases run over every journal (an SQLite file, Redis, PostgreSQL) and, on each, the SDK's
``SQLiteSession`` and the revisioned stores that fit: ``RevisionedSQLiteSession`` always,
and the journal's own server's revisioned store. Importing the SDK takes seconds, so one
process per host serves every case (``stall_worker``); each case has a session, a namespace
and files of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from agents_reconcile._backends.registry import backend_named
from agents_reconcile._core.ownership import process_state
from agents_reconcile._selftest.stores import close_store

from ..support.backends import namespace
from ..support.servers import server_url
from ..support.stall_worker import BATCH, SEED, open_journal, open_store

pytestmark = pytest.mark.faults

LEASE_SECONDS = 1.0
PAST_LEASE = 0.2
"""How long past the lease B starts, after A is seen frozen."""
IN_FLIGHT_WAIT = 1.0
"""B's bound on waiting, for a live owner or for its own turn (A keeps the default): short,
to keep the control quick, yet long enough for B's own settling and append on a busy machine."""
STEP_SECONDS = 20.0
"""The most any one step of a case may take before the case is called hung."""
START_SECONDS = 60.0
B_ITEM = "B-item"
FINAL = [SEED, *BATCH, B_ITEM]
ROOT = Path(__file__).resolve().parents[2]


class Host:
    """A worker process on a host of its own: a UTS namespace whose host name is ``name``.
    Two hosts with one name are one host to the wrappers (same name, same boot id)."""

    def __init__(self, name: str, directory: Path, label: str) -> None:
        self.name, self.label = name, label
        self.stderr_path = directory / f"{label}.stderr"
        self.proc: subprocess.Popen[str] | None = None
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.started = False

    def start(self) -> None:
        spec = json.dumps({"host": self.name})
        command = [
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.name,
            sys.executable,
            "-m",
            "tests.support.stall_worker",
            spec,
        ]
        stderr = self.stderr_path.open("a")
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )
        stderr.close()
        self.events = queue.Queue()
        self.started = False
        assert self.proc.stdout is not None
        reader = threading.Thread(target=_read, args=(self.proc.stdout, self.events))
        reader.daemon = True
        reader.start()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def ready(self) -> None:
        """Start the process if it is not running, and wait until it serves commands."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        if not self.started:
            hello = self.expect("ready", timeout=START_SECONDS)
            assert hello["host"] == self.name and hello["pid"] == self.pid, hello
            self.started = True

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def expect(self, wanted: str, *, timeout: float = STEP_SECONDS) -> dict[str, Any]:
        """The next event called ``wanted``; fails on a broken command, an exit, or none in
        time."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                message = f"{self.label}: no {wanted!r} in {timeout}s{self.tail()}"
                raise AssertionError(message) from None
            if event["event"] == wanted:
                return event
            if event["event"] != "noise":
                raise AssertionError(f"{self.label}: {brief(event)} while waiting for {wanted!r}")

    def call(self, command: dict[str, Any]) -> dict[str, Any]:
        self.send(command)
        return self.expect("done")

    def state(self) -> str:
        """The process's state letter in /proc (``T``: stopped)."""
        return process_state(self.pid) or "?"

    def wait_stopped(self) -> None:
        deadline = time.monotonic() + STEP_SECONDS
        while self.state() not in ("T", "t"):
            assert time.monotonic() < deadline, f"{self.label} never stopped{self.tail()}"
            time.sleep(0.005)

    def tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n" + self.stderr_path.read_text()[-3000:]
        return ""

    def kill(self) -> None:
        """End the process now (it is started again when next needed)."""
        self.started = False
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def close(self) -> None:
        """Let the process finish what it does and leave; kill it if it does not."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STEP_SECONDS)
        self.kill()


def _read(stream: IO[str], events: queue.Queue[dict[str, Any]]) -> None:
    """Pass a worker's JSON lines on as events, until it exits."""
    with stream:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "noise", "line": line}
            events.put(event)
    events.put({"event": "exited"})


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Host]]:
    """Worker A on ``stall-a``, worker B on ``stall-b``, and a second worker on ``stall-a``
    (A's host, for the control)."""
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("needs UTS namespaces (unshare --uts: root, or a user namespace)")
    directory = tmp_path_factory.mktemp("hosts")
    started = {
        "a": Host("stall-a", directory, "a"),
        "b": Host("stall-b", directory, "b"),
        "a-twin": Host("stall-a", directory, "a-twin"),
    }
    try:
        # The twin starts once A and B are up, so that the three do not share the CPUs for
        # their imports; the cases before the control leave them mostly idle.
        started["a"].start()
        started["b"].start()
        started["a"].ready()
        started["b"].ready()
        started["a-twin"].start()
        yield started
    finally:
        for host in started.values():
            host.close()


@dataclass
class Run:
    """What happened in one case."""

    spec: dict[str, Any]
    b_first: dict[str, Any] = field(default_factory=dict)
    a_woke: dict[str, Any] = field(default_factory=dict)
    b_retry: dict[str, Any] | None = None
    history: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> dict[str, int]:
        return {text: n for text, n in Counter(self.history).items() if n > 1}

    @property
    def lost(self) -> list[str]:
        """Items acknowledged to a worker (A's batch also when B replayed it) that the
        history lacks."""
        promised = [SEED]
        # B's append settles A's pending write before its own: once it succeeded, A's batch
        # is in the history, found there or replayed.
        if "ok" in (self.a_woke.get("outcome"), self.b_first.get("outcome")):
            promised += BATCH
        if "ok" in (self.b_first.get("outcome"), (self.b_retry or {}).get("outcome")):
            promised.append(B_ITEM)
        return [text for text in promised if text not in self.history]

    def __str__(self) -> str:
        return (
            f"history={self.history} duplicates={self.duplicates} lost={self.lost}\n"
            f"  B first: {brief(self.b_first)}\n  A woke: {brief(self.a_woke)}\n"
            f"  B retry: {brief(self.b_retry)}"
        )


def brief(ended: dict[str, Any] | None) -> str:
    if not ended:
        return "-"
    shown = {k: v for k, v in ended.items() if k not in ("event", "trace")}
    if "trace" in ended:
        shown["trace"] = ended["trace"][-1500:]
    return json.dumps(shown)


def case_spec(journal: str, store: str, path: str, directory: Path) -> dict[str, Any]:
    """Where one case's journal and store live: files under ``directory``, or a namespace
    of their own on the servers (skipped without one)."""
    space = namespace()
    journal_backend = backend_named(journal)
    if journal_backend.server:
        journal_address = server_url(journal_backend)
    else:
        journal_address = journal_backend.address_in(directory, "journal")
    if store == "sqlite_session":
        store_address = str(directory / "chat.db")
    else:
        store_backend = backend_named(store.removeprefix("revisioned_"))
        if store_backend.server:
            store_address = server_url(store_backend)
        else:
            store_address = store_backend.address_in(directory, "revisioned")
    return {
        "path": path,
        "session_id": f"stall-{uuid.uuid4().hex[:12]}",
        "journal": {"backend": journal, "address": journal_address, "namespace": space},
        "store": {"kind": store, "address": store_address, "namespace": space},
        "lease_seconds": LEASE_SECONDS,
        "in_flight_wait": IN_FLIGHT_WAIT,
    }


async def read_and_drop(spec: dict[str, Any]) -> list[str]:
    """The stored history, read afresh; then the case's server data is deleted."""
    store = open_store(spec)
    journal = open_journal(spec)
    try:
        return [item["content"] for item in await store.get_items()]
    finally:
        if backend_named(spec["journal"]["backend"]).server:
            await journal.drop()
        await journal.close()
        await close_store(store, drop=spec["store"]["kind"] != "sqlite_session")


def run_case(a: Host, b: Host, spec: dict[str, Any]) -> Run:
    """Freeze A before its batch reaches the store, let B append once A's lease ran out,
    wake A, retry B if it was refused, and read what the store holds."""
    a.ready()
    b.ready()
    run = Run(spec)
    finished = False
    try:
        a.send({"op": "stall", **spec})
        if spec["path"] == "replay":
            a.expect("rejected")
        a.expect("stopping")
        a.wait_stopped()
        time.sleep(LEASE_SECONDS + PAST_LEASE)
        run.b_first = b.call({"op": "append", "text": B_ITEM, **spec})
        os.kill(a.pid, signal.SIGCONT)
        run.a_woke = a.expect("done")
        if run.b_first["outcome"] != "ok":
            run.b_retry = b.call({"op": "append", "text": B_ITEM, **spec})
        finished = True
    finally:
        if not finished:
            # A worker in an unknown state serves no further case; the case's data goes.
            a.kill()
            b.kill()
            with contextlib.suppress(Exception):
                asyncio.run(read_and_drop(spec))
    run.history = asyncio.run(read_and_drop(spec))
    return run


def assert_no_duplicate_and_nothing_lost(run: Run) -> None:
    assert not run.duplicates and not run.lost, str(run)


JOURNALS = [
    pytest.param("sqlite", id="sqlite_journal", marks=pytest.mark.sqlite),
    pytest.param("redis", id="redis_journal", marks=pytest.mark.redis),
    pytest.param("postgres", id="postgres_journal", marks=pytest.mark.postgres),
]
PATHS = ["append", "replay"]


def unfenced_cases() -> list[Any]:
    return [
        pytest.param(j.values[0], path, id=f"{j.id}-sqlite_session-{path}", marks=j.marks)
        for j in JOURNALS
        for path in PATHS
    ]


def fenced_cases() -> list[Any]:
    cases = []
    for j in JOURNALS:
        stores = ["revisioned_sqlite"]
        if j.values[0] != "sqlite":
            stores.append(f"revisioned_{j.values[0]}")
        cases += [
            pytest.param(j.values[0], store, path, id=f"{j.id}-{store}-{path}", marks=j.marks)
            for store in stores
            for path in PATHS
        ]
    return cases


@pytest.mark.parametrize(("journal", "path"), unfenced_cases())
def test_a_stalled_owner_on_another_host_keeps_its_write_on_the_sdk_store(
    hosts: dict[str, Host], journal: str, path: str, tmp_path: Path
) -> None:
    """On a store that cannot fence a writer off, B does not take over a write whose owner
    on another host outlived its lease while in flight: it is refused (``lease_expired``)
    and stores nothing. A wakes and finishes its write; B's retry then succeeds; each item
    is stored once."""
    spec = case_spec(journal, "sqlite_session", path, tmp_path)
    run = run_case(hosts["a"], hosts["b"], spec)
    assert_no_duplicate_and_nothing_lost(run)
    assert run.b_first.get("outcome") == "denied", str(run)
    assert run.b_first.get("reason") == "lease_expired", str(run)
    assert run.a_woke.get("outcome") == "ok", str(run)
    assert run.b_retry is not None and run.b_retry.get("outcome") == "ok", str(run)
    assert run.history == FINAL, str(run)


@pytest.mark.parametrize(("journal", "store", "path"), fenced_cases())
def test_a_stalled_owner_is_fenced_off_a_revisioned_store(
    hosts: dict[str, Host],
    journal: str,
    store: str,
    path: str,
    tmp_path: Path,
    record_property: Any,
) -> None:
    """On a revisioned store, B takes over the write of an owner on another host whose lease
    ran out, replays its batch by compare-and-swap and appends its own item. A, on waking,
    writes nothing again: it succeeds, or learns it lost its lease (``LeaseLost``) or is
    refused. Each item is stored exactly once, the batch whole, after the seed."""
    spec = case_spec(journal, store, path, tmp_path)
    run = run_case(hosts["a"], hosts["b"], spec)
    record_property("a_woke", brief(run.a_woke))
    assert_no_duplicate_and_nothing_lost(run)
    assert run.b_first.get("outcome") == "ok", str(run)
    assert run.b_retry is None, str(run)
    assert run.a_woke.get("outcome") in ("ok", "lease_lost", "denied"), str(run)
    assert sorted(run.history) == sorted(FINAL), str(run)
    assert run.history[0] == SEED, str(run)
    first = run.history.index(BATCH[0])
    assert run.history[first : first + len(BATCH)] == list(BATCH), str(run)


@pytest.mark.sqlite
@pytest.mark.parametrize("path", PATHS)
def test_a_stalled_owner_on_the_same_host_is_waited_for(
    hosts: dict[str, Host], path: str, tmp_path: Path
) -> None:
    """The control: on one host, an owner whose process lives holds its write however long
    ago it claimed it. B is refused (``in_flight_elsewhere``) while A is frozen, A finishes
    on waking, B's retry succeeds, and each item is stored once."""
    spec = case_spec("sqlite", "sqlite_session", path, tmp_path)
    run = run_case(hosts["a"], hosts["a-twin"], spec)
    assert_no_duplicate_and_nothing_lost(run)
    assert run.b_first.get("outcome") == "denied", str(run)
    assert run.b_first.get("reason") == "in_flight_elsewhere", str(run)
    assert run.a_woke.get("outcome") == "ok", str(run)
    assert run.b_retry is not None and run.b_retry.get("outcome") == "ok", str(run)
    assert run.history == FINAL, str(run)
