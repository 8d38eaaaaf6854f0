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
- ``Clearing``: the wrapper's acknowledged intent on its way out of the journal (the one piece
  here that does I/O, off the caller's path).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._core.fingerprint import FINGERPRINT_SCHEME, digest_items
from .._core.records import PendingWrite, new_write_id
from ..errors import FingerprintError

if TYPE_CHECKING:
    from .._core.revision import RevisionedStore
    from .config import ReconcileConfig
    from .inner import InnerSession
    from .journal_client import JournalClient
    from .runstate import CarriedState
from collections.abc import AsyncGenerator, Coroutine

from .._backends.journal import IntentState, JournalEntry
from .._core import crashpoints
from .._core.crashpoints import CrashPoint
from ..errors import JournalError, LeaseLost
from .claims import InFlight
from .journal_client import JournalClient

__all__ = [
    "GUARD_SECONDS",
    "KEPT_DIGESTS",
    "Clearing",
    "HeldIntents",
    "KnownHead",
    "SessionLock",
    "SessionState",
    "SettledBatch",
    "TailMemory",
    "TailView",
    "clear_acknowledged",
    "retry_discards",
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
    scheme: str = FINGERPRINT_SCHEME
    """The fingerprint scheme this session's items are digested under."""
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


def built_intent(
    client: JournalClient,
    batch: tuple[Any, ...],
    digests: tuple[str, ...],
    view: TailView,
    ignore_ids: bool,
    inner: InnerSession,
    expected_revision: int | None = None,
) -> PendingWrite:
    """The intent of an append of ``batch`` on the tail ``view`` (digests made by the session's
    scheme, ``inner.scheme``; requests of ``inner.chunk`` items); on a revisioned store, the
    compare-and-swap against ``expected_revision`` (then ``view`` holds no tail: the store
    itself judges what came before)."""
    # The items before the batch: the whole history when the view holds all of it (then a
    # tail of repeating content still reads one way only), else the newest len+1.
    whole = view.whole
    before = tuple(view.digests) if whole else tuple(view.digests[-(len(batch) + 1) :])
    return PendingWrite.fresh(
        intent_id=new_write_id(),
        session_id=client.session_id,
        backend=client.backend,
        batch=batch,
        batch_digests=digests,
        before_digests=before,
        before_is_whole=whole,
        created_at=time.time(),
        persisted_count=len(before) if whole else None,
        ignore_ids=ignore_ids,
        scheme=inner.scheme,
        chunk=inner.chunk,
        expected_revision=expected_revision,
        seal_key=client.keyring.current,
        sign_key=client.keyring.signer.current if client.keyring.signer else None,
    )


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

    def observe_items(
        self,
        items: Sequence[Any],
        limit: int | None,
        write_count: int,
        *,
        ignore_ids: bool,
        scheme: str = FINGERPRINT_SCHEME,
    ) -> None:
        """A read of ``items`` through ``limit`` while the journal counted ``write_count``
        writes (``observe``, with the digests of the newest of them)."""
        try:
            digests: tuple[str, ...] | None = digest_items(
                items[-KEPT_DIGESTS:], ignore_ids=ignore_ids, scheme=scheme
            )
        except FingerprintError:
            digests = None
        complete = limit is None or limit <= 0 or len(items) < limit
        self.observe(digests, read=len(items), complete=complete, write_count=write_count)

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
    failed_here: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """This wrapper's failed appends (id -> batch digests), pending in the journal or here:
    settled before its next append builds another intent, which is then built on the head
    they leave. Built beside one, an intent expects the revision that one's replay takes, and
    is judged extended by it (a one-step append is refused instead, while the other is in the
    journal)."""
    settled_elsewhere: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """This wrapper's failed appends that another settled while this wrapper was settling them
    (a worker took its claim over when its lease ran out): the append under way, when it is
    of the same batch, is the caller's retry of that write, not another."""
    in_hand: dict[str, list[Any]] = field(default_factory=dict)
    """Copies of the caller's own items for appends that failed here: a replay writes
    exactly what the caller gave, not the journal's copy of it."""

    def any(self) -> bool:
        return bool(self.unjournaled or self.undiscarded or self.failed_here)

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
        self.failed_here.pop(intent_id, None)

    def settled_by_another(self, intent_ids: Iterable[str]) -> None:
        """These of this wrapper's failed appends were settled by another, which took them
        over from this wrapper's own settlement."""
        for intent_id in intent_ids:
            digests = self.failed_here.pop(intent_id, None)
            if digests is not None:
                self.settled_elsewhere[intent_id] = digests
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
        self._last_loop: asyncio.AbstractEventLoop | None = None
        self._last_lock: asyncio.Lock | None = None

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if loop is self._last_loop:
            assert self._last_lock is not None
            return self._last_lock
        lock = self._held.get(loop)
        if lock is None:
            shared = _LOCKS.get(loop)
            if shared is None:
                shared = _LOCKS[loop] = weakref.WeakValueDictionary()
            lock = shared.get(self._key)
            if lock is None:
                lock = shared[self._key] = asyncio.Lock()
            self._held[loop] = lock
        # The lock binds itself to its loop anyway: keeping both costs the loop no longer life.
        self._last_loop, self._last_lock = loop, lock
        return lock

    def held(self, on_timeout: Callable[[float], Awaitable[None]] | None = None) -> _Held:
        """Hold the lock (``async with``); ``on_timeout(waited)`` (the lock's own, which
        denies, unless another is given) when it is not free in time."""
        return _Held(self, on_timeout)

    async def _wait_for(
        self, lock: asyncio.Lock, on_timeout: Callable[[float], Awaitable[None]] | None
    ) -> asyncio.Lock:
        """Acquire ``lock``, held by someone else now, within the wait bound."""
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
        owner = self._owner
        lock = owner._lock()
        # Uncontended (the common case), acquiring never suspends: no timer is armed for it.
        if not lock.locked() and not getattr(lock, "_waiters", None):
            await lock.acquire()
            self._lock = lock
        else:
            self._lock = await owner._wait_for(lock, self._on_timeout)

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._lock is not None
        self._lock.release()


logger = logging.getLogger("agents_reconcile")

GUARD_SECONDS: Final = 5.0
"""How long a stopping loop waits for its clearings to finish."""

# Per loop: its guard, and the wrappers with clearings to finish before it stops.
_GUARDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
_OUTSTANDING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakSet[Clearing]] = (
    weakref.WeakKeyDictionary()
)


async def _guard(
    loop_ref: weakref.ref[asyncio.AbstractEventLoop],
) -> AsyncGenerator[None, None]:
    # The loop by weak reference: the guard, held in _GUARDS, must not keep its key alive.
    try:
        yield
    finally:
        loop = loop_ref()
        clearings = [] if loop is None else list(_OUTSTANDING.pop(loop, ()))
        if loop is not None:
            _GUARDS.pop(loop, None)
        if clearings:
            finishing = [asyncio.ensure_future(clearing.flush()) for clearing in clearings]
            await asyncio.wait(finishing, timeout=GUARD_SECONDS)


def _guard_this_loop(clearing: Clearing) -> None:
    loop = asyncio.get_running_loop()
    _OUTSTANDING.setdefault(loop, weakref.WeakSet()).add(clearing)
    if loop in _GUARDS:
        return
    guard = _guard(weakref.ref(loop))
    # Started here, so that the running loop's first-iteration hook registers it: the loop's
    # shutdown_asyncgens() then closes it, which runs its ``finally``.
    try:
        guard.asend(None).send(None)
    except StopIteration:
        _GUARDS[loop] = guard


class Clearing:
    """One wrapper's acknowledged intent on its way out of the journal: one journal commit per
    append in the steady state.

    An append's intent is opened write-ahead (one commit) and, once the store acknowledged the
    batch, forgotten again. That forgetting need not be a commit of its own on the caller's path:

    - when the journal can fold it (``folds_clearing``), the next append's opening clears it in
      the same atomic step (``open_intent(..., clearing=...)``);
    - otherwise, or when no append follows at once, a background task started at the
      acknowledgement clears it once ``add_items`` has returned (set up at the loop's next turn).

    Until then the intent stays in the journal as this process's in-flight intent, which is the
    truth as far as anyone else can tell: another process waits for it (``in_flight_wait``)
    exactly as for an append still running, and after a crash it is judged by the rule like any
    other (the batch is in the history: committed). Wrappers of this process recognise it
    (``InFlight.acknowledged``) and clear it instead of judging it.

    The background task runs on the loop that ran the append, at its next turn. A loop may stop
    before the task is done (``Runner.run_sync`` stops its loop when the run returns, and
    ``asyncio.run`` cancels what is left): an intent left there would keep other processes
    waiting for a live owner. So each loop with clearings under way carries a guard, an
    asynchronous generator that the loop's own shutdown of asynchronous generators closes (the
    SDK's ``run_sync`` and ``asyncio.run`` both do, before they return); closing it finishes every
    clearing of that loop, bounded by ``GUARD_SECONDS``. A clearing that still could not run (a
    journal that failed) is retried before the wrapper's next operation.
    """

    def __init__(self, client: JournalClient, held: HeldIntents, in_flight: InFlight) -> None:
        self._client = client
        self._held = held
        self._in_flight = in_flight
        self._waiting: str | None = None
        self._running: dict[asyncio.Future[None], str] = {}

    def acknowledged(self, intent_id: str) -> None:
        """The store acknowledged ``intent_id``'s batch: clear it soon, or with the next
        opening, whichever comes first."""
        self._in_flight.acknowledged.add(intent_id)
        earlier, self._waiting = self._waiting, intent_id
        if earlier is not None:
            # Not folded (an opening refused before it could clear it): clear it now, too.
            _guard_this_loop(self)
            self._start(earlier, self._clear(earlier))
        # The background clearing is set up at the loop's next turn, after add_items has
        # returned: the caller does not wait for a task to be made. That turn comes before
        # the loop can stop (this callback is queued before the run's own completion is).
        asyncio.get_running_loop().call_soon(self._schedule, intent_id)

    def _schedule(self, intent_id: str) -> None:
        if self._waiting == intent_id:
            _guard_this_loop(self)
            self._start(intent_id, self._in_background(intent_id))

    def _start(self, intent_id: str, clearing: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(clearing)
        self._in_flight.keep(task)
        self._running[task] = intent_id
        task.add_done_callback(lambda done: self._running.pop(done, None))

    async def flush(self) -> None:
        """Clear what is waiting now, and wait for the clearings under way (for a caller that
        reads the journal and must not meet this wrapper's acknowledged intents there).

        A clearing left on another loop (one ``Runner.run_sync`` stopped) may never finish:
        its intent is cleared again here, which is harmless if it did."""
        intent_id = self.take()
        if intent_id is not None:
            await self._clear(intent_id)
        for left in list(self._held.undiscarded):
            self._held.undiscarded.discard(left)
            await self._clear(left)
        loop = asyncio.get_running_loop()
        here = [task for task in self._running if task.get_loop() is loop]
        for task, other in list(self._running.items()):
            if task.get_loop() is not loop:
                await self._clear(other)
        if here:
            await asyncio.wait(here)

    def take(self) -> str | None:
        """The intent the next opening should clear (None: nothing waits)."""
        intent_id, self._waiting = self._waiting, None
        if intent_id is not None and crashpoints.ARMED:
            crashpoints.reached(CrashPoint.BEFORE_CLEARING)
        return intent_id

    def folded(self, intent_id: str | None, *, answered: bool) -> None:
        """The opening that was to clear ``intent_id`` returned (``answered``: the clearing
        happened with it) or failed (retried before the wrapper's next operation)."""
        if intent_id is None:
            return
        if answered:
            self._in_flight.acknowledged.discard(intent_id)
        else:
            self._held.undiscarded.add(intent_id)

    async def _in_background(self, intent_id: str) -> None:
        # An append made before this first runs (back to back) has folded it already.
        if self._waiting != intent_id:
            return
        self._waiting = None
        if crashpoints.ARMED:
            crashpoints.reached(CrashPoint.BEFORE_CLEARING)
        await self._clear(intent_id)

    async def _clear(self, intent_id: str) -> None:
        try:
            await self._client.journal.discard(intent_id, owner=self._client.owner)
        except LeaseLost:
            # Another worker claimed it after its lease ran out: settling it is theirs now.
            logger.info(
                "session %s: acknowledged intent %s was taken over before it was cleared",
                self._client.session_id,
                intent_id,
            )
        except asyncio.CancelledError:
            self._held.undiscarded.add(intent_id)
            raise
        except JournalError:
            # The append is acknowledged; retried before this wrapper's next operation.
            self._held.undiscarded.add(intent_id)
            logger.warning(
                "session %s: acknowledged intent %s could not be cleared from the journal",
                self._client.session_id,
                intent_id,
                exc_info=True,
            )
            return
        self._in_flight.acknowledged.discard(intent_id)


async def retry_discards(client: JournalClient, held: HeldIntents, in_flight: InFlight) -> None:
    """Clear the acknowledged intents whose clearing failed before (the journal was down),
    before anything else looks at the journal; stops at the first that fails again."""
    for intent_id in list(held.undiscarded):
        try:
            await client.journal.discard(intent_id, owner=client.owner)
        except LeaseLost:
            pass  # taken over: the new holder settles it
        except JournalError:
            return
        held.undiscarded.discard(intent_id)
        in_flight.acknowledged.discard(intent_id)


async def clear_acknowledged(
    client: JournalClient, in_flight: InFlight, entries: list[JournalEntry]
) -> list[JournalEntry]:
    """``entries`` without the intents this process saw acknowledged, cleared now (their
    clearing had not run yet): they are not pending, whoever's wrapper holds them."""
    acknowledged = in_flight.acknowledged
    left = []
    for entry in entries:
        intent_id = entry.intent.intent_id
        if intent_id in acknowledged and entry.state is IntentState.IN_FLIGHT:
            try:
                await client.call(client.journal.discard, intent_id, owner=client.owner)
            except LeaseLost:
                left.append(entry)  # taken over meanwhile: its new holder's to settle
            acknowledged.discard(intent_id)
        else:
            left.append(entry)
    return left
