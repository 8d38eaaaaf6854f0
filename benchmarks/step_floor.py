"""What the wrapper's own work costs on each engine, beside the one step its journal sends.

Every wrapped append sends one journal step, and a wrapper cannot cost less than that step:
- on SQLite (the SDK's ``SQLiteSession``, the default SQLite journal), the journal's one
  statement that opens the intent, then the session's own append;
- on Redis, one script (``open_and_append.lua``) that opens the intent and appends to a
  revisioned store on the same server;
- on PostgreSQL, one statement (``_backends/postgres/fused.py``) that does the same.

Around the step runs the wrapper's own work: the checks that keep its promises (the session's
lock, a run's count, what it or the run still holds, a retry of a write settled elsewhere), its
bookkeeping (the intent in flight, the clearing of the previous one, the head) and the layers
between them. This measures the two apart, as ``performance.py`` (a) measures the append: a
3-item ``add_items``, p50 of interleaved rounds beside the SDK's session (``SQLiteSession``;
``RedisSession``; ``SQLAlchemySession``), the floor of (a) and, on the server engines, our
revisioned store bare.

Beside those, the wrapped append (``ReconcilingSession``), as in ``performance.py``, and its
step alone: the batch fingerprinted, the intent built and its record encoded, the step sent (on
the server engines the items encoded too, and the store's head kept), with none of the
wrapper's checks or bookkeeping around it. The step alone is no wrapper (nothing would settle a
failed write): the least any wrapper sending this step can cost. As the wrapper's acknowledged
intent is, its previous intent is cleared after each append, outside the timed window: both
time the same step.

On a server engine the two run apart (run 1 the wrapped append, run 2 the step alone), because
variants that share the journal's keys or tables warm the server for each other; on SQLite, in
one run, each on files of its own, because the disk's fsync moves more between runs than the
variants warm each other.

Servers come from ``AGENTS_RECONCILE_TEST_REDIS_URL`` and ``AGENTS_RECONCILE_TEST_POSTGRES_URL``
(``scripts/services.sh start`` prints them); an engine without one is skipped, and said so.

Usage::

    python benchmarks/step_floor.py             # about ten seconds
    python benchmarks/step_floor.py --quick     # smoke run
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
from agents import SQLiteSession, set_tracing_disabled
from performance import PostgresFloor, RedisFloor, SQLiteFloor
from revisioned import Engine, engines

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.postgres import fused
from agents_reconcile._backends.postgres.statements import intent_args
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._backends.store_items import encode_item
from agents_reconcile._core.fingerprint import journal_batch
from agents_reconcile._core.identity import derive_identity
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import BackendIdentity, PendingWrite, new_write_id


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup: int


FULL = Settings(rounds=400, warmup=100)
QUICK = Settings(rounds=40, warmup=10)
WRAPPED = "wrapped"


class StepAlone:
    """An append's journal step with nothing of the wrapper around it: each append
    fingerprints its batch, builds and encodes its intent and sends the step; ``pending()``
    clears the intent afterwards, as a wrapper clears its acknowledged one."""

    def __init__(self, journal: Any, session_id: str, backend: BackendIdentity) -> None:
        self.journal = journal
        self.session_id = session_id
        self.backend = backend
        self.owner = current_owner()
        self.head: int | None = None
        self.tail: tuple[str, ...] = ()
        self.previous: str | None = None

    async def add_items(self, items: list[Any]) -> None:
        batch, digests = journal_batch(items)
        # A wrapper of a store without revisions keeps the history's newest digests before
        # the batch; one of a revisioned store keeps none (the store judges the head).
        before = () if self.head is not None else self.tail[-(len(batch) + 1) :]
        intent = PendingWrite.fresh(
            intent_id=new_write_id(),
            session_id=self.session_id,
            backend=self.backend,
            batch=batch,
            batch_digests=digests,
            before_digests=before,
            before_is_whole=False,
            created_at=time.time(),
            expected_revision=self.head,
        )
        await self.step(intent, items)
        self.tail = (*self.tail, *digests)[-8:]
        self.previous = intent.intent_id

    async def step(self, intent: PendingWrite, items: list[Any]) -> None:
        """Send the step for ``intent`` (keeping the store's new head, where it has one)."""
        raise NotImplementedError

    async def pending(self) -> None:
        previous, self.previous = self.previous, None
        if previous is not None:
            await self.journal.discard(previous, owner=self.owner)

    async def close(self) -> None:
        return None


class StatementThenAppend(StepAlone):
    """SQLite: the journal's opening statement, then the SDK session's own append."""

    def __init__(self, journal: SQLiteJournal, inner: SQLiteSession) -> None:
        super().__init__(journal, inner.session_id, derive_identity(inner))
        self.inner = inner

    async def get_items(self) -> list[Any]:
        return await self.inner.get_items()

    async def step(self, intent: PendingWrite, items: list[Any]) -> None:
        opened = await self.journal.open_intent(
            intent, state=IntentState.IN_FLIGHT, owner=self.owner
        )
        if not opened.recorded:
            raise RuntimeError("the journal recorded nothing: the session moved")
        await self.inner.add_items(items)

    async def close(self) -> None:
        await self.journal.close()


class StoreStepAlone(StepAlone):
    """A step that also appends to a revisioned store on the journal's server, at its head."""

    def __init__(self, journal: Any, store: Any) -> None:
        identity = BackendIdentity("step", store.backend_namespace)
        super().__init__(journal, store.session_id, identity)
        self.store = store
        self.head = 0


class ScriptAlone(StoreStepAlone):
    """Redis: ``open_and_append.lua`` through the journal's ``open_by_script``."""

    async def get_items(self) -> list[Any]:
        await self.journal.migrate()
        self.keys = await self.store.prepared()
        return []

    async def step(self, intent: PendingWrite, items: list[Any]) -> None:
        args: list[str | bytes] = ["", "", str(self.head), str(self.owner), ""]
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
        self.head = int(reply[2])


class StatementAlone(StoreStepAlone):
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

    async def step(self, intent: PendingWrite, items: list[Any]) -> None:
        rows = [encode_item(item, index).decode() for index, item in enumerate(items)]
        found = await self.conn.fetch(
            self.sql,
            *intent_args(intent, IntentState.IN_FLIGHT, self.owner),
            None,
            None,
            self.store.session_id,
            rows,
            self.head,
            str(self.owner),
            time.time(),
        )
        if not found:
            raise RuntimeError("the fast statement wrote nothing: the session moved")
        self.head = int(found[0]["revision"])

    async def close(self) -> None:
        pool = await self.journal.database.connections.get()
        await pool.pool.release(self.conn)


async def sqlite_run(workdir: Path, settings: Settings) -> list[AppendVariant]:
    """The SQLite run: the SDK's session bare, the floor, the wrapped append and the step
    alone, each on files of its own."""
    sdk = SQLiteSession("step-sdk", workdir / "sdk.db")
    floor = SQLiteFloor(workdir)
    inner = SQLiteSession("step-wrapped", workdir / "wrapped.db")
    wrapped = ReconcilingSession(inner, config=ReconcileConfig(journal=workdir / "journal.db"))
    alone = StatementThenAppend(
        SQLiteJournal(workdir / "alone.journal.db"),
        SQLiteSession("step-alone", workdir / "alone.db"),
    )
    variants = [
        AppendVariant("the SDK's session", sdk, []),
        AppendVariant("floor", floor, []),
        AppendVariant(WRAPPED, wrapped, []),
        AppendVariant("statement alone", alone, []),
    ]
    try:
        await time_appends(variants, settings.rounds, settings.warmup)
    finally:
        await alone.close()
        for session in (sdk, floor, inner, alone.inner):
            session.close()
    return variants


async def server_run(engine: Engine, settings: Settings, wrapped: bool) -> list[AppendVariant]:
    """One interleaved run on a server engine: the SDK's session, the floor, ours bare, then
    the wrapped append or the step alone."""
    tag = uuid.uuid4().hex[:6]
    sdk = await engine.sdk(f"floor-sdk-{tag}")
    floor: Any
    if engine.name == "redis":
        floor = RedisFloor(os.environ["AGENTS_RECONCILE_TEST_REDIS_URL"], f"step-floor-{tag}")
    else:
        floor = PostgresFloor(os.environ["AGENTS_RECONCILE_TEST_POSTGRES_URL"], f"sf_{tag}")
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
        AppendVariant(WRAPPED if wrapped else alone, subject, []),
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
    workdir = Path(tempfile.mkdtemp(prefix="agents-reconcile-step-floor-"))
    found, skipped = engines(workdir)
    print_machine(
        "agents-reconcile: the wrapper's own work beside the journal step it sends",
        workdir,
        mode,
        [("skipped", ", ".join(skipped) or "nothing")],
    )
    table = []
    summary = []
    try:
        for engine in found:
            if engine.name == "sqlite":
                runs = [await sqlite_run(workdir, settings)]
            else:
                runs = [await server_run(engine, settings, wrapped) for wrapped in (True, False)]
            measured = {}
            for number, variants in enumerate(runs, start=1):
                sdk = statistics.median(variants[0].samples)
                # Our store bare, on the server engines (SQLite wraps the SDK's session).
                bare = statistics.median(variants[2].samples) if engine.name != "sqlite" else None
                for variant in variants:
                    p50 = statistics.median(variant.samples)
                    over_bare = "-" if bare is None else f"{p50 / bare:.2f}"
                    cells = [f"{p50 / 1000:.1f}", f"{p50 / sdk:.3f}", over_bare]
                    table.append([engine.name, str(number), variant.name, *cells])
                    measured[variant.name] = (p50, sdk, bare)
            alone = next(name for name in measured if name.endswith(" alone"))
            summary.append(summary_line(engine.name, measured[WRAPPED], measured[alone]))
    finally:
        for engine in found:
            for step in engine.cleanup:
                await step()
    print_table(
        f"3-item add_items, {settings.rounds} interleaved rounds after {settings.warmup} warm-up "
        "rounds, two runs per server engine (one on SQLite); ratios against the SDK's session "
        "and our store bare of the same run ('-': SQLite wraps the SDK's session itself)",
        ["engine", "run", "variant", "p50 us", "/ the SDK's", "/ ours bare"],
        table,
    )
    print("summary")
    for line in summary:
        print(line)
    return 0


Measured = tuple[float, float, float | None]
"""A variant's p50, and its run's p50s of the SDK's session and our store bare (None: none)."""


def summary_line(engine: str, wrapped_run: Measured, alone_run: Measured) -> str:
    """The step alone and the wrapped append against the SDK's session (and our store bare),
    and the difference between them: the wrapper's own work."""
    (wrapped, sdk_1, bare_1), (alone, sdk_2, bare_2) = wrapped_run, alone_run
    line = (
        f"  {engine}: the step alone {alone / sdk_2:.3f}x the SDK's session, the wrapped append "
        f"{wrapped / sdk_1:.3f}x; the wrapper's own work {wrapped / sdk_1 - alone / sdk_2:.3f}x"
    )
    if bare_1 is None or bare_2 is None:
        return line
    return (
        f"{line} (against ours bare: the step alone {alone / bare_2:.2f}x, the wrapped append "
        f"{wrapped / bare_1:.2f}x, the wrapper's own work {wrapped / bare_1 - alone / bare_2:.2f}x)"
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(run()))
