"""Faults only real servers show, on the revisioned Redis and PostgreSQL stores: the reply to a
write lost with the connection, the server killed between the write and its reply, and workers
appending to one session at once. Nothing is duplicated or lost, and with the record of writes
intact nothing is ever ambiguous."""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from agents_reconcile import ContinuationDenied, Outcome, ReconcileConfig, ReconcilingSession
from agents_reconcile._selftest.fleet_hosts import OwnServers
from agents_reconcile.testing import FaultProxy

from ..support.servers import OwnRedis, postgres_url, redis_url

pytestmark = pytest.mark.faults


def item(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def via(url: str, port: int) -> str:
    """``url`` pointed at the proxy on ``port``."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


def open_store(kind: str, url: str, namespace: str) -> Any:
    if kind == "redis":
        from agents_reconcile._backends.redis.store import RevisionedRedisSession

        return RevisionedRedisSession.from_url("s", url, prefix=namespace)
    from agents_reconcile._backends.postgres.store import RevisionedPostgresSession

    return RevisionedPostgresSession.from_url("s", url, schema=namespace, min_size=1, max_size=1)


def server_url(kind: str) -> str:
    return redis_url() if kind == "redis" else postgres_url()


KINDS = [
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture
async def namespace(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    name = f"f{uuid.uuid4().hex[:16]}"
    yield name


async def texts(store: Any) -> list[str]:
    return [entry["content"] for entry in await store.get_items()]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("loss", ["reply_lost", "request_refused"])
async def test_a_dropped_connection_is_settled_exactly(
    kind: str, loss: str, namespace: str, tmp_path: Path
) -> None:
    """The connection drops after the write reached the server (its reply lost) or before it
    did: the next use of the session proves which, and the item is stored exactly once."""
    url = server_url(kind)
    target = urlsplit(url)
    proxy = await FaultProxy(target.hostname or "127.0.0.1", target.port or 0).start()
    store = open_store(kind, via(url, proxy.port), namespace)
    direct = open_store(kind, url, namespace)
    session = ReconcilingSession(store, config=ReconcileConfig(journal=tmp_path / "j.db"))
    try:
        await session.add_items([item("warm-up")])  # connections and scripts are ready
        await session.add_items([item("warm-up 2")])
        if loss == "reply_lost":
            proxy.lose_next_reply()
        else:
            proxy.refuse_next_request()
        with pytest.raises(Exception) as raised:
            await session.add_items([item("paid")])
        assert not isinstance(raised.value, ContinuationDenied)
        assert len(await session.pending()) == 1
        [decision] = await session.reconcile()
        expected = Outcome.COMMITTED if loss == "reply_lost" else Outcome.UNCHANGED
        assert decision.outcome is expected, decision
        assert await texts(direct) == ["warm-up", "warm-up 2", "paid"]
    finally:
        await proxy.close()
        await direct.drop()
        for opened in (store, direct):
            await opened.close()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    """A Redis server of this test's own that logs every write before replying (AOF, fsync
    always), so that killing it loses nothing it acknowledged."""
    server = OwnRedis(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always")
    server.start()
    yield server
    server.stop()


@pytest.mark.redis
async def test_redis_killed_between_the_write_and_its_reply(
    durable_redis: OwnRedis, namespace: str, tmp_path: Path
) -> None:
    """The server runs the append script, logs it, and is killed before its reply leaves.
    Restarted, it still holds the write: the intent is committed, never replayed."""
    redis_url()  # only where the suites have Redis
    from agents_reconcile._backends.redis.store import RevisionedRedisSession

    port = durable_redis.port
    proxy = await FaultProxy("127.0.0.1", port).start()
    store = RevisionedRedisSession.from_url("s", f"redis://127.0.0.1:{proxy.port}/0")
    session = ReconcilingSession(store, config=ReconcileConfig(journal=tmp_path / "j.db"))

    async def kill_server() -> None:
        durable_redis.kill()

    try:
        await session.add_items([item("warm-up")])
        proxy.lose_next_reply(kill_server)
        with pytest.raises(Exception) as raised:
            await session.add_items([item("paid")])
        assert not isinstance(raised.value, ContinuationDenied)
        await asyncio.to_thread(durable_redis.start)
        [decision] = await session.reconcile()
        assert decision.outcome is Outcome.COMMITTED
        direct = RevisionedRedisSession.from_url("s", f"redis://127.0.0.1:{port}/0")
        assert await texts(direct) == ["warm-up", "paid"]
        await direct.close()
    finally:
        await proxy.close()
        await store.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("policy", ["fail", "append"])
async def test_workers_appending_to_one_session_at_once(
    kind: str, policy: str, namespace: str, tmp_path: Path
) -> None:
    """Four workers (each its own connection and journal) append to one session at once.
    Every append either lands once or is refused as an extension (policy "fail"); with
    policy "append" every one lands once. Never a duplicate, never ambiguous."""
    url = server_url(kind)
    stores = [open_store(kind, url, namespace) for _ in range(4)]
    workers = [
        ReconcilingSession(
            store,
            config=ReconcileConfig(journal=tmp_path / f"j{index}.db", on_extended=policy),  # type: ignore[arg-type]
        )
        for index, store in enumerate(stores)
    ]
    landed: list[str] = []
    refused = 0

    async def work(index: int, session: ReconcilingSession) -> None:
        nonlocal refused
        for turn in range(5):
            text = f"w{index}-t{turn}"
            try:
                await session.add_items([item(text)])
            except ContinuationDenied as denied:
                assert denied.decision.outcome is Outcome.EXTENDED
                refused += 1
                await session.get_items()  # a new run would re-read the history
            else:
                landed.append(text)

    try:
        await asyncio.gather(*(work(i, s) for i, s in enumerate(workers)))
        stored = await texts(stores[0])
        assert sorted(stored) == sorted(landed)
        assert len(stored) == len(set(stored))
        if policy == "append":
            assert refused == 0 and len(stored) == 20
        for session in workers:
            assert await session.pending() == []
    finally:
        await stores[0].drop()
        for store in stores:
            await store.close()


@pytest.fixture
def own_postgres() -> Iterator[OwnServers]:
    """A PostgreSQL server of this test's own (the suite's is shared with tests running
    beside this one, which a crash would fail), started from an empty data directory."""
    if not sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("pg_ctl not found (scripts/services.sh start installs PostgreSQL)")
    said = io.StringIO()
    servers = OwnServers(said)
    try:
        servers.start()
        if "postgres" not in servers.urls:
            pytest.skip(f"no PostgreSQL server of the test's own: {said.getvalue().strip()}")
        yield servers
    finally:
        servers.stop()


async def postmaster_start(url: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT pg_postmaster_start_time()")
    finally:
        await conn.close()


@pytest.mark.postgres
async def test_postgres_crashed_between_the_write_and_its_reply(
    own_postgres: OwnServers, namespace: str, tmp_path: Path
) -> None:
    """The append statement commits; the server crashes (immediate shutdown) before its reply
    leaves. Restarted, it still holds the write: the intent is committed, never replayed."""
    postgres_url()  # only where the suites have PostgreSQL
    url = own_postgres.urls["postgres"]
    from agents_reconcile._backends.postgres.store import RevisionedPostgresSession

    target = urlsplit(url)
    proxy = await FaultProxy(target.hostname or "127.0.0.1", target.port or 0).start()
    store = RevisionedPostgresSession.from_url(
        "s", via(url, proxy.port), schema=namespace, min_size=1, max_size=1
    )
    session = ReconcilingSession(store, config=ReconcileConfig(journal=tmp_path / "j.db"))
    started = await postmaster_start(url)

    async def crash_server() -> None:
        # An immediate shutdown, then the server started again on the same data.
        await asyncio.to_thread(own_postgres.restart, "postgres")

    try:
        await session.add_items([item("warm-up")])
        await session.add_items([item("warm-up 2")])
        proxy.lose_next_reply(crash_server)
        with pytest.raises(Exception) as raised:
            await session.add_items([item("paid")])
        assert not isinstance(raised.value, ContinuationDenied)
    finally:
        await store.close()
    assert await postmaster_start(url) > started, "the server was restarted"
    # A worker of the same fleet (same address, same journal) finds the intent and settles it.
    survivor = RevisionedPostgresSession.from_url("s", via(url, proxy.port), schema=namespace)
    again = ReconcilingSession(survivor, config=ReconcileConfig(journal=tmp_path / "j.db"))
    try:
        [decision] = await again.reconcile()
        assert decision.outcome is Outcome.COMMITTED
        assert await texts(survivor) == ["warm-up", "warm-up 2", "paid"]
    finally:
        await survivor.drop()
        await survivor.close()
        await proxy.close()
