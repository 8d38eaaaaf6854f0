"""Run this package's own tests at other supported releases of the SDK.

    python -m compat.package_suite --sdk-version oldest --sdk-version middle [PATH ...]

For each version (named as for ``compat.sdk_tests``: a number, ``oldest``, ``middle``,
``newest``) it builds a virtual environment under ``.cache/sdk-suite/<version>`` with this
project (editable, with its ``dev`` extra) and that release of ``openai-agents``, then runs
pytest there on PATH (default: the suites whose subject is the SDK's behaviour: the session,
the runner, Conversations, effects and the core), with the workers ``pyproject.toml``'s pytest
configuration asks for, as the README's test command runs. Exit status: 0 when every run
passed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from .sdk_tests import DISTRIBUTION, ROOT, mark_cache, resolve_versions

__all__ = ["main"]

SUITES: Final = ("tests/session", "tests/conversations", "tests/effects", "tests/core")
"""What runs by default: every suite that drives the SDK's runner or its sessions. The
journal and store conformance suites, the operators' commands and the self-test matrices are
the SDK's release's business only through these."""


def build(version: str, cache: Path, python: str) -> Path:
    """The environment of ``version`` (made once; reused while the project's requirements,
    its ``dev`` extra's test tools among them, are those it was made with)."""
    place = cache / version
    interpreter = place / "bin" / "python"
    marker = place / ".built"
    made_for = f"{version}\n{requirements_digest()}"
    if not marker.exists() or marker.read_text() != made_for:
        subprocess.run([python, "-m", "venv", "--clear", str(place)], check=True)
        subprocess.run(
            [
                str(interpreter),
                "-m",
                "pip",
                "install",
                "-q",
                "-e",
                f"{ROOT}[dev]",
                f"{DISTRIBUTION}=={version}",
            ],
            check=True,
        )
        marker.write_text(made_for)
    return interpreter


def requirements_digest() -> str:
    """A digest of ``pyproject.toml``: an environment made before it changed is made again."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.package_suite", description=__doc__)
    parser.add_argument("paths", nargs="*", default=list(SUITES), help="test paths")
    parser.add_argument("--sdk-version", action="append", default=[], help="repeatable")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "sdk-suite")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    mark_cache(args.cache)
    failed: list[str] = []
    for version in resolve_versions(args.sdk_version, args.python):
        started = time.monotonic()
        interpreter = build(version, args.cache.resolve(), args.python)
        print(f"{DISTRIBUTION} {version}: {' '.join(args.paths)}", flush=True)
        done = subprocess.run(
            [str(interpreter), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.paths],
            cwd=ROOT,
            check=False,
        )
        spent = time.monotonic() - started
        print(f"{DISTRIBUTION} {version}: exit {done.returncode} in {spent:.0f} s", flush=True)
        if done.returncode != 0:
            failed.append(version)
    if failed:
        print(f"failed at {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
