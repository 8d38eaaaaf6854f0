"""What the wrapper's own work costs on PostgreSQL, beside the fused statement it sends.

The wrapped PostgreSQL append is one statement (``_backends/postgres/fused.py``) and the
wrapper's work around it: the checks that keep its promises (the session's lock, a run's count,
what it or the run still holds, a retry of a write settled elsewhere), its bookkeeping (the
intent in flight, the clearing of the previous one, the head) and the layers between them. This
measures the two apart, as ``performance.py`` (a) measures the append: a 3-item ``add_items``,
p50 of interleaved rounds beside the SDK's ``SQLAlchemySession``, the floor (one statement that
inserts the items, after fingerprinting) and our ``RevisionedPostgresSession`` bare.

- run 1: with the wrapped append (``ReconcilingSession``, its journal in the same database),
  as in ``performance.py``;
- run 2: with the statement alone: the batch fingerprinted, the intent built and its record
  encoded, the items encoded, and the same fast statement sent on one connection, none of the
  wrapper's checks or bookkeeping around it. It is no wrapper (nothing would settle a failed
  write): the least any wrapper sending this statement can cost.

Two runs, because variants that share the journal's tables warm the server for each other.

Needs ``AGENTS_RECONCILE_TEST_POSTGRES_URL`` (``scripts/services.sh start`` prints it).

Usage::

    python benchmarks/fused_floor.py             # about a minute
    python benchmarks/fused_floor.py --quick     # smoke run
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import AppendVariant, print_machine, print_table, rounds_settings, time_appends
from agents import set_tracing_disabled
from performance import PostgresFloor
from revisioned import Engine, engines

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.postgres import fused
from agents_reconcile._backends.postgres.statements import intent_args
from agents_reconcile._backends.store_items import encode_item
from agents_reconcile._core.fingerprint import journal_batch
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import BackendIdentity, PendingWrite, new_write_id


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup: int


FULL = Settings(rounds=400, warmup=100)
QUICK = Settings(rounds=40, warmup=10)


class StatementAlone:
    """The fused append's statement with nothing of the wrapper around it: each append
    fingerprints its batch, builds and encodes its intent, encodes its items and sends the fast
    statement on one connection (clearing the previous intent in the same statement, as a
    wrapper's next append does)."""

    def __init__(self, journal: Any, store: Any) -> None:
        self._journal = journal
        self._store = store
        self._backend = BackendIdentity("benchmark statement alone", store.backend_namespace)
        self._owner = current_owner()
        self._conn: Any = None
        self._sql = ""
        self._head = 0
        self._previous: str | None = None

    async def get_items(self) -> list[Any]:
        journal, store = self._journal, self._store
        await journal.migrate()
        await store.ready()
        pool = await journal.database.connections.get()
        self._conn = await pool.pool.acquire()
        self._sql = fused.fast_statement(journal.schema, store.schema)
        rows = fused.rows_statement(journal.schema, store.schema)
        await self._conn.execute(rows, store.session_id, str(self._backend), store.session_id)
        return []

    async def add_items(self, items: list[Any]) -> None:
        batch, digests = journal_batch(items)
        intent = PendingWrite.fresh(
            intent_id=new_write_id(),
            session_id=self._store.session_id,
            backend=self._backend,
            batch=batch,
            batch_digests=digests,
            before_digests=(),
            before_is_whole=False,
            created_at=time.time(),
            expected_revision=self._head,
        )
        rows = [encode_item(item, index).decode() for index, item in enumerate(items)]
        args = intent_args(intent, IntentState.IN_FLIGHT, self._owner)
        owner = str(self._owner)
        found = await self._conn.fetch(
            self._sql,
            *args,
            self._previous,
            None,
            self._store.session_id,
            rows,
            self._head,
            owner,
            time.time(),
        )
        if not found:
            raise RuntimeError("the fast statement wrote nothing: this benchmark's session moved")
        self._head, self._previous = found[0]["revision"], intent.intent_id

    async def close(self) -> None:
        if self._conn is not None:
            pool = await self._journal.database.connections.get()
            await pool.pool.release(self._conn)


async def one_run(engine: Engine, settings: Settings, url: str, last: str) -> list[AppendVariant]:
    """One interleaved run: the SDK's session, the floor, ours bare, then ``last``."""
    tag = uuid.uuid4().hex[:6]
    sdk = await engine.sdk(f"floor-sdk-{tag}")
    floor = PostgresFloor(url, f"fused_floor_{tag}")
    ours = await engine.ours(f"floor-ours-{tag}")
    store = await engine.ours(f"floor-{last.split()[0]}-{tag}")
    journal = engine.journal()
    subject: Any
    if last == "wrapped":
        subject = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
    else:
        subject = StatementAlone(journal, store)
    variants = [
        AppendVariant("the SDK's session", sdk, []),
        AppendVariant("floor", floor, []),
        AppendVariant("ours, bare", ours, []),
        AppendVariant(last, subject, []),
    ]
    try:
        await time_appends(variants, settings.rounds, settings.warmup)
    finally:
        await sdk.clear_session()
        await floor.close()
        if isinstance(subject, StatementAlone):
            await subject.close()
    return variants


async def run(argv: list[str] | None = None) -> int:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    url = os.environ.get("AGENTS_RECONCILE_TEST_POSTGRES_URL")
    if not url:
        print("skipped: set AGENTS_RECONCILE_TEST_POSTGRES_URL (scripts/services.sh start)")
        return 0
    set_tracing_disabled(True)
    logging.getLogger("agents_reconcile").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="agents-reconcile-fused-floor-"))
    found, _ = engines(workdir)
    engine = next(each for each in found if each.name == "postgres")
    print_machine("agents-reconcile: the wrapper's own work beside its statement", workdir, mode)
    try:
        runs = [
            await one_run(engine, settings, url, "wrapped"),
            await one_run(engine, settings, url, "statement alone"),
        ]
    finally:
        for step in engine.cleanup:
            await step()
    table = []
    medians: dict[str, float] = {}
    for number, variants in enumerate(runs, start=1):
        sdk = statistics.median(variants[0].samples)
        bare = statistics.median(variants[2].samples)
        for variant in variants:
            p50 = statistics.median(variant.samples)
            ratios = [f"{p50 / 1000:.1f}", f"{p50 / sdk:.3f}", f"{p50 / bare:.2f}"]
            table.append([str(number), variant.name, *ratios])
        medians[variants[-1].name] = statistics.median(variants[-1].samples)
        medians[f"bare {number}"] = bare
    print_table(
        f"3-item add_items on PostgreSQL, {settings.rounds} interleaved rounds after "
        f"{settings.warmup} warm-up rounds, in two runs",
        ["run", "variant", "p50 us", "/ the SDK's", "/ ours bare"],
        table,
    )
    wrapper = medians["wrapped"] / medians["bare 1"]
    alone = medians["statement alone"] / medians["bare 2"]
    print("summary")
    print(f"  the statement alone: {alone:.2f}x ours bare; the wrapped append: {wrapper:.2f}x")
    print(
        f"  the wrapper's own work: {wrapper - alone:.2f}x ours bare (about "
        f"{(wrapper - alone) * medians['bare 1'] / 1000:.0f} us at run 1's ours bare)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run()))
