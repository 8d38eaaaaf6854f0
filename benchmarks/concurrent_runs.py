"""What many concurrent runs on one session cost, one session object each (a web app that
builds one per request), bare and wrapped.

Each job is N concurrent ``Runner.run`` calls on one file and one session id, each through its
own session object, with a scripted model that calls a tool and then answers (four appends per
run: the input, the tool call, its output, the answer). The variants run interleaved, job by job:

- bare ``SQLiteSession``;
- ``ReconcilingSession`` around it, default configuration (write-ahead, the tail remembered and
  vouched for by the journal's write count; the embedded SQLite journal);
- the same with ``verify_tail=True`` (the tail re-read before every append).

Prints the median wall time of a job per N, its ratio to the bare job, and checks that every
job stored each run's four items exactly once.

Usage::

    python benchmarks/concurrent_runs.py            # full run (about a minute)
    python benchmarks/concurrent_runs.py --quick    # smoke run, a few seconds
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import print_machine, print_table, rounds_settings, verdict
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_reconcile import ReconcileConfig, ReconcilingSession


@dataclass(frozen=True)
class Settings:
    rounds: int
    concurrency: tuple[int, ...]


FULL = Settings(rounds=15, concurrency=(1, 4, 8, 16))
QUICK = Settings(rounds=2, concurrency=(1, 4))

# A wrapped job may take this many times the bare one before the benchmark calls it missed.
RATIO_AIM = 2.0


def agent_for(run: int) -> Agent[Any]:
    @function_tool
    def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    model = ScriptedModel(
        [
            [function_call("lookup", {"query": f"q{run}"}, call_id=f"call-{run}")],
            [assistant_message(f"answer {run}")],
        ]
    )
    return Agent(name="assistant", model=model, tools=[lookup])


Opener = Callable[[str], Any]


def variants(workdir: Path) -> dict[str, Opener]:
    store = workdir / "chat.db"
    journal = workdir / "journal.db"

    def bare(session_id: str) -> Any:
        return SQLiteSession(session_id, store)

    def wrapped(session_id: str) -> Any:
        return ReconcilingSession(bare(session_id), config=ReconcileConfig(journal=journal))

    def verify_tail(session_id: str) -> Any:
        config = ReconcileConfig(journal=journal, verify_tail=True)
        return ReconcilingSession(bare(session_id), config=config)

    return {"bare SQLiteSession": bare, "wrapped (default)": wrapped, "verify_tail": verify_tail}


async def job(open_session: Opener, store: Path, session_id: str, runs: int) -> float:
    """Run ``runs`` concurrent runs on ``session_id``; return the wall time in seconds."""

    async def one(run: int) -> None:
        session = open_session(session_id)
        config = session.run_config() if isinstance(session, ReconcilingSession) else None
        await Runner.run(agent_for(run), f"hello {run}", session=session, run_config=config)

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(one(run) for run in range(runs))), timeout=120)
    elapsed = time.perf_counter() - started
    stored = await SQLiteSession(session_id, store).get_items()
    if len(stored) != 4 * runs or len({str(item) for item in stored}) != 4 * runs:
        sys.exit(f"{session_id}: expected {4 * runs} distinct items, found {len(stored)}")
    return elapsed


async def run(settings: Settings, mode: str) -> None:
    set_tracing_disabled(True)
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-concurrent-") as directory:
        workdir = Path(directory)
        print_machine("Concurrent runs on one session, one session object each", workdir, mode)
        openers = variants(workdir)
        times: dict[tuple[str, int], list[float]] = {}
        for runs in settings.concurrency:
            for round_index in range(settings.rounds + 1):  # the first round warms up
                names = list(openers)
                # Rotate who goes first, so no variant always follows the same neighbour.
                rotation = round_index % len(names)
                for name in names[rotation:] + names[:rotation]:
                    session_id = f"{name}-{runs}-{round_index}"
                    elapsed = await job(openers[name], workdir / "chat.db", session_id, runs)
                    if round_index:
                        times.setdefault((name, runs), []).append(elapsed)
        rows = []
        worst = 0.0
        for runs in settings.concurrency:
            bare = statistics.median(times[("bare SQLiteSession", runs)])
            for name in openers:
                median = statistics.median(times[(name, runs)])
                ratio = median / bare
                if name != "bare SQLiteSession":
                    worst = max(worst, ratio)
                rows.append(
                    [
                        str(runs),
                        name,
                        f"{median * 1000:.1f}",
                        f"{4 * runs / median:.0f}",
                        f"{ratio:.2f}",
                    ]
                )
        print_table(
            f"Job wall time, median of {settings.rounds} jobs per row",
            ["runs", "variant", "ms per job", "appends/s", "ratio to bare"],
            rows,
        )
        print(f"  {verdict(worst <= RATIO_AIM)}: every wrapped job within {RATIO_AIM}x bare")


def main(argv: Sequence[str] | None = None) -> None:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    asyncio.run(run(settings, mode))


if __name__ == "__main__":
    main()
