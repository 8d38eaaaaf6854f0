"""What one back-to-back append does on SQLite, bare and wrapped, counted (not timed).

For a 3-item ``add_items`` made back to back (the way ``performance.py``'s throughput (b) makes
them), per append: the SQL statements each file runs (a statement counts once, whatever its
triggers run), its commits (an explicit ``COMMIT``, or a write run outside a transaction), the
WAL frames (pages) it writes, and the thread hops (``run_in_executor``, which ``to_thread``
uses); beside each file its ``journal_mode`` and ``synchronous``. In WAL mode a commit under
``FULL`` waits for an fsync of the WAL, one under ``NORMAL`` none (the fsyncs come with the
checkpoints, every ~1,000 frames).

The figures do not depend on the machine's load: what changes the append's cost shows here as
a count. A default wrapper (write-ahead, the default SQLite journal) around a file
``SQLiteSession``, against a bare one; the measured appends come after warm-up appends, so each
wrapped opening clears the previous append's intent in the same commit, as it does back to back.

Usage::

    python benchmarks/append_anatomy.py
    python benchmarks/append_anatomy.py --appends 150
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import print_machine, print_table, turn_items, wrapped_session
from agents import SQLiteSession, set_tracing_disabled

WARMUP = 20
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_connect = sqlite3.connect
"""Connecting untraced (the counts' own look at the files)."""


@dataclass
class FileCounts:
    """What the connections to one file ran."""

    live: sqlite3.Connection | None = None
    """The connection that ran the newest statement."""
    statements: int = 0
    commits: int = 0
    in_transaction: bool = False
    last: str = ""

    def traced(self, conn: sqlite3.Connection, sql: str) -> None:
        self.live = conn
        # A trigger's steps are reported with the text of the statement that fired them.
        if sql == self.last:
            return
        self.last = sql
        self.statements += 1
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head == "BEGIN":
            self.in_transaction = True
        elif head in ("COMMIT", "END", "ROLLBACK"):
            self.commits += head != "ROLLBACK"
            self.in_transaction = False
        elif not self.in_transaction and _writes(head, sql):
            self.commits += 1


def _writes(head: str, sql: str) -> bool:
    if head in WRITES:
        return True
    return head == "WITH" and any(word in sql.upper() for word in WRITES)


class Tracer:
    """Every SQLite connection this process opens, traced per file; every executor call."""

    def __init__(self) -> None:
        self.files: dict[str, FileCounts] = {}
        self.hops = 0

    def install(self) -> None:
        def traced_connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = _connect(database, *args, **kwargs)
            counts = self.files.setdefault(Path(str(database)).name, FileCounts())
            conn.set_trace_callback(lambda sql: counts.traced(conn, sql))
            return conn

        sqlite3.connect = traced_connect  # type: ignore[assignment]
        loop_class = asyncio.get_running_loop().__class__
        run_in_executor = loop_class.run_in_executor

        def counted(loop: Any, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
            self.hops += 1
            return run_in_executor(loop, executor, func, *args)

        loop_class.run_in_executor = counted  # type: ignore[method-assign,assignment]

    def reset(self) -> None:
        self.hops = 0
        for counts in self.files.values():
            counts.statements = counts.commits = 0


@dataclass(frozen=True)
class Row:
    variant: str
    file: str
    mode: str
    synchronous: str
    statements: float
    commits: float
    frames: float


def wal_frames(path: Path) -> int:
    """The frames in the WAL of ``path`` now (a passive checkpoint reports them)."""
    conn = _connect(path, isolation_level=None)
    try:
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        conn.close()


def restart_wal(path: Path) -> None:
    conn = _connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def settings_of(counts: FileCounts) -> tuple[str, str]:
    conn = counts.live
    assert conn is not None
    (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    (level,) = conn.execute("PRAGMA synchronous").fetchone()
    return str(mode), {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))


async def anatomy(
    tracer: Tracer, variant: str, session: Any, files: dict[str, Path], appends: int
) -> tuple[list[Row], float]:
    """Per append of ``session``: a row for each of ``files`` (label: path), and the hops."""
    await session.get_items()
    for turn in range(WARMUP):
        await session.add_items(turn_items(turn))
    for path in files.values():
        restart_wal(path)
    tracer.reset()
    for turn in range(appends):
        await session.add_items(turn_items(WARMUP + turn))
    hops = tracer.hops / appends
    rows = []
    for label, path in files.items():
        counts = tracer.files[path.name]
        statements, commits = counts.statements / appends, counts.commits / appends
        mode, level = settings_of(counts)
        frames = wal_frames(path) / appends
        rows.append(Row(variant, label, mode, level, statements, commits, frames))
    return rows, hops


async def run(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--appends",
        type=int,
        default=100,
        help="appends counted per variant (at most 150, so that no checkpoint runs among them)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.appends <= 150:
        parser.error("--appends must be between 1 and 150")
    set_tracing_disabled(True)
    workdir = Path(tempfile.mkdtemp(prefix="agents-reconcile-anatomy-"))
    print_machine("agents-reconcile: one back-to-back append, counted", workdir, "counts")
    tracer = Tracer()
    tracer.install()

    bare = SQLiteSession("bare", workdir / "bare.db")
    wrapped = wrapped_session(workdir, "wrapped")
    bare_rows, bare_hops = await anatomy(
        tracer, "bare", bare, {"store": workdir / "bare.db"}, args.appends
    )
    wrapped_rows, wrapped_hops = await anatomy(
        tracer,
        "wrapped",
        wrapped,
        {
            "store": workdir / "wrapped.sessions.db",
            "journal": workdir / "wrapped.journal.db",
        },
        args.appends,
    )
    await wrapped.pending()
    await wrapped.journal.close()
    wrapped.inner.close()
    bare.close()

    print_table(
        f"per 3-item append, back to back ({args.appends} appends after {WARMUP} warm-up ones)",
        ["variant", "file", "journal_mode", "synchronous", "statements", "commits", "WAL frames"],
        [
            [
                row.variant,
                row.file,
                row.mode,
                row.synchronous,
                f"{row.statements:.2f}",
                f"{row.commits:.2f}",
                f"{row.frames:.1f}",
            ]
            for row in [*bare_rows, *wrapped_rows]
        ],
    )
    print(f"thread hops per append: bare {bare_hops:.2f}, wrapped {wrapped_hops:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run()))
