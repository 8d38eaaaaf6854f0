"""Every performance figure of the package beside its floor, in one run.

(a) The append, p50 of a 3-item ``add_items``, variants interleaved round by round:
    - SQLite: the bare file ``SQLiteSession``; its floor, that session plus what no write-ahead
      wrapper can avoid (the batch fingerprinted and one tiny commit to a second SQLite file on
      the event loop, WAL and ``synchronous=NORMAL`` as the journal's); and the wrapper around
      it with its default journal. Ratios against the bare session.
    - Redis: the SDK's ``RedisSession``; the floor, one script call that pushes the items and
      moves a counter, after fingerprinting the batch; our ``RevisionedRedisSession`` bare; and
      inside ``ReconcilingSession`` with its journal on the same server. Ratios against the
      SDK's session.
    - PostgreSQL: the SDK's ``SQLAlchemySession`` (asyncpg); the floor, one statement that
      inserts the items, after fingerprinting; our ``RevisionedPostgresSession`` bare and
      wrapped, its journal in the same database. Ratios against the SDK's session.
(b) Throughput, appends per second with 1, 4 and 16 sessions appending at once (one task per
    session, back to back), the SDK's session against the wrapped one on each engine; on SQLite
    the floor's too at 1 session (the same floor as in (a)), and the bare session with
    ``BUSY_US`` of pure CPU before each append (a busy loop, no I/O): what the machine charges
    for work done between one append's fsync and the next, which is the price of any wrapper.
(c) The journal's growth (``journal_growth.py``), when ``--growth`` is given (it fills large
    journals: minutes): the p50 and p99 of append, gate, reconcile, ``status`` and ``show`` with
    0 to 1M other sessions in the journal, and the journal's rows and bytes after 1M sessions
    of 10 turns over a year, before and after pruning with the default retention.

Servers come from ``AGENTS_RECONCILE_TEST_REDIS_URL`` and ``AGENTS_RECONCILE_TEST_POSTGRES_URL``
(``scripts/services.sh start`` prints them); an engine without one is skipped, and said so.

Usage::

    python benchmarks/performance.py              # (a) and (b), a few minutes
    python benchmarks/performance.py --growth     # and (c)
    python benchmarks/performance.py --quick      # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    AppendVariant,
    latency_cells,
    print_machine,
    print_table,
    time_appends,
    turn_items,
    verdict,
    wrapped_session,
)
from agents import SQLiteSession, set_tracing_disabled
from revisioned import Engine, engines

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.fingerprint import journal_batch

SQLITE_AIM = 1.15
"""Wrapped over the bare file SQLiteSession, p50."""
SQLITE_THROUGHPUT_AIM = 0.85
"""Wrapped appends per second over the bare file SQLiteSession's, one session back to back."""
SERVER_AIMS = {"redis": 0.45, "postgres": 0.20}
"""Wrapped (our revisioned store and journal on one server) over the SDK's session, p50."""
POSTGRES_BARE_AIM = 1.8
"""PostgreSQL wrapped over our revisioned store bare, p50 of (a)."""
CONCURRENCY = (1, 4, 16)
BUSY_US = 100
"""The busy variant of (b): microseconds of CPU before each append of the bare session."""


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup: int
    throughput_appends: int
    throughput_trials: int
    growth_sizes: tuple[int, ...]


FULL = Settings(
    rounds=1000,
    warmup=100,
    throughput_appends=1600,
    throughput_trials=3,
    growth_sizes=(0, 10_000, 100_000, 1_000_000),
)
QUICK = Settings(
    rounds=60, warmup=10, throughput_appends=160, throughput_trials=1, growth_sizes=(0, 1_000)
)


# -- floors ----------------------------------------------------------------------------------


class SQLiteFloor:
    """The bare session's append plus what a write-ahead record cannot avoid: the batch
    fingerprinted, and one small commit (a 1 KiB row replaced) to another SQLite file in WAL
    mode with ``synchronous=NORMAL``, on the event loop, before the append."""

    def __init__(self, workdir: Path, session_id: str = "floor", files: str = "floor") -> None:
        self.inner = SQLiteSession(session_id, workdir / f"{files}.sessions.db")
        self._key = session_id
        self._conn = sqlite3.connect(workdir / f"{files}.journal.db", isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS record (key TEXT PRIMARY KEY, body BLOB)")
        self._body = os.urandom(1024)

    async def get_items(self) -> list[Any]:
        return await self.inner.get_items()

    async def add_items(self, items: list[Any]) -> None:
        journal_batch(items)
        self._conn.execute("INSERT OR REPLACE INTO record VALUES (?, ?)", (self._key, self._body))
        await self.inner.add_items(items)

    def close(self) -> None:
        self._conn.close()
        self.inner.close()


class BusyFirst:
    """The bare session with ``BUSY_US`` of CPU spent before each append (no I/O, no await):
    the throughput any wrapper doing that much work per append would get, at best."""

    def __init__(self, inner: SQLiteSession) -> None:
        self.inner = inner

    async def get_items(self) -> list[Any]:
        return await self.inner.get_items()

    async def add_items(self, items: list[Any]) -> None:
        until = time.perf_counter() + BUSY_US / 1e6
        while time.perf_counter() < until:
            pass
        await self.inner.add_items(items)


class RedisFloor:
    """One script call per append (the items pushed, a counter moved), after fingerprinting:
    the least a write-ahead append that takes one round trip can cost."""

    _SCRIPT = "redis.call('RPUSH', KEYS[1], unpack(ARGV)) return redis.call('INCR', KEYS[2])"

    def __init__(self, url: str, prefix: str) -> None:
        import redis.asyncio as redis

        self._client = redis.Redis.from_url(url)
        self._keys = [f"{prefix}:floor:items", f"{prefix}:floor:count"]
        self._script = self._client.register_script(self._SCRIPT)

    async def get_items(self) -> list[Any]:
        return []

    async def add_items(self, items: list[Any]) -> None:
        import orjson

        journal_batch(items)
        await self._script(keys=self._keys, args=[orjson.dumps(item) for item in items])

    async def close(self) -> None:
        await self._client.delete(*self._keys)
        await self._client.aclose()


class PostgresFloor:
    """One statement per append (the items inserted in one round trip on one connection),
    after fingerprinting."""

    def __init__(self, url: str, table: str) -> None:
        self._url = url
        self._table = table
        self._conn: Any = None

    async def get_items(self) -> list[Any]:
        import asyncpg

        if self._conn is None:
            self._conn = await asyncpg.connect(self._url)
            await self._conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{self._table}" '
                "(id bigserial PRIMARY KEY, session_id text NOT NULL, body text NOT NULL)"
            )
        return []

    async def add_items(self, items: list[Any]) -> None:
        import orjson

        journal_batch(items)
        bodies = [orjson.dumps(item).decode() for item in items]
        await self._conn.execute(
            f'INSERT INTO "{self._table}" (session_id, body) SELECT $1, unnest($2::text[])',
            "floor",
            bodies,
        )

    async def close(self) -> None:
        await self._conn.execute(f'DROP TABLE IF EXISTS "{self._table}"')
        await self._conn.close()


# -- (a) the append --------------------------------------------------------------------------


@dataclass
class AppendRow:
    engine: str
    reference: str
    variants: list[AppendVariant] = field(default_factory=list)


async def append_sqlite(workdir: Path, settings: Settings) -> AppendRow:
    bare = SQLiteSession("bare", workdir / "bare.sessions.db")
    floor = SQLiteFloor(workdir)
    wrapped = wrapped_session(workdir, "wrapped")
    row = AppendRow(
        "sqlite",
        "bare SQLiteSession",
        [
            AppendVariant("bare SQLiteSession", bare, []),
            AppendVariant("floor", floor, []),
            AppendVariant("wrapped", wrapped, []),
        ],
    )
    await time_appends(row.variants, settings.rounds, settings.warmup)
    await wrapped.journal.close()
    wrapped.inner.close()
    floor.close()
    bare.close()
    return row


async def append_server(engine: Engine, settings: Settings, floor: Any) -> AppendRow:
    sdk = await engine.sdk(f"perf-sdk-{uuid.uuid4().hex[:6]}")
    ours = await engine.ours(f"perf-ours-{uuid.uuid4().hex[:6]}")
    store = await engine.ours(f"perf-wrapped-{uuid.uuid4().hex[:6]}")
    wrapped = ReconcilingSession(store, config=ReconcileConfig(journal=engine.journal()))
    row = AppendRow(
        engine.name,
        "the SDK's session",
        [
            AppendVariant("the SDK's session", sdk, []),
            AppendVariant("floor", floor, []),
            AppendVariant("ours, bare", ours, []),
            AppendVariant("wrapped", wrapped, []),
        ],
    )
    await time_appends(row.variants, settings.rounds, settings.warmup)
    await sdk.clear_session()
    await close_quietly(sdk)
    await floor.close()
    return row


async def close_quietly(session: Any) -> None:
    closer = getattr(session, "close", None)
    if closer is not None:
        result = closer()
        if asyncio.iscoroutine(result):
            await result


def print_append(rows: Sequence[AppendRow], settings: Settings) -> dict[str, float]:
    """The table; returns each engine's wrapped p50 over its reference's, its floor's as
    '<engine> floor' (and, as 'postgres over ours', PostgreSQL's wrapped over our store
    bare)."""
    table = []
    ratios: dict[str, float] = {}
    for row in rows:
        reference = row.variants[0].samples
        floor = statistics.median(row.variants[1].samples)
        for variant in row.variants:
            cells = latency_cells(variant.samples, reference)
            over_floor = statistics.median(variant.samples) / floor
            table.append([row.engine, variant.name, *cells[:2], cells[3], f"{over_floor:.2f}"])
        ratios[row.engine] = statistics.median(row.variants[-1].samples) / statistics.median(
            reference
        )
        ratios[f"{row.engine} floor"] = floor / statistics.median(reference)
        if row.engine == "postgres":
            bare = next(v.samples for v in row.variants if v.name == "ours, bare")
            ratios["postgres over ours"] = statistics.median(
                row.variants[-1].samples
            ) / statistics.median(bare)
    print_table(
        f"(a) 3-item add_items, {settings.rounds} interleaved rounds after {settings.warmup} "
        "warm-up rounds; 'ratio' against the first row of each engine (the bare SQLiteSession, "
        "the SDK's session on a server), 'over floor' against the floor row",
        ["engine", "variant", "p50 us", "p95 us", "ratio", "over floor"],
        table,
    )
    return ratios


# -- (b) throughput --------------------------------------------------------------------------

Opener = Callable[[str], Awaitable[Any]]


async def appends_per_second(open_session: Opener, sessions: int, appends: int) -> float:
    opened = [await open_session(f"tp-{uuid.uuid4().hex[:10]}") for _ in range(sessions)]
    for session in opened:
        await session.get_items()
    each = max(1, appends // sessions)

    async def worker(session: Any) -> None:
        for turn in range(each):
            await session.add_items(turn_items(turn))

    started = time.perf_counter()
    await asyncio.gather(*(worker(session) for session in opened))
    elapsed = time.perf_counter() - started
    for session in opened:
        if isinstance(session, ReconcilingSession):
            await session.pending()  # its clearings end before the next variant runs
        elif isinstance(session, SQLiteFloor):
            session.close()
    return each * sessions / elapsed


@dataclass(frozen=True)
class Openers:
    """How (b) opens an engine's sessions: the reference, the wrapped, the floor and the busy
    reference (None: none; both run at 1 session only, the throughput aim's case)."""

    reference: Opener
    wrapped: Opener
    floor: Opener | None = None
    busy: Opener | None = None


@dataclass(frozen=True)
class Flow:
    """(b)'s medians for an engine and a count of sessions, appends per second."""

    reference: float
    wrapped: float
    floor: float | None
    busy: float | None = None


async def throughput(
    openers: dict[str, Openers], settings: Settings
) -> dict[tuple[str, int], Flow]:
    """Per engine and count of sessions: the reference's, the wrapped, the floor's and the
    busy reference's appends per second, medians of the trials, the variants' order reversed
    every other trial."""
    results: dict[tuple[str, int], Flow] = {}
    for engine, ways in openers.items():
        for sessions in CONCURRENCY:
            order = [("reference", ways.reference), ("wrapped", ways.wrapped)]
            if sessions == 1:
                extras = [("floor", ways.floor), ("busy", ways.busy)]
                order += [(name, opener) for name, opener in extras if opener is not None]
            samples: dict[str, list[float]] = {name: [] for name, _ in order}
            for trial in range(settings.throughput_trials):
                for name, open_session in order if trial % 2 == 0 else order[::-1]:
                    samples[name].append(
                        await appends_per_second(
                            open_session, sessions, settings.throughput_appends
                        )
                    )
            medians = {name: statistics.median(runs) for name, runs in samples.items()}
            results[engine, sessions] = Flow(
                medians["reference"],
                medians["wrapped"],
                medians.get("floor"),
                medians.get("busy"),
            )
    rows = [
        [
            engine,
            str(sessions),
            f"{flow.reference:,.0f}",
            f"{flow.wrapped:,.0f}",
            f"{flow.wrapped / flow.reference:.2f}",
            "-" if flow.floor is None else f"{flow.floor / flow.reference:.2f}",
        ]
        for (engine, sessions), flow in results.items()
    ]
    print_table(
        f"(b) appends per second, {settings.throughput_appends} 3-item appends spread over the "
        f"sessions, back to back, median of {settings.throughput_trials} trials (reference: the "
        "bare SQLiteSession; the SDK's session on a server; floor as in (a))",
        [
            "engine",
            "sessions",
            "reference /s",
            "wrapped /s",
            "wrapped/reference",
            "floor/reference",
        ],
        rows,
    )
    return results


# -- the run ---------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> tuple[Settings, str, bool, tuple[int, ...]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small numbers for a smoke run")
    parser.add_argument("--rounds", type=int, help="append rounds per variant in (a)")
    parser.add_argument(
        "--growth", action="store_true", help="also run the journal growth and retention (c)"
    )
    parser.add_argument(
        "--sizes", help="growth sizes, comma-separated (default 0,10000,100000,1000000)"
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        settings = Settings(
            args.rounds,
            settings.warmup,
            settings.throughput_appends,
            settings.throughput_trials,
            settings.growth_sizes,
        )
    sizes = settings.growth_sizes
    if args.sizes:
        sizes = tuple(int(size) for size in args.sizes.split(","))
    return settings, "quick" if args.quick else "full", args.growth, sizes


async def run(argv: Sequence[str] | None = None) -> int:
    settings, mode, growth, sizes = parse(argv)
    set_tracing_disabled(True)
    logging.getLogger("agents_reconcile").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="agents-reconcile-performance-"))
    found, skipped = engines(workdir)
    servers = [engine for engine in found if engine.name != "sqlite"]
    print_machine(
        "agents-reconcile performance: each figure beside its floor",
        workdir,
        mode,
        [("skipped", ", ".join(skipped) or "nothing")],
    )
    namespace = f"perf{uuid.uuid4().hex[:8]}"
    try:
        rows = [await append_sqlite(workdir, settings)]
        for engine in servers:
            if engine.name == "redis":
                floor: Any = RedisFloor(os.environ["AGENTS_RECONCILE_TEST_REDIS_URL"], namespace)
            else:
                floor = PostgresFloor(
                    os.environ["AGENTS_RECONCILE_TEST_POSTGRES_URL"], f"{namespace}_floor"
                )
            rows.append(await append_server(engine, settings, floor))
        ratios = print_append(rows, settings)

        openers: dict[str, Openers] = {
            "sqlite": Openers(
                lambda sid: engines_sqlite_bare(workdir, sid),
                lambda sid: engines_sqlite_wrapped(workdir, sid),
                lambda sid: engines_sqlite_floor(workdir, sid),
                lambda sid: engines_sqlite_busy(workdir, sid),
            )
        }
        for engine in servers:
            openers[engine.name] = Openers(engine.sdk, wrapped_opener(engine))
        flows = await throughput(openers, settings)
    finally:
        for engine in found:
            for step in engine.cleanup:
                await step()

    if growth:
        import dataclasses

        import journal_growth as table

        chosen = table.QUICK if mode == "quick" else table.FULL
        if sizes != settings.growth_sizes:
            chosen = dataclasses.replace(chosen, sizes=tuple(sorted({0, *sizes})))
        print("(c) the journal's growth and retention (benchmarks/journal_growth.py)\n")
        await table.run(chosen, list(table.ENGINES), mode)
        print()

    print("summary")
    print(
        f"  {verdict(ratios['sqlite'] <= SQLITE_AIM)}: SQLite wrapped at most {SQLITE_AIM}x bare "
        f"(measured {ratios['sqlite']:.2f}x, the floor {ratios['sqlite floor']:.2f}x)"
    )
    alone = flows["sqlite", 1]
    measured = alone.wrapped / alone.reference
    floor = "" if alone.floor is None else f", the floor {alone.floor / alone.reference:.2f}x"
    print(
        f"  {verdict(measured >= SQLITE_THROUGHPUT_AIM)}: SQLite wrapped throughput at least "
        f"{SQLITE_THROUGHPUT_AIM}x bare, 1 session back to back (measured {measured:.2f}x{floor})"
    )
    if alone.busy is not None:
        # The busy loop's cost per append: the difference of the two times per append.
        charged = (1 / alone.busy - 1 / alone.reference) * 1e6
        print(
            f"    the bare session with {BUSY_US} us of CPU before each append: "
            f"{alone.busy / alone.reference:.2f}x bare; {BUSY_US} us of work between appends "
            f"cost {charged:.0f} us per append here"
        )
    for engine in servers:
        aim = SERVER_AIMS[engine.name]
        print(
            f"  {verdict(ratios[engine.name] <= aim)}: {engine.name} wrapped at most {aim}x the "
            f"SDK's session (measured {ratios[engine.name]:.2f}x, the floor "
            f"{ratios[engine.name + ' floor']:.2f}x)"
        )
        if engine.name == "postgres":
            over = ratios["postgres over ours"]
            print(
                f"  {verdict(over <= POSTGRES_BARE_AIM)}: postgres back to back, wrapped at most "
                f"{POSTGRES_BARE_AIM}x ours bare (measured {over:.2f}x)"
            )
        above = all(
            flows[engine.name, n].wrapped >= flows[engine.name, n].reference for n in CONCURRENCY
        )
        print(
            f"  {verdict(above)}: {engine.name} wrapped throughput at least the SDK's at "
            f"{', '.join(map(str, CONCURRENCY))} sessions"
        )
    if growth:
        print("  the journal growth's verdicts: its own summary, above")
    return 0


async def engines_sqlite_bare(workdir: Path, session_id: str) -> Any:
    return SQLiteSession(session_id, workdir / "throughput-bare.db")


async def engines_sqlite_busy(workdir: Path, session_id: str) -> Any:
    return BusyFirst(SQLiteSession(session_id, workdir / "throughput-busy.db"))


async def engines_sqlite_floor(workdir: Path, session_id: str) -> Any:
    return SQLiteFloor(workdir, session_id, "throughput-floor")


async def engines_sqlite_wrapped(workdir: Path, session_id: str) -> Any:
    inner = SQLiteSession(session_id, workdir / "throughput-wrapped.db")
    return ReconcilingSession(
        inner, config=ReconcileConfig(journal=workdir / "throughput.journal.db")
    )


def wrapped_opener(engine: Engine) -> Opener:
    journal = engine.journal()

    async def open_wrapped(session_id: str) -> Any:
        store = await engine.ours(session_id)
        return ReconcilingSession(store, config=ReconcileConfig(journal=journal))

    return open_wrapped


if __name__ == "__main__":
    sys.exit(asyncio.run(run()))
