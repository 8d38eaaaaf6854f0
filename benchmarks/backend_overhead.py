"""What ``ReconcilingSession`` costs on the append path of each SDK session backend.

Prints p50/p95 latency of a 3-item ``add_items`` (a user message, a function_call and a
function_call_output of about 300 bytes each) on each backend the test suite wraps, bare and
and wrapped (write-ahead, as every wrapper is), with the ratios to bare:

- ``agents.SQLiteSession`` on a file,
- ``agents.extensions.memory.AsyncSQLiteSession``,
- ``AdvancedSQLiteSession(create_tables=True)``,
- ``EncryptedSession`` over a file ``SQLiteSession`` (a TTL far beyond the run),
- ``SQLAlchemySession.from_url("sqlite+aiosqlite:///...", create_tables=True)``.

Every variant has its own database (and journal) file in one temporary directory. All
variants run interleaved in one run, one append each per round, the order rotating every
round, so that drift (page cache, CPU frequency, background load) hits them all alike.

Usage::

    python benchmarks/backend_overhead.py            # full run (about a minute)
    python benchmarks/backend_overhead.py --quick    # smoke run, under 10 s
    python benchmarks/backend_overhead.py --rounds 3000
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import statistics
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    WRITE_AHEAD_P50_AIM,
    AppendVariant,
    latency_cells,
    package_version,
    print_machine,
    print_table,
    rounds_settings,
    time_appends,
    verdict,
    wrapped_session,
)
from agents import SQLiteSession, set_tracing_disabled

from agents_reconcile import ReconcileConfig, ReconcilingSession

ENCRYPTION_KEY = "agents-reconcile-benchmark-key-0123456789abcdef"
ENCRYPTION_TTL = 10 * 365 * 24 * 3600  # seconds: nothing may expire during the run
DURABILITIES: tuple[str, ...] = ("write_ahead",)
"""The wrapped variants (one: every wrapper records its intent before the append)."""


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup_rounds: int


FULL = Settings(rounds=1000, warmup_rounds=50)
QUICK = Settings(rounds=40, warmup_rounds=5)


# -- backends --------------------------------------------------------------------------------


async def open_sqlite(session_id: str, path: Path) -> Any:
    return SQLiteSession(session_id, path)


async def open_async_sqlite(session_id: str, path: Path) -> Any:
    from agents.extensions.memory import AsyncSQLiteSession

    return AsyncSQLiteSession(session_id, path)


async def open_advanced_sqlite(session_id: str, path: Path) -> Any:
    from agents.extensions.memory import AdvancedSQLiteSession

    return AdvancedSQLiteSession(session_id=session_id, db_path=path, create_tables=True)


async def open_encrypted_sqlite(session_id: str, path: Path) -> Any:
    from agents.extensions.memory import EncryptedSession

    return EncryptedSession(
        session_id=session_id,
        underlying_session=SQLiteSession(session_id, path),
        encryption_key=ENCRYPTION_KEY,
        ttl=ENCRYPTION_TTL,
    )


async def open_sqlalchemy_sqlite(session_id: str, path: Path) -> Any:
    from agents.extensions.memory import SQLAlchemySession

    return SQLAlchemySession.from_url(
        session_id, url=f"sqlite+aiosqlite:///{path}", create_tables=True
    )


@dataclass(frozen=True)
class Backend:
    name: str
    label: str
    opener: Callable[[str, Path], Awaitable[Any]]


BACKENDS = (
    Backend("sqlite", "SQLiteSession (file)", open_sqlite),
    Backend("async_sqlite", "AsyncSQLiteSession", open_async_sqlite),
    Backend("advanced_sqlite", "AdvancedSQLiteSession", open_advanced_sqlite),
    Backend("encrypted_sqlite", "EncryptedSession over SQLiteSession", open_encrypted_sqlite),
    Backend("sqlalchemy_sqlite", "SQLAlchemySession (sqlite+aiosqlite)", open_sqlalchemy_sqlite),
)


async def close_store(session: Any) -> None:
    """Release what a bare session holds: connections, worker threads, engines."""
    store = getattr(session, "underlying_session", session)
    closer = getattr(store, "close", None)
    if callable(closer):
        result = closer()
        if inspect.isawaitable(result):
            await result
    engine = getattr(store, "engine", None)  # SQLAlchemySession's AsyncEngine
    if engine is not None:
        await engine.dispose()


@dataclass
class Measured:
    backend: Backend
    durability: str  # "bare" or a durability
    variant: AppendVariant


async def open_variants(workdir: Path, measured: list[Measured]) -> None:
    """Open bare and wrapped for every backend (appending to ``measured`` as
    they open, so that the caller can close what did open if one fails)."""
    for backend in BACKENDS:
        name = f"{backend.name}-bare"
        bare = await backend.opener(name, workdir / f"{name}.sessions.db")
        measured.append(Measured(backend, "bare", AppendVariant(name, bare, [])))
        for durability in DURABILITIES:
            name = f"{backend.name}-{durability}"
            inner = await backend.opener(name, workdir / f"{name}.sessions.db")
            try:
                session = wrapped_session(workdir, name, inner=inner)
            except BaseException:
                await close_store(inner)
                raise
            measured.append(Measured(backend, durability, AppendVariant(name, session, [])))


async def close_variants(measured: Sequence[Measured]) -> None:
    """Check that nothing was left pending, then close every store, journal and engine."""
    problems: list[str] = []
    for entry in measured:
        session = entry.variant.session
        wrapped = isinstance(session, ReconcilingSession)
        try:
            if wrapped:
                try:
                    leftover = await session.pending()
                    if leftover:
                        problems.append(f"{entry.variant.name}: {len(leftover)} intents pending")
                finally:
                    await session.journal.close()
        except Exception as exc:  # close the rest before reporting
            problems.append(f"{entry.variant.name}: journal: {exc!r}")
        try:
            await close_store(session.inner if wrapped else session)
        except Exception as exc:
            problems.append(f"{entry.variant.name}: closing failed: {exc!r}")
    if problems:
        raise RuntimeError("; ".join(problems))


# -- main ------------------------------------------------------------------------------------


async def bench(workdir: Path, settings: Settings) -> dict[tuple[str, str], float]:
    measured: list[Measured] = []
    try:
        await open_variants(workdir, measured)
        # Store sizes and contents stay the same across variants: every variant appends the
        # same batch in the same round.
        await time_appends([m.variant for m in measured], settings.rounds, settings.warmup_rounds)
        for entry in measured:
            stored = len(await entry.variant.session.get_items())
            expected = 3 * (settings.rounds + settings.warmup_rounds)
            if stored != expected:
                raise RuntimeError(f"{entry.variant.name}: {stored} items, expected {expected}")
    finally:
        await close_variants(measured)

    ratios: dict[tuple[str, str], float] = {}
    rows: list[list[str]] = []
    for backend in BACKENDS:
        group = {m.durability: m.variant.samples for m in measured if m.backend is backend}
        bare = group["bare"]
        for durability, samples in group.items():
            ratios[backend.name, durability] = statistics.median(samples) / statistics.median(bare)
            label = backend.label if durability == "bare" else ""
            rows.append([label, durability, *latency_cells(samples, bare)])
    variant_count = len(measured)
    print_table(
        f"3-item add_items latency per backend, {settings.rounds} interleaved rounds of "
        f"{variant_count} variants after {settings.warmup_rounds} warm-up rounds (each "
        f"variant's history grows to {3 * (settings.rounds + settings.warmup_rounds):,} items; "
        "ratios against the same backend bare)",
        ["backend", "variant", "p50 us", "p95 us", "p50 delta us", "ratio p50", "ratio p95"],
        rows,
    )
    defaults = ReconcileConfig()
    settings_text = ", ".join(
        f"{field.name}={getattr(defaults, field.name)!r}"
        for field in dataclasses.fields(defaults)
        if field.name not in ("enabled", "journal", "backend_identity")
    )
    note = (
        "note: every backend commits to a file on the same disk, so the bare times and the "
        "ratios depend on its fsync latency; the p50 delta is the wrapper's own cost. The "
        "wrapped variants use one journal file each and ReconcileConfig defaults otherwise: "
        f"{settings_text}."
    )
    print(textwrap.fill(note, width=90, initial_indent="  ", subsequent_indent="  ") + "\n")
    return ratios


async def run(settings: Settings, mode: str) -> None:
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-bench-") as directory:
        workdir = Path(directory)
        print_machine(
            "agents-reconcile backend overhead benchmark",
            workdir,
            mode,
            extra=[
                ("aiosqlite", package_version("aiosqlite")),
                ("sqlalchemy", package_version("sqlalchemy")),
                ("cryptography", package_version("cryptography")),
            ],
        )
        run_started = time.perf_counter()
        ratios = await bench(workdir, settings)

        print("summary")
        for durability in DURABILITIES:
            values = {b.label: ratios[b.name, durability] for b in BACKENDS}
            low = min(values, key=values.__getitem__)
            high = max(values, key=values.__getitem__)
            within = sum(value <= WRITE_AHEAD_P50_AIM for value in values.values())
            print(
                f"  {durability}: p50 ratio to bare from {values[low]:.3f}x ({low}) to "
                f"{values[high]:.3f}x ({high}); within {WRITE_AHEAD_P50_AIM}x on {within} of "
                f"{len(values)} backends"
            )
        write_ahead = [ratios[b.name, "write_ahead"] for b in BACKENDS]
        print(
            f"  {verdict(max(write_ahead) <= WRITE_AHEAD_P50_AIM)}: write_ahead p50 within "
            f"{WRITE_AHEAD_P50_AIM}x bare on every backend (worst {max(write_ahead):.3f}x)"
        )
        print(f"\ntotal time {time.perf_counter() - run_started:.1f} s")


def main(argv: Sequence[str] | None = None) -> None:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    set_tracing_disabled(True)
    asyncio.run(run(settings, mode))


if __name__ == "__main__":
    main()
