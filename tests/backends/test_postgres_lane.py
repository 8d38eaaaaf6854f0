"""The lane of the pools this package opens on PostgreSQL (``_backends/postgres/lane.py``): one
connection kept out between operations, taken back by the pool whenever an operation on it
raised, the server closed it, or the pool is expired or closed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents_reconcile._backends.postgres.lane import LanedPool
from agents_reconcile._backends.postgres.store import RevisionedPostgresSession

from ..support.servers import postgres_url

asyncpg = pytest.importorskip("asyncpg")

pytestmark = pytest.mark.postgres


class Counted:
    """An asyncpg pool whose acquisitions are counted."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.acquired = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    def acquire(self, *, timeout: float | None = None) -> Any:
        self.acquired += 1
        return self.pool.acquire(timeout=timeout)


@pytest.fixture
async def laned() -> AsyncIterator[tuple[LanedPool, Counted]]:
    counted = Counted(await asyncpg.create_pool(postgres_url(), min_size=1, max_size=3))
    laned = LanedPool(counted)
    try:
        yield laned, counted
    finally:
        await asyncio.wait_for(laned.close(), 5)


async def pid(pool: LanedPool) -> int:
    value: int = await pool.fetchval("SELECT pg_backend_pid()")
    return value


async def test_back_to_back_operations_share_one_connection_taken_from_the_pool_once(
    laned: tuple[LanedPool, Counted],
) -> None:
    pool, counted = laned
    pids = [await pid(pool) for _ in range(20)]
    assert len(set(pids)) == 1
    assert counted.acquired == 1


async def test_operations_at_once_use_the_lane_and_the_pool_beside_it(
    laned: tuple[LanedPool, Counted],
) -> None:
    pool, _ = laned
    await pid(pool)  # the lane is out
    sleeping = [pool.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.2)") for _ in range(3)]
    pids = await asyncio.wait_for(asyncio.gather(*sleeping), 5)
    assert len(set(pids)) == 3


async def test_an_operation_that_raised_gives_its_connection_back_to_the_pool(
    laned: tuple[LanedPool, Counted],
) -> None:
    pool, counted = laned
    await pid(pool)
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.fetchval("SELECT 1 / 0")
    # Kept, the lane would answer "current transaction is aborted" from now on; the pool
    # rolled it back instead, and the next operation took a connection from it.
    for _ in range(3):
        assert await pool.fetchval("SELECT 1") == 1
    assert counted.acquired == 2


async def test_a_cancelled_operation_never_leaves_the_lane_mid_statement(
    laned: tuple[LanedPool, Counted],
) -> None:
    pool, counted = laned
    await pid(pool)
    sleeping = asyncio.ensure_future(pool.fetchval("SELECT pg_sleep(5)"))
    await asyncio.sleep(0.2)
    sleeping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeping
    # The next operations run at once (never "another operation is in progress").
    assert await asyncio.wait_for(pool.fetchval("SELECT 7"), 5) == 7
    assert await asyncio.wait_for(pool.fetchval("SELECT 8"), 5) == 8
    assert counted.acquired == 2


async def test_a_lane_the_server_closed_while_idle_is_replaced_without_an_error(
    laned: tuple[LanedPool, Counted],
) -> None:
    pool, _ = laned
    first = await pid(pool)
    admin = await asyncpg.connect(postgres_url())
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", first)
        for _ in range(250):
            if not await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", first
            ):
                break
            await asyncio.sleep(0.02)
    finally:
        await admin.close()
    await asyncio.sleep(0.05)
    # As a pooled connection that died idle: the next operation gets a fresh one, no error.
    assert (await pid(pool)) != first
    assert await pool.fetchval("SELECT 1") == 1


async def test_expiring_the_pool_replaces_the_lane_too(laned: tuple[LanedPool, Counted]) -> None:
    pool, _ = laned
    first = await pid(pool)
    await pool.expire_connections()
    assert (await pid(pool)) != first


async def test_closing_with_the_lane_out_returns_at_once() -> None:
    pool = LanedPool(await asyncpg.create_pool(postgres_url(), min_size=1, max_size=2))
    await pid(pool)
    await asyncio.wait_for(pool.close(), 2)


async def test_a_pool_of_one_connection_keeps_no_lane() -> None:
    counted = Counted(await asyncpg.create_pool(postgres_url(), min_size=1, max_size=1))
    pool = LanedPool(counted)
    try:
        for _ in range(3):
            await pid(pool)
        assert counted.acquired == 3
        # ... so a caller of the pool itself never waits for it.
        async with asyncio.timeout(2), counted.pool.acquire() as conn:
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await asyncio.wait_for(pool.close(), 5)


async def test_a_stores_appends_back_to_back_take_no_connection_from_the_pool_each() -> None:
    store = RevisionedPostgresSession.from_url(
        f"lane-{uuid.uuid4().hex[:8]}", postgres_url(), schema=f"t_{uuid.uuid4().hex[:12]}"
    )
    try:
        await store.add_items([{"role": "user", "content": "first"}])
        pool = await store._connections.get()
        assert isinstance(pool, LanedPool)
        counted = Counted(pool.pool)
        pool.pool = counted
        for turn in range(5):
            await store.add_items([{"role": "user", "content": f"turn {turn}"}])
        assert len(await store.get_items()) == 6
        assert counted.acquired == 0
    finally:
        await store.drop()
        await store.close()
