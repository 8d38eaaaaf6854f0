"""How the wrapper's costs grow with the journal: a growth table per journal engine.

For journals holding 0, 10,000, 100,000 and 1,000,000 other sessions (1% of them holding an
abandoned intent: in flight, owned by a process on a host long gone, a day old; another 1% a
settled decision of an earlier failure), prints the p50 of:

(1) ``append``: a 3-item ``add_items`` on a fresh session (``ReconcilingSession`` around a
    file ``SQLiteSession``, whatever the journal's engine: the store stays the same, only the
    journal under test changes);
(2) ``gate``: the admission check the SDK's runner makes before every model call (the
    ``call_model_input_filter`` that ``run_config()`` installs) on that session, nothing
    pending;
(3) ``reconcile``: ``reconcile()`` of one failed intent (the append rejected, so replayed);
(4) ``status``: the operator's view (``agents-reconcile status``: a page of 50 pending intents
    and started effects), as a function, and end to end through the command (process start
    included) on the empty and on the largest journal,

each beside the empty journal's figure as a ratio, and the journal's bytes once filled (the
SQLite file, the PostgreSQL schema's tables with their indexes, the Redis server's memory grown
by the fill). The journals of every size are filled
first, then measured in rounds rotating across sizes, so drift hits them alike. They are
filled in bulk in the journal's own schema, with rows built by the journal's own encoding
(``PendingWrite.encode``, ``Decision.encode``, the SQLite journal's row builder, the Redis
layout), and the engine's own reads decode a sample of them before anything is timed.

Engines: SQLite (a file in a temporary directory), PostgreSQL (``AGENTS_RECONCILE_TEST_
POSTGRES_URL``; a schema of its own, dropped afterwards) and Redis (``AGENTS_RECONCILE_TEST_
REDIS_URL``; a key prefix of its own, deleted afterwards). An engine without its variable is
skipped, and said so.

Usage::

    python benchmarks/growth.py                         # 0, 10k, 100k, 1M; every engine
    python benchmarks/growth.py --quick                 # 0 and 1,000: a smoke run
    python benchmarks/growth.py --sizes 0,100000 --engines sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    AppendVariant,
    microseconds,
    print_machine,
    print_table,
    time_appends,
    turn_items,
    verdict,
)
from _growth_engines import ENGINES, Engine, unavailable
from agents import Agent, SQLiteSession, set_tracing_disabled
from agents.run import CallModelData, ModelInputData

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._operator import views
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

FLAT_AIM = 1.20  # append, gate and reconcile at the largest size / at 0
STATUS_AIM_S = 1.0  # status at the largest size, end to end
EMPTY_STATUS_AIM_S = 0.3  # status on an empty journal, end to end
LEASE = 30.0


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    appends: int
    gates: int
    reconciles: int
    statuses: int
    commands: int


FULL = Settings((0, 10_000, 100_000, 1_000_000), 400, 400, 150, 30, 9)
QUICK = Settings((0, 1_000), 60, 100, 20, 5, 3)


@dataclass
class Sized:
    """One journal of one size, and what is measured on it."""

    size: int
    journal: Any
    appender: ReconcilingSession
    failing: ReconcilingSession
    faulty: FaultInjectingSession
    append: list[int] = field(default_factory=list)
    gate: list[int] = field(default_factory=list)
    reconcile: list[int] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    command: list[float] = field(default_factory=list)
    footprint: int = 0
    """The journal's bytes where it is kept (a file, a schema's tables, a server's memory)."""


async def open_sized(engine: Engine, size: int, workdir: Path) -> Sized:
    journal = await engine.journal(size)
    config = ReconcileConfig(journal=journal)
    name = f"{engine.name}-{size}"
    appender = ReconcilingSession(
        SQLiteSession(f"fresh-{name}", workdir / f"{name}.db"), config=config
    )
    faulty = FaultInjectingSession(SQLiteSession(f"failing-{name}", workdir / f"{name}-f.db"))
    failing = ReconcilingSession(faulty, config=config)
    if not appender.enabled:
        sys.exit("AGENTS_RECONCILE switches reconciliation off; unset it to benchmark the wrapper")
    return Sized(size, journal, appender, failing, faulty)


async def timed(operation: Callable[[], Awaitable[Any]]) -> int:
    started = time.perf_counter_ns()
    await operation()
    return time.perf_counter_ns() - started


async def measure(sized: list[Sized], settings: Settings) -> None:
    """Every measurement, in rounds rotating across the sizes."""
    variants = [AppendVariant(str(s.size), s.appender, s.append) for s in sized]
    await time_appends(variants, settings.appends, max(settings.appends // 10, 5))
    agent = Agent(name="growth")
    data = CallModelData(
        model_data=ModelInputData(input=[], instructions=None), agent=agent, context=None
    )
    gates = [s.appender.run_config().call_model_input_filter for s in sized]
    for round_index in range(settings.gates + 10):
        for offset in range(len(sized)):
            at = (round_index + offset) % len(sized)
            gate = gates[at]
            assert gate is not None
            elapsed = await timed(lambda gate=gate: gate(data))
            if round_index >= 10:
                sized[at].gate.append(elapsed)
    for round_index in range(settings.reconciles + 2):
        for offset in range(len(sized)):
            one = sized[(round_index + offset) % len(sized)]
            one.faulty.plan(Fault.REJECT)
            try:
                await one.failing.add_items(turn_items(round_index))
            except BackendFailure:
                pass
            else:
                raise RuntimeError("the injected rejection did not fire")
            elapsed = await timed(one.failing.reconcile)
            if round_index >= 2:
                one.reconcile.append(elapsed)
            if await one.failing.pending():
                raise RuntimeError(f"reconcile() left an intent pending at {one.size}")
    for round_index in range(settings.statuses + 2):
        for offset in range(len(sized)):
            one = sized[(round_index + offset) % len(sized)]
            elapsed = await timed(
                lambda one=one: views.status(one.journal, session_id=None, lease_seconds=LEASE)
            )
            if round_index >= 2:
                one.status.append(elapsed)


def time_command(engine: Engine, sized: Sized, runs: int, workdir: Path) -> None:
    """``agents-reconcile status`` end to end, process start included, with its bytecode
    cached as an installed package has it (in the temporary directory, whatever
    ``PYTHONDONTWRITEBYTECODE`` says: compiling every module on every start is not what a
    deployment pays)."""
    command = [str(Path(sys.executable).with_name("agents-reconcile")), "status"]
    command += engine.command_options(sized.size)
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(workdir / "bytecode")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for _ in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        elapsed = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")
        sized.command.append(elapsed)
    sized.command.pop(0)  # the first compiles the bytecode and warms the page cache


def p50(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def report(engine: Engine, sized: list[Sized]) -> list[str]:
    """The engine's growth table; the summary lines it gives."""
    empty = sized[0]
    rows = []
    for one in sized:
        row = [f"{one.size:,}"]
        for name in ("append", "gate", "reconcile"):
            mine, base = p50(getattr(one, name)), p50(getattr(empty, name))
            row += [f"{microseconds(mine):.0f}", f"{mine / base:.2f}x"]
        mine, base = p50(one.status), p50(empty.status)
        row += [f"{mine / 1e6:.2f}", f"{mine / base:.2f}x"]
        row.append(f"{p50(one.command):.2f}" if one.command else "-")
        row.append(f"{one.footprint / 2**20:,.1f}")
        rows.append(row)
    header = ["other sessions", "append us", "vs 0", "gate us", "vs 0", "reconcile us", "vs 0"]
    header += ["status ms", "vs 0", "status e2e s", "journal MiB"]
    print_table(
        f"{engine.title}: p50 of {len(empty.append)} appends, {len(empty.gate)} gate checks, "
        f"{len(empty.reconcile)} reconciles, {len(empty.status)} status views "
        f"(a page of 50) and {len(empty.command)} status commands per size",
        header,
        rows,
    )
    largest = sized[-1]
    lines = []
    for name in ("append", "gate", "reconcile"):
        ratio = p50(getattr(largest, name)) / p50(getattr(empty, name))
        lines.append(
            f"  {verdict(ratio <= FLAT_AIM)}: {engine.name} {name} at {largest.size:,} other "
            f"sessions is {ratio:.2f}x the empty journal's (aim: within {FLAT_AIM}x)"
        )
    big, small = p50(largest.command), p50(empty.command)
    lines.append(
        f"  {verdict(big < STATUS_AIM_S)}: {engine.name} status end to end at "
        f"{largest.size:,} other sessions takes {big:.2f} s (aim: under {STATUS_AIM_S:.0f} s; "
        f"the view itself {p50(largest.status) / 1e6:.1f} ms)"
    )
    lines.append(
        f"  {verdict(small < EMPTY_STATUS_AIM_S)}: {engine.name} status end to end on an empty "
        f"journal takes {small:.2f} s (aim: under {EMPTY_STATUS_AIM_S} s)"
    )
    return lines


async def bench_engine(engine: Engine, settings: Settings, workdir: Path) -> list[str]:
    sizes = settings.sizes
    for note in await engine.prepare(max(sizes)):
        print(f"  {note}")
    sized: list[Sized] = []
    try:
        for size in sizes:
            started = time.perf_counter()
            await engine.fill(size)
            sized.append(await open_sized(engine, size, workdir))
            await engine.check(size, sized[-1].journal)
            sized[-1].footprint = await engine.footprint(size)
            took = time.perf_counter() - started
            print(f"  {engine.name}: {size:,} other sessions filled and checked in {took:.1f} s")
        print()
        await measure(sized, settings)
        for one in (sized[0], sized[-1]):
            await asyncio.to_thread(time_command, engine, one, settings.commands, workdir)
        return report(engine, sized)
    finally:
        for one in sized:
            for store in (one.appender.inner, one.faulty.inner):
                store.close()
        await engine.cleanup()


def settings_from(argv: Sequence[str] | None) -> tuple[Settings, list[str], str]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 0 and 1,000: a smoke run")
    parser.add_argument(
        "--sizes", help="how many other sessions, comma-separated (default 0,10000,100000,1000000)"
    )
    parser.add_argument(
        "--engines", default=",".join(ENGINES), help="comma-separated: sqlite,postgres,redis"
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.sizes:
        try:
            sizes = tuple(sorted({int(size.replace("_", "")) for size in args.sizes.split(",")}))
        except ValueError:
            parser.error(f"--sizes takes whole numbers, not {args.sizes!r}")
        if not sizes or sizes[0] != 0:
            sizes = (0, *sizes)  # every figure is a ratio to the empty journal's
        settings = Settings(
            sizes,
            *(
                getattr(settings, f)
                for f in ("appends", "gates", "reconciles", "statuses", "commands")
            ),
        )
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    unknown = [name for name in engines if name not in ENGINES]
    if unknown:
        parser.error(f"unknown engine {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    return settings, engines, "quick" if args.quick else "full"


async def run(settings: Settings, engines: list[str], mode: str) -> None:
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-growth-") as directory:
        workdir = Path(directory)
        print_machine(
            "agents-reconcile growth benchmark",
            workdir,
            mode,
            [("sizes", ", ".join(f"{size:,}" for size in settings.sizes))],
        )
        started = time.perf_counter()
        summary: list[str] = []
        for name in engines:
            skipped = unavailable(name)
            if skipped:
                summary.append(f"  skipped: {name}: {skipped}")
                print(f"{name}: skipped: {skipped}\n")
                continue
            engine = ENGINES[name](workdir)
            print(f"{engine.title}")
            summary += await bench_engine(engine, settings, workdir)
        print("summary")
        for line in summary:
            print(line)
        print(f"\ntotal time {time.perf_counter() - started:.1f} s")


def main(argv: Sequence[str] | None = None) -> None:
    settings, engines, mode = settings_from(argv)
    set_tracing_disabled(True)
    os.environ.pop("AGENTS_RECONCILE", None)
    asyncio.run(run(settings, engines, mode))


if __name__ == "__main__":
    main()
