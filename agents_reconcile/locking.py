"""The mutation lock of a session: one per event loop, session and backend, shared by every
wrapper of that session in this process (a web app builds one per request), so they queue here
instead of contending in the journal. Waiting for it is bounded.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

__all__ = ["SessionLock"]

# Weak values: a lock lives while a wrapper of its session does.
_LOCKS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock]
] = weakref.WeakKeyDictionary()


class SessionLock:
    """One wrapper's handle on its session's shared lock."""

    def __init__(
        self, key: tuple[str, str], *, wait: float, on_timeout: Callable[[float], Awaitable[None]]
    ) -> None:
        self._key = key
        self._wait = wait
        self._on_timeout = on_timeout
        # Strong references, per loop: the shared lock lives as long as this wrapper.
        self._held: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._held.get(loop)
        if lock is None:
            shared = _LOCKS.get(loop)
            if shared is None:
                shared = _LOCKS[loop] = weakref.WeakValueDictionary()
            lock = shared.get(self._key)
            if lock is None:
                lock = shared[self._key] = asyncio.Lock()
            self._held[loop] = lock
        return lock

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold the lock; ``on_timeout(waited)`` (which denies) when it is not free in time."""
        lock = self._lock()
        try:
            async with asyncio.timeout(self._wait):
                await lock.acquire()
        except TimeoutError:
            await self._on_timeout(self._wait)
            raise
        try:
            yield
        finally:
            lock.release()
