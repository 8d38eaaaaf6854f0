"""The mutation lock of a session: one per event loop, session and backend, shared by every
wrapper of that session in this process (a web app builds one per request), so they queue here
instead of contending in the journal. Waiting for it is bounded.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable

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

    def held(self, on_timeout: Callable[[float], Awaitable[None]] | None = None) -> _Held:
        """Hold the lock (``async with``); ``on_timeout(waited)`` (the lock's own, which
        denies, unless another is given) when it is not free in time."""
        return _Held(self, on_timeout)

    async def _acquire(
        self, on_timeout: Callable[[float], Awaitable[None]] | None = None
    ) -> asyncio.Lock:
        lock = self._lock()
        # Uncontended (the common case), acquiring never suspends: no timer is armed for it.
        if not lock.locked() and not getattr(lock, "_waiters", None):
            await lock.acquire()
            return lock
        try:
            async with asyncio.timeout(self._wait):
                await lock.acquire()
        except TimeoutError:
            await (on_timeout or self._on_timeout)(self._wait)
            raise
        return lock


class _Held:
    """``async with lock.held()``: a plain object, cheaper on every append than a generator."""

    __slots__ = ("_lock", "_on_timeout", "_owner")

    def __init__(
        self, owner: SessionLock, on_timeout: Callable[[float], Awaitable[None]] | None
    ) -> None:
        self._owner = owner
        self._on_timeout = on_timeout
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> None:
        self._lock = await self._owner._acquire(self._on_timeout)

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._lock is not None
        self._lock.release()
