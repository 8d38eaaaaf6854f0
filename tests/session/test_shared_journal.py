"""A fleet's shared journal on Redis or PostgreSQL: any worker finds and settles what another
left, on the SDK's own sessions and on revisioned stores, through the real runner."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import Outcome, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.registry import backend_for
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import namespace, registered
from ..support.servers import redis_url, server_url


@pytest.fixture(params=[p for p in registered("journal") if p.values[0].server])
async def journal_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The address of each registered server journal, in a namespace of its own."""
    backend = request.param
    url = server_url(backend)
    space = namespace()
    yield f"{url}?{space}"
    cleanup: Any = backend.open_journal(url, namespace=space)
    await cleanup.drop()
    await cleanup.close()


def journal_for(address: str) -> Any:
    url, space = address.rsplit("?", 1)
    return backend_for(url, what="journal").open_journal(url, namespace=space)


STORES = ["sqlite_session", "revisioned_sqlite"]


def store(kind: str, tmp_path: Path) -> Any:
    if kind == "sqlite_session":
        return SQLiteSession("s", tmp_path / "chat.db")
    return RevisionedSQLiteSession("s", tmp_path / "revisioned.db")


def worker(kind: str, tmp_path: Path, address: str, *, faulty: bool = False) -> Any:
    inner = store(kind, tmp_path)
    if faulty:
        inner = FaultInjectingSession(inner)
    return ReconcilingSession(inner, config=ReconcileConfig(journal=journal_for(address)))


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("fault", [Fault.LOST_ACK, Fault.REJECT], ids=lambda f: f.value)
async def test_another_worker_settles_what_one_left(
    journal_url: str, kind: str, fault: Fault, tmp_path: Path
) -> None:
    one = worker(kind, tmp_path, journal_url, faulty=True)
    one.inner.plan(fault)
    with pytest.raises(BackendFailure):
        await one.add_items([{"role": "user", "content": "paid"}])
    two = worker(kind, tmp_path, journal_url)
    [entry] = await two.pending()
    [decision] = await two.reconcile()
    assert decision.intent_id == entry.intent_id
    expected = Outcome.COMMITTED if fault is Fault.LOST_ACK else Outcome.UNCHANGED
    assert decision.outcome is expected
    assert await one.pending() == []
    assert [i["content"] for i in await store(kind, tmp_path).get_items()] == ["paid"]


@pytest.mark.parametrize("kind", STORES)
async def test_a_run_through_a_server_journal(journal_url: str, kind: str, tmp_path: Path) -> None:
    """Runner.run end to end; acknowledged intents are cleared, so the next worker neither
    waits for nor sees them."""
    one = worker(kind, tmp_path, journal_url)
    agent = Agent(
        name="a", model=ScriptedModel([[assistant_message("x")], [assistant_message("y")]])
    )
    await Runner.run(agent, "first", session=one, run_config=one.run_config())
    assert await one.pending() == []
    two = worker(kind, tmp_path, journal_url)
    started = time.monotonic()
    await Runner.run(agent, "second", session=two, run_config=two.run_config())
    assert time.monotonic() - started < 2.0, "no wait for an acknowledged intent"
    assert len(await store(kind, tmp_path).get_items()) == 4


@pytest.mark.redis
async def test_a_journal_url_in_the_config(tmp_path: Path) -> None:
    """ReconcileConfig(journal="redis://...") opens the shared journal (default namespace)."""
    url = redis_url()
    from agents_reconcile._backends.redis.journal import RedisJournal

    session = ReconcilingSession(
        SQLiteSession(f"s-{uuid.uuid4().hex}", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=url),
    )
    assert isinstance(session.journal, RedisJournal)
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session.pending() == []
    await session.journal.drop()  # type: ignore[attr-defined]
    await session.journal.close()


@pytest.mark.redis
def test_run_sync_with_a_server_journal_leaves_nothing_pending(tmp_path: Path) -> None:
    """``Runner.run_sync`` runs each run on a loop of its own; the journal follows."""
    import asyncio

    from agents_reconcile._backends.redis.journal import RedisJournal

    journal = RedisJournal.from_url(redis_url(), prefix=f"sync{uuid.uuid4().hex[:12]}")
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    steps = [[assistant_message(text)] for text in ("x", "y", "z")]
    agent = Agent(name="a", model=ScriptedModel(steps))
    for text in ("one", "two", "three"):
        Runner.run_sync(agent, text, session=session, run_config=session.run_config())
        # What another process sees once run_sync returned: no intent left in flight (the
        # loop's clearings finished before it stopped).
        fresh = RedisJournal.from_url(redis_url(), prefix=journal.prefix)
        assert asyncio.run(fresh.pending("s")) == []
    assert asyncio.run(session.pending()) == []
    assert len(asyncio.run(session.inner.get_items())) == 6
    asyncio.run(journal.drop())
