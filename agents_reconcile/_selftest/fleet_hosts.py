"""The fleet self-test's machinery (``fleet``): servers of its own on loopback, which it
may restart; loopback proxies that lose replies, on an event loop thread; and the fork server
that starts workers, each in a UTS namespace of its own (a host name of its own)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from .._backends.faultproxy import FaultProxy
from .._core.ownership import process_state

__all__ = ["ForkServer", "OwnServers", "ProxyLoop", "alive", "free_port", "through", "wait_port"]


# -- the servers ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _pg_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else None


def wait_port(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        time.sleep(0.05)
    return False


class OwnServers:
    """Private Redis and PostgreSQL servers on free loopback ports under a directory, started,
    restarted and stopped by this process only (by the PIDs it holds)."""

    def __init__(self, out: TextIO) -> None:
        # Somewhere the postgres user can reach (not under a private temporary directory).
        self.directory = Path(tempfile.mkdtemp(prefix="agents-reconcile-fleet-servers-"))
        self.directory.chmod(0o755)
        self.out = out
        self.urls: dict[str, str] = {}
        self._redis: subprocess.Popen[bytes] | None = None
        self._redis_port = 0
        self._pg_port = 0
        self._pg_data = self.directory / "postgres" / "data"

    def start(self) -> None:
        if shutil.which("redis-server"):
            self._redis_port = free_port()
            self._start_redis()
            self.urls["redis"] = f"redis://127.0.0.1:{self._redis_port}/0"
        else:
            print("No redis-server here: no private Redis.", file=self.out)
        if _pg_bin() is not None and self._init_postgres():
            self._pg_port = free_port()
            self._start_postgres()
            self._as_postgres(
                "psql", "-h", "127.0.0.1", "-p", str(self._pg_port), "-U", "postgres", "-qc",
                "CREATE DATABASE fleet",
            )  # fmt: skip
            self.urls["postgres"] = f"postgresql://postgres@127.0.0.1:{self._pg_port}/fleet"

    def _start_redis(self) -> None:
        folder = self.directory / "redis"
        folder.mkdir(parents=True, exist_ok=True)
        # appendfsync always: a restart keeps every acknowledged write, as the judge assumes.
        self._redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self._redis_port),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--dir", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if not wait_port(self._redis_port, 10):
            raise RuntimeError("the private redis-server did not start")

    def _stop_redis(self) -> None:
        if self._redis is not None:
            self._redis.terminate()
            try:
                self._redis.wait(10)
            except subprocess.TimeoutExpired:
                self._redis.kill()
                self._redis.wait(5)
            self._redis = None

    def _as_postgres(self, tool: str, *args: str) -> bool:
        binary = _pg_bin()
        assert binary is not None
        command = [str(binary / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, timeout=60, check=False)
        return done.returncode == 0

    def _init_postgres(self) -> bool:
        if os.geteuid() == 0:
            try:
                import pwd

                user = pwd.getpwnam("postgres")
            except KeyError:
                print("No postgres user here: no private PostgreSQL.", file=self.out)
                return False
            folder = self.directory / "postgres"
            folder.mkdir(parents=True, exist_ok=True)
            os.chown(folder, user.pw_uid, user.pw_gid)
        if not self._as_postgres(
            "initdb", "-D", str(self._pg_data), "--auth=trust", "--no-sync", "-U", "postgres"
        ):
            print("initdb failed: no private PostgreSQL.", file=self.out)
            return False
        return True

    def _start_postgres(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self._pg_port} -k {self._pg_data} "
        options += "-c fsync=off"
        for _ in range(5):  # a postmaster that just died may hold its pidfile a moment
            if self._as_postgres(
                "pg_ctl", "-D", str(self._pg_data), "-w", "-t", "30", "-l",
                str(self._pg_data.parent / "server.log"), "start", "-o", options,
            ):  # fmt: skip
                return
            time.sleep(0.5)
        raise RuntimeError("the private PostgreSQL did not start")

    def _stop_postgres(self, mode: str) -> None:
        self._as_postgres("pg_ctl", "-D", str(self._pg_data), "-w", "-m", mode, "stop")

    def restart(self, name: str) -> None:
        """Stop the server abruptly (Redis: SIGTERM; PostgreSQL: immediate) and start it."""
        if name == "redis":
            self._stop_redis()
            self._start_redis()
        else:
            self._stop_postgres("immediate")
            self._start_postgres()

    def stop(self) -> None:
        self._stop_redis()
        if "postgres" in self.urls:
            self._stop_postgres("fast")
        shutil.rmtree(self.directory, ignore_errors=True)


# -- the proxies -----------------------------------------------------------------------------


class ProxyLoop:
    """``FaultProxy`` instances served by an event loop on a thread of their own."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._proxies: list[FaultProxy] = []

    def proxy(self, port: int) -> FaultProxy:
        proxy = FaultProxy("127.0.0.1", port)
        asyncio.run_coroutine_threadsafe(proxy.start(), self._loop).result(10)
        self._proxies.append(proxy)
        return proxy

    def lose_next_reply(self, proxy: FaultProxy, seconds: float) -> bool:
        """Lose the next reply through ``proxy``; whether it happened within ``seconds``."""

        async def lose() -> bool:
            proxy.lose_next_reply()
            try:
                async with asyncio.timeout(seconds):
                    await proxy.fired()
            except TimeoutError:
                return False
            return True

        fired: bool = asyncio.run_coroutine_threadsafe(lose(), self._loop).result(seconds + 5)
        return fired

    def close(self) -> None:
        for proxy in self._proxies:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(proxy.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def through(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


# -- the fork server -------------------------------------------------------------------------


class ForkServer:
    """The ``fleet_worker`` fork server: spawns workers, and waits for them."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "agents_reconcile._selftest.fleet_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.namespaces = bool(self._ask(None)["namespaces"])

    def _ask(self, command: dict[str, Any] | None) -> dict[str, Any]:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        if command is not None:
            stdin.write(json.dumps(command) + "\n")
            stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError("the fleet's fork server ended")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def spawn(self, spec: dict[str, Any]) -> int:
        pid: int = self._ask({"spawn": spec})["pid"]
        return pid

    def wait(self, seconds: float) -> dict[str, int | None]:
        ended: dict[str, int | None] = self._ask({"wait": seconds})["ended"]
        return ended

    def close(self) -> None:
        stdin = self._process.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):
                stdin.close()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)


def alive(pid: int) -> bool:
    return process_state(pid) not in (None, "Z", "X")
