"""What one wrapper holds about its session, in one place: ``SessionState``, made once by the
wrapper and handed to the parts that append, settle and gate (the writers, the settler, the
gate), instead of each getting its own list of holders. No I/O here.

- ``TailMemory``: the memory of the history's newest items. A wrapper remembers the digests of
  the newest items it saw, with the journal's count of the session's writes at that moment; an
  append may build its intent on that memory instead of reading the store, because the journal
  records the intent only while the count is still the remembered one (a stale memory never
  stands behind a decision). After a settlement it remembers the batch just vouched for and the
  tail that ended with it, to recognise the same batch sent again while the history still ends
  with it (the usual retry after a lost acknowledgement).
- ``HeldIntents``: the wrapper's own intents outside the journal (recorded only here because
  the journal failed; acknowledged but not yet cleared from it) and copies of the caller's items
  for the appends that failed here.
- ``KnownHead``: on a revisioned store, the head the next append builds on, and the batch just
  settled there.
- ``SessionLock``: the session's mutation lock, one per event loop, session and backend, shared
  by every wrapper of that session in this process (a web app builds one per request), so they
  queue here instead of contending in the journal; waiting for it is bounded.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._core.fingerprint import digest_items
from .._core.records import PendingWrite
from ..errors import FingerprintError

if TYPE_CHECKING:
    from .._core.revision import RevisionedStore
    from .config import ReconcileConfig
    from .inflight import InFlight
    from .inner import InnerSession
    from .journal_client import JournalClient
    from .runstate import CarriedState

__all__ = [
    "KEPT_DIGESTS",
    "HeldIntents",
    "KnownHead",
    "SessionLock",
    "SessionState",
    "SettledBatch",
    "TailMemory",
    "TailView",
]

logger = logging.getLogger("agents_reconcile")


@dataclass(eq=False)
class SessionState:
    """Everything one wrapper holds about its session: its journal client and configuration,
    the inner session's calls, the revisioned store (None: judged by fingerprints), and the
    per-session holders below. Made once by ``ReconcilingSession``; shared by its writer, its
    settler and its gate, so each part reads the same memory and takes the same lock."""

    client: JournalClient
    config: ReconcileConfig
    inner: InnerSession
    store: RevisionedStore | None
    carried: CarriedState
    lock: SessionLock
    in_flight: InFlight
    ignore_ids: bool
    tail: TailMemory = field(default_factory=lambda: TailMemory())
    held: HeldIntents = field(default_factory=lambda: HeldIntents())
    head: KnownHead = field(default_factory=lambda: KnownHead())


# -- the memory of the tail -------------------------------------------------------------------

KEPT_DIGESTS: Final = 32
"""How many of the newest items' digests the memory keeps."""


@dataclass(frozen=True)
class TailView:
    """Digests of the newest items, oldest first; ``whole`` if they are the whole history;
    ``write_count``, the journal's count of the session's writes when they were seen (None: a view
    no count vouches for, which is used once and not remembered)."""

    digests: tuple[str, ...]
    whole: bool
    write_count: int | None = None


@dataclass(frozen=True)
class SettledBatch:
    """The batch a settlement just vouched for, and the tail that ended with it."""

    batch: tuple[str, ...]
    tail: tuple[str, ...]


class TailMemory:
    """What one wrapper remembers of its session's tail."""

    def __init__(self) -> None:
        self._view: TailView | None = None
        self._settled: SettledBatch | None = None

    @property
    def view(self) -> TailView | None:
        return self._view

    @property
    def settled(self) -> SettledBatch | None:
        return self._settled

    def wanted(self, needed: int) -> int:
        """How many newest digests to look at before an append of ``needed - 1`` items (more
        right after a settlement: enough to recognise the settled batch sent again)."""
        return max(needed, len(self._settled.tail) if self._settled is not None else 0)

    def trusted(self, wanted: int) -> TailView | None:
        """The remembered view an append may build on without reading, or None to read.

        Right after a settlement the retried-batch check decides without the journal's
        verdict, so it must see the store itself."""
        view = self._view
        if self._settled is not None or view is None or view.write_count is None:
            return None
        return view if view.whole or len(view.digests) >= wanted else None

    def remember(self, view: TailView) -> None:
        """Keep a view just read, if a write count vouches for it."""
        if view.write_count is not None:
            self._view = view

    def observe(
        self, digests: Sequence[str] | None, *, read: int, complete: bool, write_count: int
    ) -> None:
        """A read of ``read`` newest items (``digests`` of the last ``KEPT_DIGESTS`` of them;
        None when they could not be digested) while the journal counted ``write_count`` writes;
        ``complete`` when the read returned all it could."""
        if digests is None:
            self._view = None
            return
        digests = tuple(digests[-KEPT_DIGESTS:])
        known = self._view
        if (
            not complete
            and known is not None
            and known.write_count == write_count
            and len(known.digests) > len(digests)
            and known.digests[len(known.digests) - len(digests) :] == digests
        ):
            # A short read that agrees with what is known says nothing new: keep the longer view.
            return
        self._view = TailView(digests, complete and read <= KEPT_DIGESTS, write_count)

    def extend(self, digests: Sequence[str], *, write_count: int) -> None:
        """The store acknowledged an append of ``digests`` counted as write ``write_count``."""
        if self._view is None:
            return
        merged = self._view.digests + tuple(digests)
        whole = self._view.whole and len(merged) <= KEPT_DIGESTS
        self._view = TailView(merged[-KEPT_DIGESTS:], whole, write_count)

    def forget_view(self) -> None:
        """The store may have changed: the remembered view is void."""
        self._view = None

    def forget(self) -> None:
        """Forget the view and the settled batch."""
        self._view = None
        self._settled = None

    def settle(self, batch: tuple[str, ...], before: tuple[str, ...]) -> None:
        """A settlement vouched for ``batch`` on top of ``before``; being a counted write, it
        voids the view (the next append reads the tail in any case)."""
        self._view = None
        self._settled = SettledBatch(batch, before + batch)

    def drop_settled(self) -> None:
        self._settled = None

    def is_retried_batch(self, digests: tuple[str, ...], tail: Sequence[str]) -> bool:
        """Whether ``digests`` is the batch just settled and ``tail`` still ends with it."""
        settled = self._settled
        if settled is None or settled.batch != digests:
            return False
        return tuple(tail[-len(settled.tail) :]) == settled.tail


# -- the intents held here ------------------------------------------------------------------


@dataclass
class HeldIntents:
    """This wrapper's own intents, as far as the journal does not hold them."""

    unjournaled: dict[str, PendingWrite] = field(default_factory=dict)
    """Failed appends the journal could not record: kept here, settled before the next use."""
    undiscarded: set[str] = field(default_factory=set)
    """Acknowledged appends whose intent the journal could not clear yet."""
    in_hand: dict[str, list[Any]] = field(default_factory=dict)
    """Copies of the caller's own items for appends that failed here: a replay writes
    exactly what the caller gave, not the journal's copy of it."""

    def any(self) -> bool:
        return bool(self.unjournaled or self.undiscarded)

    def keep_in_hand(self, intent: PendingWrite, items: list[Any]) -> None:
        try:
            self.in_hand[intent.intent_id] = copy.deepcopy(items)
        except Exception:
            # An item that refuses to be copied: the journal's copy, equal as JSON, serves.
            logger.debug("items of intent %s could not be copied", intent.intent_id)

    def replay_batch(self, intent: PendingWrite) -> list[Any]:
        """What a replay writes: the caller's own items while this wrapper holds them (the
        journal's copy is equal as JSON, but the caller's are what the caller gave)."""
        kept = self.in_hand.get(intent.intent_id)
        if kept is not None:
            try:
                digests = digest_items(kept, ignore_ids=intent.ignore_ids, scheme=intent.scheme)
            except FingerprintError:
                digests = ()
            if digests == intent.batch_digests:
                return copy.deepcopy(kept)
        return copy.deepcopy(list(intent.batch))

    def settled(self, intent_id: str) -> None:
        self.unjournaled.pop(intent_id, None)
        self.in_hand.pop(intent_id, None)


@dataclass
class KnownHead:
    """On a revisioned store: the head this wrapper's next append builds on (None: read it
    first), and the batch a settlement just vouched for with the head after it."""

    head: int | None = None
    settled_at: tuple[tuple[str, ...], int] | None = None


# -- the session's lock ----------------------------------------------------------------------


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
