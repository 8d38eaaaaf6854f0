"""Connections: the client or pool a caller passes in first, else one shared per address.

Every journal and store connects through a ``Connections``. Given a client or pool, it uses
that and never closes it: the caller owns it. Otherwise it takes a share of the one client
or pool opened for its key (the address and the options) in the running event loop and
process; the first share opens it, the last ``release`` closes it. A client belongs to the
loop and the process that opened it, so a ``Connections`` used from another loop (a second
``asyncio.run``) or after a fork takes a share there; one whose loop has ended is dropped
(terminated, where the driver can do that without its loop) the next time a share is taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

__all__ = ["Connections", "Opener"]

_C = TypeVar("_C")
_CLOSE_TIMEOUT: Final = 5.0


@dataclass(frozen=True, slots=True)
class Opener(Generic[_C]):
    """How to open, close and (without its loop) abandon one kind of client."""

    open: Callable[[], Coroutine[Any, Any, _C]]
    close: Callable[[_C], Awaitable[None]]
    abandon: Callable[[_C], None] | None = None


@dataclass(eq=False)
class _Shared:
    """One opened (or opening) client and how many objects hold a share of it."""

    loop: asyncio.AbstractEventLoop
    pid: int
    key: Hashable
    opening: asyncio.Task[Any]
    opener: Opener[Any]
    users: int = 0
    verified: set[Hashable] = field(default_factory=set)
    """Schemas found current through this client: checked once per client, not per object."""
    learned: dict[Hashable, object] = field(default_factory=dict)
    """What the server behind this client said of itself (read once per client)."""


# Weak: a client lives while some object holds a share of it, so objects that are never
# closed take their client with them when they go, as a client of their own would.
_SHARED: weakref.WeakValueDictionary[tuple[asyncio.AbstractEventLoop, int, Hashable], _Shared] = (
    weakref.WeakValueDictionary()
)


def _take(key: Hashable, opener: Opener[Any]) -> _Shared:
    """The client for ``key`` in the running loop, with one more share. Synchronous, so
    concurrent first uses cannot open two."""
    loop, pid = asyncio.get_running_loop(), os.getpid()
    for stale in [k for k, shared in _SHARED.items() if shared.loop.is_closed() or k[1] != pid]:
        abandoned = _SHARED.pop(stale, None)
        if abandoned is not None:
            _abandon(abandoned)
    shared = _SHARED.get((loop, pid, key))
    if shared is None:
        opening: asyncio.Task[Any] = loop.create_task(opener.open())
        shared = _SHARED[(loop, pid, key)] = _Shared(loop, pid, key, opening, opener)
        opening.add_done_callback(functools.partial(_forget_failed, shared=shared))
    shared.users += 1
    return shared


def _forget_failed(task: asyncio.Task[Any], shared: _Shared) -> None:
    # A client that failed to open is no client: the next use opens another.
    if (task.cancelled() or task.exception() is not None) and _current(shared):
        del _SHARED[(shared.loop, shared.pid, shared.key)]


def _current(shared: _Shared) -> bool:
    return _SHARED.get((shared.loop, shared.pid, shared.key)) is shared


def _abandon(shared: _Shared) -> None:
    """Drop a client whose loop is gone (or which a forked child inherited)."""
    task, abandon = shared.opening, shared.opener.abandon
    mine = shared.pid == os.getpid()
    if abandon is not None and mine and task.done() and not task.cancelled():
        with contextlib.suppress(Exception):
            abandon(task.result())


class Connections(Generic[_C]):
    """The client one journal or store object uses: ``given``, or a share of the one opened
    for ``key`` with ``opener``."""

    def __init__(
        self,
        given: _C | None = None,
        *,
        key: Hashable = None,
        opener: Opener[_C] | None = None,
    ) -> None:
        if (given is None) == (opener is None):
            raise TypeError("Connections takes a client, or a key and an opener")
        self.given = given
        self._key = key
        self._opener = opener
        self._shared: _Shared | None = None
        self._client: _C | None = None
        self._own_verified: set[Hashable] = set()
        self._own_learned: dict[Hashable, object] = {}

    @property
    def verified(self) -> set[Hashable]:
        """Schemas found current through the client in use (per client, so per share)."""
        return self._shared.verified if self._shared is not None else self._own_verified

    @property
    def learned(self) -> dict[Hashable, object]:
        """What the server behind the client in use said of itself (per client, as
        ``verified``)."""
        return self._shared.learned if self._shared is not None else self._own_learned

    async def get(self) -> _C:
        """The client to use in the running event loop (opened on first use)."""
        client = self.current()
        if client is not None:
            return client
        return await self._take_share()

    def current(self) -> _C | None:
        """The client ``get`` gives in the running event loop when it is open already (None
        when ``get`` would open or take one): every operation asks, and most need no await."""
        if self.given is not None:
            return self.given
        shared = self._shared
        if (
            shared is not None
            and shared.loop is asyncio.get_running_loop()
            and shared.pid == os.getpid()
        ):
            return self._client
        return None

    async def _take_share(self) -> _C:
        assert self._opener is not None
        old = self._shared
        if old is not None:
            # Another loop or process than before: its client cannot serve this one.
            self._shared = self._client = None
            old.users -= 1
        shared = self._shared = _take(self._key, self._opener)
        try:
            client: _C = await asyncio.shield(shared.opening)
        except BaseException:
            if self._shared is shared and shared.opening.done():
                self._shared = None
                shared.users -= 1
            raise
        if self._shared is shared:
            self._client = client
        return client

    async def release(self) -> None:
        """Give back this object's share (the last one closes the client); a later ``get``
        takes a new one. A client passed in stays open."""
        shared, self._shared, self._client = self._shared, None, None
        self._own_verified.clear()
        self._own_learned.clear()
        if shared is None:
            return
        shared.users -= 1
        if shared.users > 0:
            return
        if _current(shared):
            del _SHARED[(shared.loop, shared.pid, shared.key)]
        if shared.loop is not asyncio.get_running_loop() or shared.pid != os.getpid():
            # Only its own loop could close it politely; a finished loop's can be dropped.
            if shared.loop.is_closed():
                _abandon(shared)
            return
        try:
            client = await asyncio.shield(shared.opening)
        except Exception:
            return  # it never opened: nothing to close
        try:
            await asyncio.wait_for(shared.opener.close(client), _CLOSE_TIMEOUT)
        except BaseException as exc:
            # Closing politely failed (a dead server, a connection still in use): drop the
            # connections instead. Only a cancellation goes on up.
            if shared.opener.abandon is not None:
                shared.opener.abandon(client)
            if not isinstance(exc, Exception):
                raise
