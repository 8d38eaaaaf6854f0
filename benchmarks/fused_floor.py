"""What the wrapper's own work costs on Redis and PostgreSQL, beside the one step it sends.

A wrapped append to a revisioned store whose journal lives on the same server is one step: one
script on Redis (``open_and_append.lua``), one statement on PostgreSQL
(``_backends/postgres/fused.py``). Around it runs the wrapper's own work: the checks that keep
its promises (the session's lock, a run's count, what it or the run still holds, a retry of a
write settled elsewhere), its bookkeeping (the intent in flight, the clearing of the previous
one, the head) and the layers between them. This measures the two apart, as ``performance.py``
(a) measures the append: a 3-item ``add_items``, p50 of interleaved rounds beside the SDK's
session (``RedisSession``; ``SQLAlchemySession``), the floor of (a) and our revisioned store
bare.

- run 1: with the wrapped append (``ReconcilingSession``, its journal on the same server), as
  in ``performance.py``;
- run 2: with the step alone: the batch fingerprinted, the intent built and its record encoded,
  the items encoded, and the same script or fast statement sent, with none of the wrapper's
  checks or bookkeeping around it. It is no wrapper (nothing would settle a failed write): the
  least any wrapper sending this step can cost.

Two runs per engine, because variants that share the journal's keys or tables warm the server
for each other.

Servers come from ``AGENTS_RECONCILE_TEST_REDIS_URL`` and ``AGENTS_RECONCILE_TEST_POSTGRES_URL``
(``scripts/services.sh start`` prints them); an engine without one is skipped, and said so.

Usage::

    python benchmarks/fused_floor.py             # about two minutes
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
from performance import PostgresFloor, RedisFloor
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


class StepAlone:
    """A fused append's step with nothing of the wrapper around it: each append fingerprints
    its batch, builds and encodes its intent and sends the step (clearing the previous intent
    in the same step, as a wrapper's next append does)."""

    def __init__(self, journal: Any, store: Any) -> None:
        self.journal = journal
        self.store = store
        self.backend = BackendIdentity("benchmark step alone", store.backend_namespace)
        self.owner = current_owner()
        self.head = 0
        self.previous: str | None = None

    async def add_items(self, items: list[Any]) -> None:
        batch, digests = journal_batch(items)
        intent = PendingWrite.fresh(
            intent_id=new_write_id(),
            session_id=self.store.session_id,
            backend=self.backend,
            batch=batch,
            batch_digests=digests,
            before_digests=(),
            before_is_whole=False,
            created_at=time.time(),
            expected_revision=self.head,
        )
        self.head = await self.step(intent, items)
        self.previous = intent.intent_id

    async def step(self, intent: PendingWrite, items: list[Any]) -> int:
        """Send the step for ``intent``; the store's new head."""
        raise NotImplementedError

    async def close(self) -> None:
        return None


class ScriptAlone(StepAlone):
    """Redis: ``open_and_append.lua`` through the journal's ``open_by_script``."""

    async def get_items(self) -> list[Any]:
        await self.journal.migrate()
        self.keys = await self.store.prepared()
        return []

    async def step(self, intent: PendingWrite, items: list[Any]) -> int:
        args: list[str | bytes] = ["", self.previous or "", str(self.head), str(self.owner), ""]
        args += [encode_item(item, index) for index, item in enumerate(items)]
        reply = await self.journal.open_by_script(
            "open_and_append",
            intent,
            state=IntentState.IN_FLIGHT,
            owner=self.owner,
            args=args,
            keys=self.keys,
            answer=lambda reply: (reply, False),
        )
        if not (isinstance(reply, list) and reply[0] in (b"recorded", "recorded")):
            raise RuntimeError(f"the script wrote nothing ({reply!r}): the session moved")
        return int(reply[2])


class StatementAlone(StepAlone):
    """PostgreSQL: the fast statement, on one connection of the journal's pool."""

    async def get_items(self) -> list[Any]:
        journal, store = self.journal, self.store
        await journal.migrate()
        await store.ready()
        pool = await journal.database.connections.get()
        self.conn = await pool.pool.acquire()
        self.sql = fused.fast_statement(journal.schema, store.schema)
        rows = fused.rows_statement(journal.schema, store.schema)
        await self.conn.execute(rows, store.session_id, str(self.backend), store.session_id)
        return []

    async def step(self, intent: PendingWrite, items: list[Any]) -> int:
        rows = [encode_item(item, index).decode() for index, item in enumerate(items)]
        found = await self.conn.fetch(
            self.sql,
            *intent_args(intent, IntentState.IN_FLIGHT, self.owner),
            self.previous,
            None,
            self.store.session_id,
            rows,
            self.head,
            str(self.owner),
            time.time(),
        )
        if not found:
            raise RuntimeError("the fast statement wrote nothing: the session moved")
        return int(found[0]["revision"])

    async def close(self) -> None:
        pool = await self.journal.database.connections.get()
        await pool.pool.release(self.conn)


async def one_run(engine: Engine, settings: Settings, wrapped: bool) -> list[AppendVariant]:
    """One interleaved run: the SDK's session, the floor, ours bare, then the wrapped append
    or the step alone."""
    tag = uuid.uuid4().hex[:6]
    sdk = await engine.sdk(f"floor-sdk-{tag}")
    floor: Any
    if engine.name == "redis":
        floor = RedisFloor(os.environ["AGENTS_RECONCILE_TEST_REDIS_URL"], f"fused-floor-{tag}")
    else:
        floor = PostgresFloor(os.environ["AGENTS_RECONCILE_TEST_POSTGRES_URL"], f"ff_{tag}")
    ours = await engine.ours(f"floor-ours-{tag}")
    store = await engine.ours(f"floor-subject-{tag}")
    journal = engine.journal()
    subject: Any
    if wrapped:
        subject = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
    elif engine.name == "redis":
        subject = ScriptAlone(journal, store)
    else:
        subject = StatementAlone(journal, store)
    alone = "script alone" if engine.name == "redis" else "statement alone"
    variants = [
        AppendVariant("the SDK's session", sdk, []),
        AppendVariant("floor", floor, []),
        AppendVariant("ours, bare", ours, []),
        AppendVariant("wrapped" if wrapped else alone, subject, []),
    ]
    try:
        await time_appends(variants, settings.rounds, settings.warmup)
    finally:
        await sdk.clear_session()
        await floor.close()
        if isinstance(subject, StepAlone):
            await subject.close()
    return variants


async def run(argv: list[str] | None = None) -> int:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    set_tracing_disabled(True)
    logging.getLogger("agents_reconcile").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="agents-reconcile-fused-floor-"))
    found, skipped = engines(workdir)
    servers = [engine for engine in found if engine.name != "sqlite"]
    print_machine(
        "agents-reconcile: the wrapper's own work beside the step it sends",
        workdir,
        mode,
        [("skipped", ", ".join(skipped) or "nothing")],
    )
    table = []
    summary = []
    try:
        for engine in servers:
            runs = [await one_run(engine, settings, wrapped) for wrapped in (True, False)]
            medians = []
            for number, variants in enumerate(runs, start=1):
                sdk = statistics.median(variants[0].samples)
                bare = statistics.median(variants[2].samples)
                for variant in variants:
                    p50 = statistics.median(variant.samples)
                    cells = [f"{p50 / 1000:.1f}", f"{p50 / sdk:.3f}", f"{p50 / bare:.2f}"]
                    table.append([engine.name, str(number), variant.name, *cells])
                medians.append((statistics.median(variants[-1].samples), sdk, bare))
            (wrapped_p50, sdk_1, bare_1), (alone_p50, sdk_2, bare_2) = medians
            summary.append(
                f"  {engine.name}: the step alone {alone_p50 / sdk_2:.3f}x the SDK's session, "
                f"{alone_p50 / bare_2:.2f}x ours bare; the wrapped append "
                f"{wrapped_p50 / sdk_1:.3f}x and {wrapped_p50 / bare_1:.2f}x; the wrapper's own "
                f"work {wrapped_p50 / bare_1 - alone_p50 / bare_2:.2f}x ours bare"
            )
    finally:
        for engine in found:
            for step in engine.cleanup:
                await step()
    print_table(
        f"3-item add_items, {settings.rounds} interleaved rounds after {settings.warmup} warm-up "
        "rounds, two runs per engine; ratios against the SDK's session and our store bare of "
        "the same run",
        ["engine", "run", "variant", "p50 us", "/ the SDK's", "/ ours bare"],
        table,
    )
    print("summary")
    for line in summary or ["  no server engine: nothing measured"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run()))
