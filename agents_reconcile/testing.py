"""Fault injection for tests of code that uses sessions (ours and yours).

``FaultInjectingSession`` wraps any session and makes chosen ``add_items`` calls fail the way
real backends do: rejected before writing, written with the acknowledgement lost, hanging
until cancelled, or preceded by another writer's append. ``FaultInjectingConversationsClient``
does the same to the item writes of an OpenAI Conversations client (an
``OpenAIConversationsSession`` is wrapped as itself, not behind another session). Crash points
stop a process at a named place of the package's own paths (``arm_crash_point``: SIGKILL there
unless told otherwise), to prove recovery from there; ``crash_point_reached`` marks one in code
of your own. ``FaultProxy`` stands between a client and a real Redis or PostgreSQL server on
loopback and loses a reply.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._backends.faultproxy import FaultProxy
from ._core import crashpoints
from ._core.crashpoints import CrashPoint
from ._core.crashpoints import arm as arm_crash_point
from ._core.crashpoints import disarm as disarm_crash_point
from ._core.crashpoints import reached as crash_point_reached
from ._core.revision import WriteRecord, is_revisioned

__all__ = [
    "BackendFailure",
    "CrashPoint",
    "Fault",
    "FaultInjectingConversationsClient",
    "FaultInjectingRevisionedSession",
    "FaultInjectingSession",
    "FaultProxy",
    "PlannedFault",
    "arm_crash_point",
    "crash_point_reached",
    "disarm_crash_point",
]

_T = TypeVar("_T")


class BackendFailure(ConnectionError):
    """The exception an injected fault raises (a stand-in for a driver error)."""


class Fault(enum.Enum):
    """How an injected ``add_items`` fails."""

    REJECT = "reject"
    """Raise before anything is written."""
    LOST_ACK = "lost_ack"
    """Write the whole batch, then raise as if the reply was lost."""
    PARTIAL = "partial"
    """Write the first item(s) of the batch, then raise (a chunking backend)."""
    HANG = "hang"
    """Never return until cancelled; nothing is written."""
    CONCURRENT_WRITER = "concurrent_writer"
    """Another writer appends ``foreign_items`` first, then the write is rejected."""
    SLOW = "slow"
    """Write the whole batch after ``delay`` seconds (or, with ``write_first``, write it at
    once and return ``delay`` seconds later): a write still under way when its caller gives
    up, landing before or after the moment it is cancelled."""


@dataclass
class PlannedFault:
    """One fault, fired on the ``at``-th ``add_items`` call (1-based, counted from arming)."""

    fault: Fault
    at: int = 1
    partial_items: int = 1
    foreign_items: Sequence[Any] = field(
        default_factory=lambda: ({"role": "user", "content": "written by someone else"},)
    )
    delay: float = 0.5
    """``SLOW``: how long the write takes."""
    write_first: bool = False
    """``SLOW``: the batch is written at once, and the call returns after ``delay``."""
    fired: asyncio.Event = field(default_factory=asyncio.Event, compare=False, repr=False)
    """Set when the fault fires (the planned call has begun): wait on it to act meanwhile."""


class FaultInjectingSession:
    """A session that forwards to ``inner`` and fails the ``add_items`` calls it is told to."""

    def __new__(cls, inner: Any) -> FaultInjectingSession:
        # Around a revisioned store, the injector is revisioned too (its appends go through
        # ``append_if``), so the wrapper above it still judges writes exactly.
        if cls is FaultInjectingSession and is_revisioned(inner):
            return super().__new__(FaultInjectingRevisionedSession)
        return super().__new__(cls)

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.session_id: str = inner.session_id
        self.add_calls = 0
        self.faults_fired: list[Fault] = []
        self._planned: list[tuple[int, PlannedFault]] = []

    @property
    def session_settings(self) -> Any:
        return getattr(self.inner, "session_settings", None)

    def plan(self, fault: Fault, *, at: int = 1, **options: Any) -> PlannedFault:
        """Fire ``fault`` on the ``at``-th ``add_items`` call from now."""
        planned = PlannedFault(fault, at, **options)
        self._planned.append((self.add_calls + at, planned))
        return planned

    def clear(self) -> None:
        """Cancel every planned fault."""
        self._planned.clear()

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items: list[Any] = await self.inner.get_items(limit)
        return items

    async def add_items(self, items: list[Any]) -> None:
        await self._write(items, self.inner.add_items)

    async def _write(self, items: list[Any], write: Callable[[list[Any]], Awaitable[_T]]) -> _T:
        self.add_calls += 1
        planned = next((p for n, p in self._planned if n == self.add_calls), None)
        if planned is None:
            if crashpoints.ARMED:
                crashpoints.reached(CrashPoint.INSIDE_APPEND_BEFORE_COMMIT)
            result = await write(items)
            if crashpoints.ARMED:
                crashpoints.reached(CrashPoint.AFTER_COMMIT_BEFORE_ACK)
            return result
        self._planned = [(n, p) for n, p in self._planned if p is not planned]
        self.faults_fired.append(planned.fault)
        planned.fired.set()
        if planned.fault is Fault.REJECT:
            raise BackendFailure("injected: write rejected")
        if planned.fault is Fault.LOST_ACK:
            await write(items)
            raise BackendFailure("injected: acknowledgement lost after the write")
        if planned.fault is Fault.PARTIAL:
            await self.inner.add_items(items[: planned.partial_items])
            raise BackendFailure("injected: only part of the batch was written")
        if planned.fault is Fault.CONCURRENT_WRITER:
            await self.inner.add_items(list(planned.foreign_items))
            raise BackendFailure("injected: write rejected after another writer appended")
        if planned.fault is Fault.SLOW:
            if planned.write_first:
                result = await write(items)
                await asyncio.sleep(planned.delay)
                return result
            await asyncio.sleep(planned.delay)
            return await write(items)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


class FaultInjectingRevisionedSession(FaultInjectingSession):
    """``FaultInjectingSession`` around a revisioned store: faults apply to ``append_if`` too.

    ``PARTIAL`` and ``CONCURRENT_WRITER`` write through the store's plain ``add_items`` (as
    a broken or foreign writer would), so the record of writes shows what really happened.
    """

    async def head(self) -> int:
        head: int = await self.inner.head()
        return head

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        async def write(batch: list[Any]) -> int:
            revision: int = await self.inner.append_if(
                batch, expected=expected, write_id=write_id, writer=writer
            )
            return revision

        return await self._write(items, write)

    async def find_write(self, write_id: str) -> WriteRecord | None:
        found: WriteRecord | None = await self.inner.find_write(write_id)
        return found

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        writes: list[WriteRecord] = await self.inner.writes_after(revision, limit=limit)
        return writes


class FaultInjectingConversationsClient:
    """An OpenAI client (``AsyncOpenAI``) whose ``conversations.items.create`` requests fail as
    planned; everything else, and every copy ``with_options`` makes, is the client's own (the
    copies share the plan). Give it to an ``OpenAIConversationsSession`` as its client.

    ``REJECT`` raises before the request is sent; ``LOST_ACK`` sends it (the items are
    stored) and raises as if its answer was lost. Requests are counted from 1 as ``add_calls``.
    """

    _FAULTS = (Fault.REJECT, Fault.LOST_ACK)

    def __init__(self, client: Any, *, _shared: FaultInjectingConversationsClient | None = None):
        self.client = client
        self._plan = self if _shared is None else _shared
        if _shared is None:
            self.add_calls = 0
            self.faults_fired: list[Fault] = []
            self._planned: list[tuple[int, PlannedFault]] = []
        self.conversations = _FaultyConversations(client.conversations, self._plan)

    def plan(self, fault: Fault, *, at: int = 1) -> PlannedFault:
        """Fire ``fault`` (``REJECT`` or ``LOST_ACK``) on the ``at``-th request from now."""
        if fault not in self._FAULTS:
            raise ValueError(f"{fault} is not a fault of one request: use REJECT or LOST_ACK")
        plan = self._plan
        planned = PlannedFault(fault, at)
        plan._planned.append((plan.add_calls + at, planned))
        return planned

    def clear(self) -> None:
        """Cancel every planned fault."""
        self._plan._planned.clear()

    def with_options(self, **options: Any) -> FaultInjectingConversationsClient:
        return FaultInjectingConversationsClient(
            self.client.with_options(**options), _shared=self._plan
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["client"], name)

    def _take(self) -> PlannedFault | None:
        self.add_calls += 1
        planned = next((p for n, p in self._planned if n == self.add_calls), None)
        if planned is not None:
            self._planned = [(n, p) for n, p in self._planned if p is not planned]
            self.faults_fired.append(planned.fault)
            planned.fired.set()
        return planned


class _FaultyConversations:
    def __init__(self, conversations: Any, plan: FaultInjectingConversationsClient) -> None:
        self._conversations = conversations
        self.items = _FaultyItems(conversations.items, plan)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_conversations"], name)


class _FaultyItems:
    def __init__(self, items: Any, plan: FaultInjectingConversationsClient) -> None:
        self._items = items
        self._plan = plan

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        planned = self._plan._take()
        if planned is None:
            if crashpoints.ARMED:
                crashpoints.reached(CrashPoint.INSIDE_APPEND_BEFORE_COMMIT)
            result = await self._items.create(*args, **kwargs)
            if crashpoints.ARMED:
                crashpoints.reached(CrashPoint.AFTER_COMMIT_BEFORE_ACK)
            return result
        if planned.fault is Fault.REJECT:
            raise BackendFailure("injected: item request rejected")
        await self._items.create(*args, **kwargs)
        raise BackendFailure("injected: answer lost after the items were stored")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_items"], name)
