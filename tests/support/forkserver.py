"""A fork server for tests that run commands as a user types them (``python app.py ...``,
``python -m pytest ...``, ``agents-reconcile ...``): one process imports the SDK and this
package once, then forks one child per command, which runs it as a fresh interpreter would
(its own directory, environment, ``sys.argv``, ``sys.path[0]``, exit status and output).

Importing the SDK costs each new interpreter about 3 s of CPU; a test that runs fifteen
commands in a row spends most of its time there. A child forked from this server starts with
those modules already imported, and with nothing else of the server's: the server has no
threads (checked before the first fork) and imports no module of the commands it runs.

Run as ``python -m tests.support.forkserver`` (``ForkServer`` starts it): one JSON request
per line on stdin, ``{"argv", "cwd", "env", "timeout", "out", "err"}``, one reply per line on
stdout, ``{"code": <exit status>}`` (negative when a signal ended the child) or
``{"code": null}`` when it ran out of time and was killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

from agents_reconcile._selftest.zygote import wait_or_kill

ROOT = Path(__file__).resolve().parents[2]
PRELOADED = ("agents", "agents_reconcile", "agents_reconcile._cli")
"""What the server imports before its first fork (the costly part of every command's start)."""
FRESH = (["python", "-m", "pytest"],)
"""Commands that start a new interpreter still: what pytest imports first matters to it (it
rewrites the asserts of plugins it imports itself, and warns of those imported before)."""

__all__ = ["ForkServer"]


class ForkServer:
    """A server started with ``env`` (the environment its children's imports see: give the
    one the commands run in); ``run`` runs one command in a child of it."""

    def __init__(self, env: dict[str, str]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.forkserver"],  # from ROOT: sys.path[0]
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )

    def run(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` as typed (its first word ``python`` or ``agents-reconcile``) run in
        ``cwd`` with ``env``; what it printed, as ``subprocess.run(capture_output=True,
        text=True)`` gives it. ``subprocess.TimeoutExpired`` after ``timeout`` seconds. A
        command of ``FRESH`` runs in a new interpreter instead."""
        if any(argv[: len(fresh)] == fresh for fresh in FRESH):
            return subprocess.run(
                [sys.executable, *argv[1:]],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        with tempfile.TemporaryDirectory(prefix="agents-reconcile-fork-") as directory:
            out, err = Path(directory, "out"), Path(directory, "err")
            request = {
                "argv": argv,
                "cwd": str(cwd),
                "env": env,
                "timeout": timeout,
                "out": str(out),
                "err": str(err),
            }
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            reply = process.stdout.readline()
            if not reply:
                raise RuntimeError(f"the fork server stopped (exit code {process.wait()})")
            code = json.loads(reply)["code"]
            if code is None:
                raise subprocess.TimeoutExpired(argv, timeout)
            return subprocess.CompletedProcess(
                argv, code, out.read_text("utf-8"), err.read_text("utf-8")
            )

    def close(self) -> None:
        """Stop the server (it ends when its stdin closes)."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the server -------------------------------------------------------------------------------


def _exit_status(exc: SystemExit) -> int:
    """What the interpreter makes of ``SystemExit(code)``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _command(argv: list[str]) -> None:
    """Run ``argv`` in this process as its interpreter would have."""
    word, *rest = argv
    if word == "agents-reconcile":
        from agents_reconcile._cli import main

        sys.argv = [str(Path(sys.executable).parent / "agents-reconcile"), *rest]
        raise SystemExit(main())
    if word != "python":
        raise ValueError(f"the fork server runs python and agents-reconcile, not {word!r}")
    if rest[:1] == ["-m"]:
        module, *arguments = rest[1:]
        sys.argv = [module, *arguments]  # run_module puts the module's file first
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    script, *arguments = rest
    sys.argv = [script, *arguments]
    sys.path[0] = str(Path(script).resolve().parent)
    runpy.run_path(script, run_name="__main__")


def _child(request: dict[str, Any]) -> None:
    code = 0
    try:
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        nothing = os.open(os.devnull, os.O_RDONLY)  # not the server's requests
        os.dup2(nothing, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (nothing, out, err):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _command(request["argv"])
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing left to write
                stream.flush()
        os._exit(code)


def main() -> None:
    for name in PRELOADED:
        __import__(name)
    if threading.active_count() > 1:
        raise RuntimeError("importing left threads running; forking now would be unsafe")
    requests = sys.stdin.buffer
    replies = sys.stdout.buffer
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        code = wait_or_kill(pid, float(request["timeout"]))
        replies.write(json.dumps({"code": code}).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    main()
