"""A fork server for matrix cells: imports the SDK once, then forks one child per job.

Run as ``python -m agents_reconcile.selftest.zygote``. It reads one JSON job per line on
stdin, forks a child that runs it, waits for the child (killing it after a timeout), and writes
one JSON line back: ``{"code": <exit status>}``, negative when a signal ended the child, or
``null`` when it ran out of time. The server itself has no threads, so forking it is safe.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback

import orjson

from .scenario import Job, run_job

__all__ = ["main"]


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


def _wait(pid: int, timeout: float) -> int | None:
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


def main() -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        raw = orjson.loads(line)
        job, timeout = Job.from_json(raw["job"]), float(raw["timeout"])
        pid = os.fork()
        if pid == 0:
            _child(job)
        code = _wait(pid, timeout)
        sys.stdout.buffer.write(orjson.dumps({"code": code}) + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
