"""A pool that keeps one connection out between operations: the lane.

Every journal and store operation takes a connection from an asyncpg pool and gives it back.
The driver pays for that in Python on each operation: the acquisition runs under a timeout
(a task of its own), and the release is shielded (another task), about 45 us and two turns of
the event loop on this machine, a sixth of a fused append's whole time. Back-to-back work, the
common case of one session appending, needs none of it.

``LanedPool`` wraps a pool this package opened (never one a caller passed in: that stays
theirs, whole). Its first connection given back after a clean operation is kept as the lane;
the next ``acquire`` takes the lane when nobody holds it, at no cost, and the pool otherwise,
as before. So the lane never makes anyone wait: at most one operation uses it, the others use
the pool's remaining connections (a pool of one connection keeps no lane).

What the pool did on the way back is kept:
- A lane operation that raised (the driver's error, a cancellation, a statement of ours that
  failed) gives its connection back to the pool, which checks it (a query still cancelling,
  a transaction left open, a connection lost) as it checks any; a later one starts a new lane.
- A lane the server closed meanwhile (a restart, an idle connection killed) is given back when
  next seen, and the operation takes a connection from the pool, which opens a fresh one, as
  it would for a pooled connection that died idle.
- ``expire_connections`` and ``close`` give the lane back first, so the pool can replace or
  close it (``close`` waits for every connection given out).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["LanedPool", "run_on"]

_T = TypeVar("_T")


async def run_on(
    pool: Any, work: Callable[[Any], Awaitable[_T]], *, acquire_timeout: float | None = None
) -> _T:
    """``work(conn)`` on a connection of ``pool`` (a ``LanedPool``: its lane when free; any
    other pool: one acquired within ``acquire_timeout``), given back afterwards."""
    if isinstance(pool, LanedPool):
        return await pool.run(work, acquire_timeout=acquire_timeout)
    async with pool.acquire(timeout=acquire_timeout) as conn:
        result: _T = await work(conn)
    return result


class LanedPool:
    """``pool`` (an asyncpg pool), with one of its connections kept for back-to-back use.
    Anything not named here is the pool's own."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self._lane: Any = None
        self._lane_busy = False
        self._keeps_lane = pool.get_max_size() > 1

    def acquire(self, *, timeout: float | None = None) -> _Acquired:
        """A connection for one ``async with`` block: the lane when free, else the pool's."""
        return _Acquired(self, timeout)

    async def run(
        self, work: Callable[[Any], Awaitable[_T]], *, acquire_timeout: float | None = None
    ) -> _T:
        """``work(conn)`` as in an ``acquire`` block, the lane taken and kept without one."""
        lane = self._take_lane()
        if lane is None:
            async with self.acquire(timeout=acquire_timeout) as conn:
                return await work(conn)
        try:
            result = await work(lane)
        except BaseException:
            await self._ended(lane, on_lane=True, clean=False)
            raise
        await self._ended(lane, on_lane=True, clean=True)
        return result

    # The pool's own shortcuts, the stores use them: each one operation, on the lane when free.

    async def fetch(self, query: str, *args: Any) -> Any:
        return await self.run(lambda conn: conn.fetch(query, *args))

    async def fetchrow(self, query: str, *args: Any) -> Any:
        return await self.run(lambda conn: conn.fetchrow(query, *args))

    async def fetchval(self, query: str, *args: Any, column: int = 0) -> Any:
        return await self.run(lambda conn: conn.fetchval(query, *args, column=column))

    async def execute(self, query: str, *args: Any) -> Any:
        return await self.run(lambda conn: conn.execute(query, *args))

    async def expire_connections(self) -> None:
        await self._give_back_lane()
        await self.pool.expire_connections()

    async def close(self) -> None:
        await self._give_back_lane()
        await self.pool.close()

    def terminate(self) -> None:
        self._lane = None
        self.pool.terminate()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    # -- the lane ------------------------------------------------------------------------------

    def _take_lane(self) -> Any:
        """The lane, now held; None when there is none free to hold."""
        lane = self._lane
        if lane is None or self._lane_busy or not _alive(lane):
            return None
        self._lane_busy = True
        return lane

    async def _give_back_lane(self) -> None:
        lane, self._lane = self._lane, None
        if lane is not None and not self._lane_busy:
            await self.pool.release(lane)

    async def _dead_lane(self) -> None:
        """Give back a lane the server closed, so the pool replaces it."""
        lane = self._lane
        if lane is not None and not self._lane_busy and not _alive(lane):
            self._lane = None
            await self.pool.release(lane)

    async def _ended(self, conn: Any, *, on_lane: bool, clean: bool) -> None:
        """``conn``'s operation ended (``clean``: without raising): kept as the lane, or
        given back to the pool."""
        if on_lane:
            self._lane_busy = False
            if clean and self._lane is conn:
                return
            if self._lane is conn:
                self._lane = None
        elif clean and self._lane is None and self._keeps_lane and _alive(conn):
            self._lane = conn
            return
        await self.pool.release(conn)


def _alive(conn: Any) -> bool:
    """Whether ``conn`` is open and still given out to us. The pool takes back a connection
    the server closed while it was out (its proxy then refuses every call, this one too);
    ``release`` of it again does nothing."""
    try:
        return not conn.is_closed()
    except Exception:
        return False


class _Acquired:
    """``async with pool.acquire(timeout=...) as conn``, for a ``LanedPool``."""

    __slots__ = ("_conn", "_laned", "_on_lane", "_timeout")

    def __init__(self, laned: LanedPool, timeout: float | None) -> None:
        self._laned = laned
        self._timeout = timeout
        self._conn: Any = None
        self._on_lane = False

    async def __aenter__(self) -> Any:
        laned = self._laned
        conn = laned._take_lane()
        if conn is not None:
            self._on_lane = True
        else:
            await laned._dead_lane()
            conn = await laned.pool.acquire(timeout=self._timeout)
        self._conn = conn
        return conn

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        await self._laned._ended(conn, on_lane=self._on_lane, clean=kind is None)
