"""Revisioned stores against the SDK's own sessions, and what revisions do to ambiguity.

(a) Per-append cost, interleaved in one run, for each engine that is available: the SDK's
    session (``SQLiteSession``; ``RedisSession``; ``SQLAlchemySession`` on PostgreSQL through
    asyncpg), our revisioned store on the same engine (bare: a compare-and-swap append that
    records its write id), and our store inside ``ReconcilingSession`` with its journal on the
    same engine (the fleet setup: write-ahead intent, CAS append, intent cleared).
(b) The false-AMBIGUOUS rate: a write fails (its acknowledgement lost, or rejected), another
    writer appends, then the session reconciles. Fingerprints cannot tell that extension from
    damage; the record of writes can. Fingerprint mode (``SQLiteSession``) against revisioned
    mode (each revisioned store available).

Servers come from ``AGENTS_RECONCILE_TEST_REDIS_URL`` and ``AGENTS_RECONCILE_TEST_POSTGRES_URL``
(``scripts/services.sh start`` prints them); an engine without one is skipped, and said so.

Usage::

    python benchmarks/revisioned.py             # full run (about a minute)
    python benchmarks/revisioned.py --quick     # smoke run
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    AppendVariant,
    latency_cells,
    print_machine,
    print_table,
    rounds_settings,
    time_appends,
    verdict,
)

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.records import Outcome
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

SERVER_AIM = 0.5
"""Our revisioned store inside the wrapper, as a share of the SDK's session's time (Redis and
PostgreSQL, where the SDK makes several round trips per append)."""


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup: int
    trials: int


FULL = Settings(rounds=500, warmup=50, trials=200)
QUICK = Settings(rounds=40, warmup=5, trials=20)


@dataclass
class Engine:
    name: str
    sdk: Callable[[str], Awaitable[Any]]
    ours: Callable[[str], Awaitable[Any]]
    journal: Callable[[], Any]
    cleanup: list[Callable[[], Awaitable[None]]]


def engines(workdir: Path) -> tuple[list[Engine], list[str]]:
    found: list[Engine] = []
    skipped: list[str] = []
    namespace = f"bench{uuid.uuid4().hex[:8]}"

    async def sqlite_sdk(sid: str) -> Any:
        from agents import SQLiteSession

        return SQLiteSession(sid, workdir / "sdk.db")

    async def sqlite_ours(sid: str) -> Any:
        from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession

        return RevisionedSQLiteSession(sid, workdir / "ours.db")

    found.append(Engine("sqlite", sqlite_sdk, sqlite_ours, lambda: workdir / "journal.db", []))

    redis_url = os.environ.get("AGENTS_RECONCILE_TEST_REDIS_URL")
    if redis_url:
        cleanup: list[Callable[[], Awaitable[None]]] = []

        async def redis_sdk(sid: str) -> Any:
            from agents.extensions.memory import RedisSession

            return RedisSession.from_url(sid, url=redis_url, key_prefix=f"{namespace}:sdk")

        async def redis_ours(sid: str) -> Any:
            from agents_reconcile._backends.redis.store import RevisionedRedisSession

            store = RevisionedRedisSession.from_url(sid, redis_url, prefix=f"{namespace}-ours")
            cleanup.append(store.drop)
            return store

        def redis_journal() -> Any:
            from agents_reconcile._backends.redis.journal import RedisJournal

            journal = RedisJournal.from_url(redis_url, prefix=f"{namespace}-journal")
            cleanup.append(journal.drop)
            return journal

        found.append(Engine("redis", redis_sdk, redis_ours, redis_journal, cleanup))
    else:
        skipped.append("redis (set AGENTS_RECONCILE_TEST_REDIS_URL)")

    postgres_url = os.environ.get("AGENTS_RECONCILE_TEST_POSTGRES_URL")
    if postgres_url:
        pg_cleanup: list[Callable[[], Awaitable[None]]] = []

        async def pg_sdk(sid: str) -> Any:
            from agents.extensions.memory import SQLAlchemySession

            url = postgres_url.replace("postgresql://", "postgresql+asyncpg://", 1)
            session = SQLAlchemySession.from_url(
                sid,
                url=url,
                create_tables=True,
                sessions_table=f"{namespace}_sessions",
                messages_table=f"{namespace}_messages",
            )

            async def drop_tables() -> None:
                from sqlalchemy import text

                async with session._engine.begin() as connection:
                    for table in ("messages", "sessions"):
                        await connection.execute(
                            text(f'DROP TABLE IF EXISTS "{namespace}_{table}"')
                        )
                await session._engine.dispose()

            pg_cleanup.append(drop_tables)
            return session

        async def pg_ours(sid: str) -> Any:
            from agents_reconcile._backends.postgres.store import RevisionedPostgresSession

            store = RevisionedPostgresSession.from_url(
                sid, postgres_url, schema=f"{namespace}_ours"
            )
            pg_cleanup.append(store.drop)
            return store

        def pg_journal() -> Any:
            from agents_reconcile._backends.postgres.journal import PostgresJournal

            journal = PostgresJournal.from_url(postgres_url, schema=f"{namespace}_journal")
            pg_cleanup.append(journal.drop)
            return journal

        found.append(Engine("postgres", pg_sdk, pg_ours, pg_journal, pg_cleanup))
    else:
        skipped.append("postgres (set AGENTS_RECONCILE_TEST_POSTGRES_URL)")
    return found, skipped


async def append_costs(found: list[Engine], settings: Settings) -> bool:
    rows = []
    met = True
    for engine in found:
        sdk = AppendVariant(f"SDK session ({engine.name})", await engine.sdk("bench-sdk"), [])
        ours = AppendVariant("ours, bare", await engine.ours("bench-ours"), [])
        wrapped_store = await engine.ours("bench-wrapped")
        wrapped = ReconcilingSession(
            wrapped_store, config=ReconcileConfig(journal=engine.journal())
        )
        ours_wrapped = AppendVariant("ours, in ReconcilingSession", wrapped, [])
        variants = [sdk, ours, ours_wrapped]
        await time_appends(variants, settings.rounds, settings.warmup)
        for variant in variants:
            rows.append([engine.name, variant.name, *latency_cells(variant.samples, sdk.samples)])
        share = statistics.median(ours_wrapped.samples) / statistics.median(sdk.samples)
        if engine.name != "sqlite":
            met = met and share <= SERVER_AIM
        await sdk.session.clear_session()
        closer = getattr(sdk.session, "close", None)
        if closer is not None:
            result = closer()
            if asyncio.iscoroutine(result):
                await result
    print_table(
        f"(a) 3-item add_items, {settings.rounds} interleaved rounds per variant after "
        f"{settings.warmup} warm-up rounds; ratios against the SDK's session on the same engine",
        ["engine", "variant", "p50 us", "p95 us", "p50 delta us", "ratio p50", "ratio p95"],
        rows,
    )
    return met


async def ambiguity(found: list[Engine], settings: Settings, workdir: Path) -> bool:
    """Trials of: a failed write, another writer's append, reconcile. Counts verdicts."""

    async def fingerprint_store(sid: str) -> Any:
        from agents import SQLiteSession

        return SQLiteSession(sid, workdir / "fingerprint.db")

    modes: list[tuple[str, Callable[[str], Awaitable[Any]], Callable[[], Any]]] = [
        ("fingerprints (SQLiteSession)", fingerprint_store, lambda: workdir / "fp-journal.db")
    ]
    for engine in found:
        modes.append((f"revisioned ({engine.name})", engine.ours, engine.journal))
    rows = []
    exact = True
    for label, opener, journal in modes:
        tally: dict[str, int] = {}
        journal_instance = journal()
        for trial in range(settings.trials):
            sid = f"trial-{trial}-{uuid.uuid4().hex[:6]}"
            faulty = FaultInjectingSession(await opener(sid))
            session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal_instance))
            other = await opener(sid)
            await session.add_items([{"role": "user", "content": f"hello {trial}"}])
            faulty.plan(Fault.LOST_ACK if trial % 2 else Fault.REJECT)
            with contextlib.suppress(BackendFailure):
                await session.add_items([{"role": "assistant", "content": f"answer {trial}"}])
            await other.add_items([{"role": "user", "content": f"another writer {trial}"}])
            try:
                [decision] = await session.reconcile()
                outcome = decision.outcome
            except Exception as denied:
                outcome = getattr(getattr(denied, "decision", None), "outcome", None)
            name = outcome.value if isinstance(outcome, Outcome) else "error"
            tally[name] = tally.get(name, 0) + 1
        ambiguous = tally.get("ambiguous", 0)
        rows.append(
            [
                label,
                str(settings.trials),
                f"{100 * ambiguous / settings.trials:.0f}%",
                ", ".join(f"{k} {v}" for k, v in sorted(tally.items())),
            ]
        )
        if label.startswith("revisioned"):
            exact = exact and ambiguous == 0 and "error" not in tally
    print_table(
        "(b) a failed write (half lost acknowledgements, half rejected), then another writer "
        "appends, then reconcile",
        ["mode", "trials", "AMBIGUOUS", "verdicts"],
        rows,
    )
    return exact


async def main(argv: list[str] | None = None) -> int:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    # Denials are the point of part (b); their warnings would drown the tables.
    logging.getLogger("agents_reconcile").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="agents-reconcile-revisioned-"))
    found, skipped = engines(workdir)
    print_machine(
        "agents-reconcile revisioned stores benchmark",
        workdir,
        mode,
        [("skipped", ", ".join(skipped) or "nothing")],
    )
    try:
        met = await append_costs(found, settings)
        exact = await ambiguity(found, settings, workdir)
    finally:
        for engine in found:
            for step in engine.cleanup:
                await step()
    print("summary")
    print(
        f"  {verdict(met)}: ours inside ReconcilingSession at most {SERVER_AIM}x the SDK's "
        "session at p50 on Redis and PostgreSQL"
    )
    print(f"  {verdict(exact)}: revisioned mode never AMBIGUOUS with an intact record of writes")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
