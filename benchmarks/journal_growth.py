"""How the wrapper's costs grow with the journal, and what retention keeps of it: per journal
engine, a growth table and a retention figure.

The growth table. For journals holding 0, 10,000, 100,000 and 1,000,000 other sessions (each
appended once a day ago, its count stamped then; 1% of them hold an abandoned intent: in
flight, owned by a process on a host long gone; another 1% a settled decision of an earlier
failure), prints the p50 and the p99 of:

(1) ``append``: a 3-item ``add_items`` on a fresh session (``ReconcilingSession`` around a
    file ``SQLiteSession``, whatever the journal's engine: the store stays the same, only the
    journal under test changes);
(2) ``gate``: the admission check the SDK's runner makes before every model call (the
    ``call_model_input_filter`` that ``run_config()`` installs) on that session, nothing
    pending;
(3) ``reconcile``: ``reconcile()`` of one failed intent (the append rejected, so replayed);
(4) ``status``: the operator's view (``agents-reconcile status``: a page of 50 pending intents
    and started effects, ``views.status``), as a function;
(5) ``show``: the operator's ``show`` of one pending intent by id, as a function: what
    ``agents-reconcile show`` does between opening and closing the journal (``showing._show``:
    the id looked up, the intent read, its decisions, the view built with its resolutions and
    the commands that make them);

each beside the empty journal's figure as a ratio (aim: within 1.20), ``status`` end to end
through the command (process start included) on the empty and on the largest journal, and the
journal's bytes once filled (the SQLite file, the PostgreSQL schema's tables with their
indexes, the Redis server's memory grown by the fill). The journals of every size are filled
first, then measured in rounds rotating across sizes, so drift hits them alike. The wrappers
prune in the background as in a deployment (the default retention: nothing of a day old is
due).

The retention figure. A journal of N sessions (1,000,000; 2,000 with ``--quick``), each of
which made 10 turns, the sessions spread evenly over the past 365 days: each session's write
count (20 writes, stamped at its last turn), one settled decision per 100 turns, one tool
call's receipt per session, and one session in 1,000 with an abandoned intent (never pruned).
Its rows by kind and its bytes are measured, then ``prune(Retention(), limit=10_000)`` (30
days each) is called until it answers done, timed, and both are measured again. Every row
removed is checked against the times the fill gave it, and every abandoned intent must still
be pending afterwards (the run fails otherwise).

Both fill in bulk, in the journal's own schema, rows built by the journal's own encoding and
row builders (``_growth_fills``), and read a sample back through the journal before anything
is timed. Engines: SQLite (a file in a temporary directory), PostgreSQL
(``AGENTS_RECONCILE_TEST_POSTGRES_URL``; schemas of its own, dropped afterwards) and Redis
(``AGENTS_RECONCILE_TEST_REDIS_URL``; key prefixes of its own, deleted afterwards). An engine
without its variable is skipped, and said so.

Usage::

    python benchmarks/journal_growth.py               # both; 0 to 1M, 1M sessions; every engine
    python benchmarks/journal_growth.py --quick       # 0 and 1,000; 2,000 sessions: a smoke run
    python benchmarks/journal_growth.py --growth --sizes 0,100000 --engines sqlite,postgres
    python benchmarks/journal_growth.py --retention --sessions 300000 --engines redis
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from _common import AppendVariant, print_machine, time_appends, turn_items
from _growth_engines import ENGINES, Engine, unavailable
from _growth_fills import BACKEND, DAY_AGO, GONE, check_sample, growth_sessions
from _growth_report import report
from _retention_figure import REDIS_BYTES_PER_SESSION, retention_engine
from agents import Agent, SQLiteSession, set_tracing_disabled
from agents.run import CallModelData, ModelInputData

from agents_reconcile import ReconcileConfig, ReconcilingSession, Retention
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._cli import _parser
from agents_reconcile._operator import showing, views
from agents_reconcile._operator.ids import full_id
from agents_reconcile._operator.resolving import find_effect
from agents_reconcile.conformance._records import make_intent
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

LEASE = 30.0
GROWTH_REDIS_BYTES = 250
"""About the server memory a growth fill takes per other session (its count's hash, and the
1% of intents and decisions), measured on Redis 7."""


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    appends: int
    gates: int
    reconciles: int
    statuses: int
    shows: int
    commands: int
    sessions: int
    """The retention figure's sessions."""


SECTIONS = {"growth", "retention"}
"""The parts of the run: the growth table, the retention figure."""
FULL = Settings((0, 10_000, 100_000, 1_000_000), 1000, 1000, 300, 200, 200, 9, 1_000_000)
QUICK = Settings((0, 1_000), 60, 100, 20, 20, 20, 3, 2_000)


@dataclass
class Sized:
    """One journal of one size, and what is measured on it."""

    size: int
    journal: Any
    appender: ReconcilingSession
    failing: ReconcilingSession
    faulty: FaultInjectingSession
    show_args: argparse.Namespace
    append: list[int] = field(default_factory=list)
    gate: list[int] = field(default_factory=list)
    reconcile: list[int] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    show: list[int] = field(default_factory=list)
    command: list[float] = field(default_factory=list)
    footprint: int = 0
    """The journal's bytes where it is kept (a file, a schema's tables, a server's memory)."""


def label(size: int) -> str:
    return f"g{size}"


async def open_sized(engine: Engine, size: int, workdir: Path) -> Sized:
    journal = await engine.journal(label(size))
    config = ReconcileConfig(journal=journal)
    name = f"{engine.name}-{size}"
    appender = ReconcilingSession(
        SQLiteSession(f"fresh-{name}", workdir / f"{name}.db"), config=config
    )
    faulty = FaultInjectingSession(SQLiteSession(f"failing-{name}", workdir / f"{name}-f.db"))
    failing = ReconcilingSession(faulty, config=config)
    if not appender.enabled:
        sys.exit("AGENTS_RECONCILE switches reconciliation off; unset it to benchmark the wrapper")
    # The command's own parsing of `show INTENT --journal ...`, the id filled in later.
    args = _parser().parse_args(["show", "-", *engine.command_options(label(size))])
    return Sized(size, journal, appender, failing, faulty, args)


async def show_view(journal: Any, args: argparse.Namespace) -> dict[str, Any]:
    """What ``agents-reconcile show`` does for a pending intent between opening and closing
    the journal (``showing._show``): the id as typed made whole, not an effect's, the intent
    read, then its view."""
    ident = await full_id(journal, args.intent)
    if await find_effect(journal, ident) is not None:
        raise RuntimeError(f"{ident} names an effect")
    entry = await journal.get(ident)
    if entry is None:
        raise RuntimeError(f"no pending intent {ident}")
    return await showing._show_intent(journal, entry, args)


async def timed(operation: Callable[[], Awaitable[Any]]) -> int:
    started = time.perf_counter_ns()
    await operation()
    return time.perf_counter_ns() - started


async def rotate(
    sized: list[Sized], rounds: int, warmup: int, step: Callable[[Sized, int], Awaitable[int]]
) -> list[list[int]]:
    """``step`` on every size, ``warmup + rounds`` rounds, each round starting one size further
    on; the times of the last ``rounds``, by size."""
    times: list[list[int]] = [[] for _ in sized]
    for round_index in range(warmup + rounds):
        for offset in range(len(sized)):
            at = (round_index + offset) % len(sized)
            elapsed = await step(sized[at], round_index)
            if round_index >= warmup:
                times[at].append(elapsed)
    return times


async def measure(sized: list[Sized], settings: Settings) -> None:
    """Every measurement, in rounds rotating across the sizes."""
    variants = [AppendVariant(str(s.size), s.appender, s.append) for s in sized]
    await time_appends(variants, settings.appends, max(settings.appends // 10, 5))
    data = CallModelData(
        model_data=ModelInputData(input=[], instructions=None),
        agent=Agent(name="growth"),
        context=None,
    )
    gates = {id(s): s.appender.run_config().call_model_input_filter for s in sized}

    async def gate(one: Sized, _: int) -> int:
        check = gates[id(one)]
        assert check is not None
        return await timed(lambda: check(data))

    async def reconcile(one: Sized, round_index: int) -> int:
        one.faulty.plan(Fault.REJECT)
        try:
            await one.failing.add_items(turn_items(round_index))
        except BackendFailure:
            pass
        else:
            raise RuntimeError("the injected rejection did not fire")
        elapsed = await timed(one.failing.reconcile)
        if await one.failing.pending():
            raise RuntimeError(f"reconcile() left an intent pending at {one.size}")
        return elapsed

    async def status(one: Sized, _: int) -> int:
        return await timed(lambda: views.status(one.journal, session_id=None, lease_seconds=LEASE))

    async def show(one: Sized, _: int) -> int:
        return await timed(lambda: show_view(one.journal, one.show_args))

    for name, rounds, warmup, step in (
        ("gate", settings.gates, 10, gate),
        ("reconcile", settings.reconciles, 2, reconcile),
        ("status", settings.statuses, 2, status),
    ):
        for one, times in zip(sized, await rotate(sized, rounds, warmup, step), strict=True):
            getattr(one, name).extend(times)
    # One pending intent to show on every journal, the empty one included (in flight, its
    # owner gone, a day old, as the abandoned ones), recorded through the journal and
    # discarded once shown, so that the commands below see the journals as filled.
    for one in sized:
        shown = make_intent(
            f"{one.size:032x}",
            session_id=f"shown-{one.size}",
            backend=BACKEND,
            created_at=DAY_AGO,
            text="shown",
        )
        await one.journal.record(shown, state=IntentState.IN_FLIGHT, owner=GONE)
        one.show_args.intent = shown.intent_id
    for one, times in zip(sized, await rotate(sized, settings.shows, 2, show), strict=True):
        one.show.extend(times)
    for one in sized:
        await one.journal.discard(one.show_args.intent)


def time_command(engine: Engine, sized: Sized, runs: int, workdir: Path) -> None:
    """``agents-reconcile status`` end to end, process start included, with its bytecode
    cached as an installed package has it (in the temporary directory, whatever
    ``PYTHONDONTWRITEBYTECODE`` says: compiling every module on every start is not what a
    deployment pays)."""
    command = [str(Path(sys.executable).with_name("agents-reconcile")), "status"]
    command += engine.command_options(label(sized.size))
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


async def check_stamps(journal: Any, size: int) -> None:
    """Read the counts' stamps back through the journal: a dry-run prune of idle counts alone
    finds none idle for 25 hours, and nearly all of those it examines idle for 23 (those of
    the 1% with an unresolved intent are kept)."""
    if not size:
        return
    most = min(size, 500)

    async def idle(hours: int) -> int:
        kept = Retention(decisions=None, receipts=None, idle_sessions=timedelta(hours=hours))
        return int((await journal.retention.prune(kept, limit=most, dry_run=True)).write_counts)

    none, nearly_all = await idle(25), await idle(23)
    if none or not 0.95 * most <= nearly_all <= most:
        raise RuntimeError(
            f"the counts' stamps read back wrong: {none} idle for 25 hours, {nearly_all} of "
            f"{most} for 23"
        )


async def bench_engine(engine: Engine, settings: Settings, workdir: Path) -> list[str]:
    sizes = settings.sizes
    for note in await engine.prepare(sum(sizes), GROWTH_REDIS_BYTES):
        print(f"  {note}")
    sized: list[Sized] = []
    try:
        for size in sizes:
            started = time.perf_counter()
            await engine.fill(label(size), growth_sessions(size))
            sized.append(await open_sized(engine, size, workdir))
            sample = [left for chunk in growth_sessions(min(size, 200)) for left in chunk]
            await check_sample(sized[-1].journal, sample)
            await check_stamps(sized[-1].journal, size)
            sized[-1].footprint = await engine.footprint(label(size))
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


def settings_from(argv: Sequence[str] | None) -> tuple[Settings, list[str], str, set[str]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="sizes 0 and 1,000, 2,000 sessions: a smoke run"
    )
    parser.add_argument("--growth", action="store_true", help="only the growth table")
    parser.add_argument("--retention", action="store_true", help="only the retention figure")
    parser.add_argument(
        "--sizes", help="how many other sessions, comma-separated (default 0,10000,100000,1000000)"
    )
    parser.add_argument(
        "--sessions", type=int, help="the retention figure's sessions (default 1,000,000)"
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
        settings = replace(settings, sizes=sizes)
    if args.sessions is not None:
        if args.sessions < 1:
            parser.error("--sessions must be at least 1")
        settings = replace(settings, sessions=args.sessions)
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    unknown = [name for name in engines if name not in ENGINES]
    if unknown:
        parser.error(f"unknown engine {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    sections = {name for name in ("growth", "retention") if getattr(args, name)}
    return settings, engines, "quick" if args.quick else "full", sections or SECTIONS


async def run(
    settings: Settings, engines: list[str], mode: str, sections: set[str] = SECTIONS
) -> None:
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-growth-") as directory:
        workdir = Path(directory)
        extra = []
        if "growth" in sections:
            extra.append(("sizes", ", ".join(f"{size:,}" for size in settings.sizes)))
        if "retention" in sections:
            extra.append(("retention", f"{settings.sessions:,} sessions x 10 turns"))
        print_machine("agents-reconcile journal growth benchmark", workdir, mode, extra)
        started = time.perf_counter()
        summary: list[str] = []
        for name in engines:
            skipped = unavailable(name)
            if skipped:
                summary.append(f"  skipped: {name}: {skipped}")
                print(f"{name}: skipped: {skipped}\n")
                continue
            engine = ENGINES[name](workdir)
            if "growth" in sections:
                print(f"{engine.title}: the growth table")
                began = time.perf_counter()
                summary += await bench_engine(engine, settings, workdir)
                print(f"  ({engine.name} growth table: {time.perf_counter() - began:.0f} s)\n")
            if "retention" in sections:
                print(f"{engine.title}: the retention figure")
                began = time.perf_counter()
                for note in await engine.prepare(settings.sessions, REDIS_BYTES_PER_SESSION):
                    print(f"  {note}")
                summary += await retention_engine(engine, settings.sessions)
                print(f"  ({engine.name} retention figure: {time.perf_counter() - began:.0f} s)\n")
        print("summary")
        for line in summary:
            print(line)
        print(f"\ntotal time {time.perf_counter() - started:.1f} s")


def main(argv: Sequence[str] | None = None) -> None:
    settings, engines, mode, sections = settings_from(argv)
    set_tracing_disabled(True)
    os.environ.pop("AGENTS_RECONCILE", None)
    asyncio.run(run(settings, engines, mode, sections))


if __name__ == "__main__":
    main()
