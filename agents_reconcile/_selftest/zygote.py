"""A fork server for matrix cells: imports the SDK once, then forks one child per job.

Run as ``python -m agents_reconcile._selftest.zygote``. It reads one JSON job per line on
stdin, forks a child that runs it, waits for the child (killing it after a timeout), and writes
one JSON line back: ``{"code": <exit status>}``, negative when a signal ended the child, or
``null`` when it ran out of time. The server itself has no threads, so forking it is safe.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

import orjson

from .scenario import Job, Phase, RecoveryPath, main_async, run_job
from .stores import STORES

__all__ = ["main", "wait_or_kill"]


def _child(job: Job) -> None:
    code = 0
    try:
        run_job(job)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def wait_or_kill(pid: int, timeout: float) -> int | None:
    """The exit status of child ``pid`` (negative: the signal that ended it), or None when it
    did not end within ``timeout`` seconds (it is then killed and reaped)."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _warm_up() -> None:
    """Run the conversation once per store and path, so that what the SDK and the drivers
    import or build lazily is already there in every child."""
    directory = tempfile.mkdtemp(prefix="agents-reconcile-warm-up-")
    try:
        for store in STORES:
            if not store.available():
                continue
            for path in RecoveryPath:
                target = os.path.join(directory, f"{store.name}-{path.value}")
                os.mkdir(target)
                asyncio.run(main_async(Job(target, store.name, path, Phase.PROBE)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if threading.active_count() > 1:
        raise RuntimeError("the warm-up left threads running; forking now would be unsafe")


def main() -> None:
    _warm_up()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        raw = orjson.loads(line)
        job, timeout = Job.from_json(raw["job"]), float(raw["timeout"])
        pid = os.fork()
        if pid == 0:
            _child(job)
        code = wait_or_kill(pid, timeout)
        sys.stdout.buffer.write(orjson.dumps({"code": code}) + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
