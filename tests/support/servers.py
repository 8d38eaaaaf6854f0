"""Real servers for the suites, found through environment variables.

A registered backend that lives on a server finds it in ``AGENTS_RECONCILE_TEST_<NAME>_URL``
(``Backend.environment("TEST")``). ``.ci/run`` (through ``scripts/services.sh``) starts Redis
and PostgreSQL on loopback and exports ``AGENTS_RECONCILE_TEST_REDIS_URL`` and
``AGENTS_RECONCILE_TEST_POSTGRES_URL``. Without them, tests that need a server are skipped,
and the run's summary says which and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from agents_reconcile._backends.registry import Backend, backend_named

REDIS_ENV: Final = backend_named("redis").environment("TEST")
POSTGRES_ENV: Final = backend_named("postgres").environment("TEST")
_TITLES: Final = {"redis": "Redis", "postgres": "PostgreSQL"}


@contextlib.contextmanager
def alone(resource: str) -> Iterator[None]:
    """Hold, for as long as the block runs, a lock every test process of this user on this
    machine takes around ``resource`` (parallel workers, and other checkouts' runs on the same
    servers): for the few tests that measure what a whole shared server did meanwhile."""
    path = Path(tempfile.gettempdir()) / f"agents-reconcile-tests-{resource}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def server_url(backend: Backend) -> str:
    """The URL of ``backend``'s test server, or skip the test saying how to provide one."""
    variable = backend.environment("TEST")
    url = os.environ.get(variable)
    if not url:
        title = _TITLES.get(backend.name, backend.name)
        pytest.skip(f"no {title} server: set {variable} (scripts/services.sh start does)")
    return url


def redis_url() -> str:
    """The test Redis server's URL, or skip the test saying how to provide one."""
    return server_url(backend_named("redis"))


def postgres_url() -> str:
    """The test PostgreSQL server's URL, or skip the test saying how to provide one."""
    return server_url(backend_named("postgres"))


class Wire:
    """Counts what an asyncpg connection sends: statements (its query logger) and protocol
    flushes (each one a request the client then waits on: a round trip)."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.flushes = 0

    async def attach(self, conn: Any) -> None:
        conn.add_query_logger(lambda record: self.statements.append(record.query))
        transport = conn._transport
        send = transport.write

        def write(data: Any) -> Any:
            self.flushes += 1
            return send(data)

        transport.write = write

    async def settled(self) -> None:
        # Query loggers are called soon after the statement, not during it.
        for _ in range(3):
            await asyncio.sleep(0)

    def clear(self) -> None:
        self.statements.clear()
        self.flushes = 0


class OwnRedis:
    """A Redis server of one test's own, on a free loopback port, with its data under
    ``directory``: for a test that does what touches a whole server (kills it, empties its
    script cache), which the shared test server must not see while other tests use it.
    Skips the test where ``redis-server`` is not installed."""

    def __init__(self, directory: Path, *options: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (scripts/services.sh start installs it)")
        directory.mkdir(parents=True, exist_ok=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._command = [
            binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(directory),
            "--save", "", *options,
        ]  # fmt: skip
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it answers."""
        self._process = subprocess.Popen(
            self._command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as probe:
                    probe.sendall(b"PING\r\n")
                    if probe.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self._process.kill()
        raise RuntimeError("the test's own Redis server did not start")

    def kill(self) -> None:
        """SIGKILL the server, and reap it."""
        assert self._process is not None
        self._process.kill()
        self._process.wait()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)


@contextlib.contextmanager
def own_cluster() -> Iterator[str]:
    """The address of a Redis Cluster of the caller's own (three primaries, a replica each),
    for a test that fails its primaries over; skips where it cannot be started."""
    from agents_reconcile._selftest.fleet_cluster import OwnCluster

    said = io.StringIO()
    cluster = OwnCluster(said)
    try:
        if not cluster.start():
            pytest.skip(f"no Redis Cluster of the test's own: {said.getvalue().strip()}")
        yield cluster.url
    finally:
        cluster.stop()
