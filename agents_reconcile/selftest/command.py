"""``agents-reconcile selftest``: run the crash-point matrix here and print its tables."""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TextIO

from .matrix import cells, run_cells, stop_servers
from .report import outcome_table, totals, totals_table
from .scenario import RecoveryPath
from .stores import POSTGRES_ENV, REDIS_ENV, STORES, store_named

__all__ = ["machine", "run_selftest"]


def machine() -> str:
    """One line about where the figures come from."""
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, openai-agents {version('openai-agents')}"
    )


def run_selftest(
    *,
    stores: Sequence[str] = (),
    paths: Sequence[str] = (),
    foreign: bool = True,
    workers: int = 2,
    keep: Path | None = None,
    redis_url: str | None = None,
    postgres_url: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Run the matrix; print the outcome tables and the totals. Returns 0 when every promise
    held in every cell, 1 otherwise."""
    # The fork servers read these when they start (below), and so do their children.
    if redis_url:
        os.environ[REDIS_ENV] = redis_url
    if postgres_url:
        os.environ[POSTGRES_ENV] = postgres_url
    chosen = [store_named(name) for name in stores] if stores else list(STORES)
    missing = [store.name for store in chosen if not store.available()]
    chosen = [store for store in chosen if store.available()]
    run_paths = [RecoveryPath(name) for name in paths] if paths else list(RecoveryPath)
    if missing:
        print(f"Skipped (no driver, or no server given): {', '.join(missing)}", file=out)
    workdir = keep or Path(tempfile.mkdtemp(prefix="agents-reconcile-selftest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    lock = threading.Lock()
    done = 0
    try:
        selected = cells(
            [store.name for store in chosen],
            run_paths,
            workdir=workdir,
            foreign=(False, True) if foreign else (False,),
        )
        print(f"Running {len(selected)} scenarios, {workers} at a time ...", file=out)

        def progress(_: object) -> None:
            nonlocal done
            with lock:
                done += 1
                if done % 100 == 0:
                    print(f"  {done}/{len(selected)}", file=out, flush=True)

        verdicts = run_cells(selected, workdir=workdir, workers=workers, progress=progress)
    finally:
        stop_servers()
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"\n{len(verdicts)} scenarios in {elapsed:.0f} s on {machine()}.\n", file=out)
    print("Recovery after SIGKILL (outcome of the recovery, and over how many stores):\n", file=out)
    print(outcome_table(verdicts, foreign=False), file=out)
    if foreign:
        print(
            "\nThe same, with another writer appending between the crash and the recovery:\n",
            file=out,
        )
        print(outcome_table(verdicts, foreign=True), file=out)
    print(
        "\nPromises, counted over every scenario (every column from duplicates on must be 0):\n",
        file=out,
    )
    print(totals_table(verdicts), file=out)
    broken = [verdict for verdict in verdicts if not verdict.holds]
    for verdict in broken[:20]:
        cell = verdict.cell
        print(
            f"BROKEN {cell.store} {cell.path.value} {cell.row}"
            f"{' (another writer)' if cell.foreign else ''}: {verdict.outcome}; "
            + "; ".join(verdict.problems),
            file=out,
        )
    overall = totals(verdicts).get("all")
    if overall is None or broken:
        print(f"\n{len(broken)} scenarios broke a promise.", file=out)
        return 1
    print("\nEvery promise held.", file=out)
    return 0
