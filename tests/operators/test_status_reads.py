"""What a ``status`` page costs the journal: one read per listing, whatever the journal holds
beside the page, each through an index (SQLite's EXPLAIN QUERY PLAN shows no scan of a table,
PostgreSQL's EXPLAIN an index scan for the page)."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile import MemoryJournal
from agents_reconcile._backends.journal import JOURNAL_COMPONENTS
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._operator import views

from ..support.journal_support import STRANGER, make_effect, make_intent
from .test_status_pages import LEASE, fill

_TABLES = ("intents", "decisions", "live", "effects", "set_aside")


class Counting:
    """The in-memory journal (or one of its components), behind a front that counts the calls
    made to it, a component's by its attribute and method (``pages.intents``)."""

    capabilities = MemoryJournal.capabilities

    def __init__(self, inner: Any = None, calls: list[str] | None = None, named: str = "") -> None:
        self.inner = MemoryJournal() if inner is None else inner
        self.calls: list[str] = [] if calls is None else calls
        self.named = named

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name in JOURNAL_COMPONENTS and found is not None:
            return Counting(found, self.calls, f"{name}.")
        if callable(found):
            self.calls.append(self.named + name)
        return found


@pytest.mark.parametrize("count", [12, 400])
async def test_a_status_page_reads_the_journal_once_per_listing_however_many_are_pending(
    count: int,
) -> None:
    journal = Counting()
    await fill(journal, count, denied=(1, count - 1))
    for n in range(30):
        await journal.effects.begin(make_effect(f"call-{n}", owner="gone-host#1/2/3"))
    journal.calls.clear()
    first = await views.status(journal, session_id=None, lease_seconds=LEASE, limit=10)
    assert journal.calls == ["pages.intents", "pages.started_effects"]
    journal.calls.clear()
    await views.status(journal, session_id="user-3", lease_seconds=LEASE, limit=10, after=None)
    await views.status(
        journal, session_id=None, lease_seconds=LEASE, limit=10, after=first["page"]["next"]
    )
    assert journal.calls == ["pages.intents", "pages.started_effects"] * 2


def traced(path: Path, run: Any) -> list[str]:
    """The statements ``run(journal)`` makes an SQLite journal on ``path`` run."""
    ran: list[str] = []

    async def go() -> None:
        journal = SQLiteJournal(path, read_only=True)
        await journal.check()
        journal._file.link._connection().set_trace_callback(ran.append)
        try:
            await run(journal)
        finally:
            journal._file.link._connection().set_trace_callback(None)
            await journal.close()

    asyncio.run(go())
    return [s for s in ran if s.lstrip().upper().startswith(("SELECT", "WITH"))]


def sqlite_filled(tmp_path: Path, count: int) -> Path:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "journal.db"

    async def make() -> None:
        journal = SQLiteJournal(path)
        await fill(journal, count, sessions=count, denied=(3, count - 2))
        for n in range(count // 2):
            await journal.effects.begin(make_effect(f"call-{n}", session_id=f"user-{n}"))
        await journal.close()

    asyncio.run(make())
    return path


def test_a_status_page_runs_the_same_statements_on_a_bigger_sqlite_journal(
    tmp_path: Path,
) -> None:
    """The statements a page runs (and their number) do not depend on how many intents the
    journal holds; the page and what follows it are each one statement per listing."""

    async def page(journal: Any) -> None:
        await views.status(journal, session_id=None, lease_seconds=LEASE, limit=5)

    small = traced(sqlite_filled(tmp_path / "small", 20), page)
    big = traced(sqlite_filled(tmp_path / "big", 600), page)
    assert [_shape(s) for s in small] == [_shape(s) for s in big]
    assert len(big) == 4  # per listing: its page, then what follows it


def _shape(statement: str) -> str:
    """A traced statement without the values bound in it."""
    return re.sub(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b", "?", statement)


def test_no_statement_of_a_status_page_scans_a_table(tmp_path: Path) -> None:
    path = sqlite_filled(tmp_path, 300)

    async def pages(journal: Any) -> None:
        first = await views.status(journal, session_id=None, lease_seconds=LEASE, limit=5)
        await views.status(
            journal, session_id=None, lease_seconds=LEASE, limit=5, after=first["page"]["next"]
        )
        await views.status(journal, session_id="user-7", lease_seconds=LEASE, limit=1)

    statements = set(traced(path, pages))
    assert len(statements) >= 6
    with closing(sqlite3.connect(path)) as conn:
        plans = {s: [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + s)] for s in statements}
    scanning = {
        s: plan
        for s, plan in plans.items()
        if any(
            step.startswith(f"SCAN {table}") or "TEMP B-TREE" in step
            for step in plan
            for table in _TABLES
        )
    }
    assert not scanning, "\n\n".join(f"{s}\n  {p}" for s, p in scanning.items())


# -- PostgreSQL ---------------------------------------------------------------------------------

POSTGRES_URL = os.environ.get("AGENTS_RECONCILE_TEST_POSTGRES_URL")


@pytest.mark.postgres
@pytest.mark.skipif(POSTGRES_URL is None, reason="AGENTS_RECONCILE_TEST_POSTGRES_URL is not set")
async def test_a_status_page_on_postgresql_finds_its_rows_through_an_index() -> None:
    """With thousands of pending intents and started effects, EXPLAIN shows each page's rows
    found by an index scan from the cursor (``slots_unresolved``, ``effects_started``), never
    a scan of the table sorted afterwards, beside as many idle sessions (counts alone)."""
    import asyncpg

    from agents_reconcile._backends.postgres.journal import PostgresJournal
    from agents_reconcile._backends.postgres.pages import page_statements

    assert POSTGRES_URL is not None
    schema = f"status_pages_{uuid.uuid4().hex[:10]}"
    journal = PostgresJournal(POSTGRES_URL, schema=schema)
    await journal.migrate()
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        rows = []
        for n in range(4000):
            intent = make_intent(f"i-{n:05d}", session_id=f"user-{n:05d}", created_at=1e9 + n)
            row = (intent.intent_id, intent.session_id, str(intent.backend), 1, "failed")
            rows.append(
                (*row, str(STRANGER), intent.created_at, intent.created_at, intent.encode(), 0)
            )
        columns = ["intent_id", "session_id", "backend", "slot", "state", "owner", "created_at"]
        columns += ["updated_at", "record", "fence"]
        await conn.copy_records_to_table("slots", records=rows, columns=columns, schema_name=schema)
        # As many idle sessions, their counts alone: in no listing's index.
        idle = [(f"user-{n:05d}", "b", 0, 1, 1e9) for n in range(8000)]
        await conn.copy_records_to_table(
            "slots",
            records=idle,
            columns=["session_id", "backend", "slot", "write_count", "counted_at"],
            schema_name=schema,
        )
        effects = [
            (f"k-{n:05d}", f"user-{n:05d}", "started", "gone/1/1", 1e9 + n, 1e9 + n, b"{}")
            for n in range(4000)
        ]
        await conn.copy_records_to_table(
            "effects",
            records=effects,
            columns=["key", "session_id", "state", "owner", "created_at", "updated_at", "record"],
            schema_name=schema,
        )
        await conn.execute(f"ANALYZE {schema}.slots; ANALYZE {schema}.effects")
        sql = page_statements(f'"{schema}"')
        # (A session's own intents are few: sorting them after the index found them is fine.)
        cases = [
            (sql.intents(False, False), [50], False),
            (sql.intents(False, True), ["user-01000", "b", 0.0, "", 50], False),
            (sql.intents(True, True), ["user-01000", "user-01000", "b", 0.0, "", 50], True),
            (sql.effects(False, False), [50, 1e9 + 3000], False),
            (sql.effects(False, True), [1e9 + 100, "", 50, 1e9 + 3000], False),
        ]
        for statement, args, sorting in cases:
            plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + statement, *args)
            kinds = _nodes(_cte(_json(plan)[0]["Plan"], "page"))
            assert any(kind.startswith("Index") for kind in kinds), (statement, kinds)
            assert "Seq Scan" not in kinds, (statement, kinds)
            assert sorting or "Sort" not in kinds, (statement, kinds)
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
        await journal.close()


def _json(plan: Any) -> Any:
    import json

    return json.loads(plan) if isinstance(plan, str) else plan


def _cte(plan: dict[str, Any], name: str) -> dict[str, Any]:
    if plan.get("Subplan Name") == f"CTE {name}":
        return plan
    for child in plan.get("Plans", []):
        found = _cte(child, name)
        if found:
            return found
    return {}


def _nodes(plan: dict[str, Any]) -> list[str]:
    return [
        plan.get("Node Type", ""),
        *(k for child in plan.get("Plans", []) for k in _nodes(child)),
    ]
