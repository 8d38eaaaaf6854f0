"""``agents-reconcile selftest``: run the crash-point matrix and the cancellation matrix here
and print their tables."""

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

from .cancel_modes import Mode
from .cancel_report import broken_lines, cancel_outcome_table, cancel_totals_table
from .cancellation import LATE_STORE, cancel_stores
from .cancellation import cells as cancel_cells
from .cancellation import run_cells as run_cancel_cells
from .matrix import cells, run_cells, stop_servers
from .report import outcome_table, totals, totals_table
from .scenario import RecoveryPath
from .stores import POSTGRES_ENV, REDIS_ENV, STORES, store_named

__all__ = ["machine", "run_cancel_matrix", "run_selftest"]


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
    only: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Run the SIGKILL matrix, then the cancellation matrix (``only``: ``"kill"`` or
    ``"cancel"``, just that one); print their outcome tables and totals. Returns 0 when every
    promise held in every cell, 1 otherwise."""
    # The fork servers read these when they start (below), and so do their children.
    if redis_url:
        os.environ[REDIS_ENV] = redis_url
    if postgres_url:
        os.environ[POSTGRES_ENV] = postgres_url
    code = 0
    if only in (None, "kill"):
        code |= _run_kill(stores, paths, foreign=foreign, workers=workers, keep=keep, out=out)
    if only in (None, "cancel"):
        if only is None:
            print("\n", file=out)
        code |= run_cancel_matrix(stores, paths, keep=keep, out=out)
    return code


def run_cancel_matrix(
    stores: Sequence[str], paths: Sequence[str] = (), *, keep: Path | None, out: TextIO
) -> int:
    """Run the cancellation matrix here, in this process; print its tables and totals.
    ``paths`` (the SIGKILL matrix's recovery paths) choose its paths: a fresh run's
    cancellation, a resumed checkpoint's, or both."""
    selected_stores = cancel_stores(stores)
    # One store alone meets every mode at every row; several take the modes in turn.
    crossed = selected_stores if len(selected_stores) < len(Mode) else ()
    resumes = sorted({RecoveryPath(name).resumes for name in paths}) if paths else (False, True)
    selected = cancel_cells(selected_stores, paths=resumes, crossed=crossed)
    workdir = (keep / "cancel") if keep else Path(tempfile.mkdtemp(prefix="agents-reconcile-cx-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"Running {len(selected)} cancellation scenarios, one at a time ...", file=out)
    started = time.monotonic()
    try:
        verdicts = run_cancel_cells(selected, workdir=workdir, keep=keep is not None)
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(
        f"\n{len(verdicts)} cancellation scenarios in {elapsed:.0f} s on {machine()}.\n", file=out
    )
    print(
        "A request cancelled at each point (rows) in each way (columns), then continued as a "
        "user would (how that went, over how many stores):\n",
        file=out,
    )
    print(cancel_outcome_table(verdicts), file=out)
    print(
        "\nPromises after a cancellation, counted over every scenario (every column from "
        "duplicates on must be 0):\n",
        file=out,
    )
    print(cancel_totals_table(verdicts), file=out)
    for line in broken_lines(verdicts):
        print(line, file=out)
    broken = [verdict for verdict in verdicts if not verdict.holds]
    if broken:
        print(f"\n{len(broken)} cancellation scenarios broke a promise.", file=out)
        return 1
    print("\nEvery cancellation promise held.", file=out)
    return 0


def _run_kill(
    stores: Sequence[str],
    paths: Sequence[str],
    *,
    foreign: bool,
    workers: int,
    keep: Path | None,
    out: TextIO,
) -> int:
    """The SIGKILL matrix."""
    if stores and all(name == LATE_STORE for name in stores):
        return 0  # a store of the cancellation matrix alone
    stores = [name for name in stores if name != LATE_STORE]
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
