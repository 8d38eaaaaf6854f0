"""Claims: who may take a pending intent, taking it (a compare-and-set in the journal that
hands out a fencing token), the lease kept on it while it is held, and giving it back.

An intent is claimed so two workers never both replay it, and never while a live owner may
still be writing it: that is waited for, within a bound. An owner on another host whose lease
ran out may only be stalled; its intent is taken over only where the store refuses the old
owner's late write (``fences``), and otherwise denied ``lease_expired``.

The lease (``Renewal``): a worker holds an intent from the moment it opens or claims it until
it clears or settles it. Others judge its lease by the journal's clock: it runs out
``lease_seconds`` after the last change or renewal. The holder renews every third of the lease,
with the same compare-and-set that claimed it (its fencing token expected), so a renewal never
extends a claim someone else took. Its own margin is the other two thirds: it starts no write
to the store once two thirds of the lease passed without a confirmed renewal, when others may
be about to take over. The leases held on one event loop share one timer (``_Keeper``):
holding one that ends before its first third costs no timer at all.

What this process has in flight (``InFlight``): intents being appended or reconciled by one of
its tasks, and replays that go on in the background after their caller was cancelled. One
registry serves every wrapper of the process (``PROCESS_IN_FLIGHT``), because wrappers of one
session in one process must never take each other's in-flight write for a failed one; the parts
that need it are handed it, so a test can give them one of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

from .._backends.journal import ACTIVE_STATES, IntentState, JournalEntry
from .._core.cancellation import outliving_cancellation
from .._core.ownership import Takeover, current_owner, takeover
from .._core.records import Outcome, PendingWrite, Reason
from .._core.revision import RevisionedStore
from ..errors import JournalError, LeaseLost
from .config import ReconcileConfig
from .journal_client import JournalClient

__all__ = [
    "HOLDER_SHARE",
    "PROCESS_IN_FLIGHT",
    "AlreadySettled",
    "Claims",
    "InFlight",
    "Renewal",
    "held_apart",
    "registry_for_new_wrapper",
    "take",
]


@dataclass
class InFlight:
    """Intent ids this process holds, and the replays running on after a cancellation."""

    busy: set[str] = field(default_factory=set)
    """In flight (appending) or being reconciled by a task of this process."""
    replaying: set[str] = field(default_factory=set)
    """Replays whose caller was cancelled, still running; they keep their claim."""
    background: set[asyncio.Future[Any]] = field(default_factory=set)
    """The tasks of those replays (and of the releases after them, and of the clearings of
    acknowledged intents), kept referenced."""
    acknowledged: set[str] = field(default_factory=set)
    """Intents whose append a wrapper of this process saw acknowledged, still in the journal
    until their clearing (folded into the next opening, or in the background) lands: any
    wrapper of the session that meets one clears it instead of judging it."""

    def holds(self, intent_id: str) -> bool:
        return intent_id in self.busy

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Keep a background task referenced until it ends."""
        self.background.add(task)
        task.add_done_callback(self.background.discard)


PROCESS_IN_FLIGHT = InFlight()
"""The registry every wrapper of this process shares, unless made under ``held_apart``."""

_REGISTRY_FOR_NEW_WRAPPERS: contextvars.ContextVar[InFlight | None] = contextvars.ContextVar(
    "agents_reconcile_in_flight", default=None
)


@contextlib.contextmanager
def held_apart(registry: InFlight) -> Iterator[InFlight]:
    """Wrappers made inside the block hold their intents in ``registry``, apart from this
    process's other wrappers, as another process's wrappers would (tests that play two
    processes in one)."""
    token = _REGISTRY_FOR_NEW_WRAPPERS.set(registry)
    try:
        yield registry
    finally:
        _REGISTRY_FOR_NEW_WRAPPERS.reset(token)


def registry_for_new_wrapper() -> InFlight:
    """The registry a wrapper made now holds its intents in."""
    return _REGISTRY_FOR_NEW_WRAPPERS.get() or PROCESS_IN_FLIGHT


logger = logging.getLogger("agents_reconcile")

_POLL_SECONDS: Final = 0.02
# How often the history is read for the batch of an expired lease nothing fences.
_LOOK_SECONDS: Final = 0.25


class AlreadySettled(Exception):
    """Someone else settled the intent (or took it over) while this process waited for it."""


async def take(
    client: JournalClient, entry: JournalEntry, in_flight: InFlight = PROCESS_IN_FLIGHT
) -> tuple[bool, JournalEntry | None]:
    """Claim ``entry``'s intent by compare-and-set on what was read (state, owner, and the
    update time: a holder that renewed its lease since keeps it); whether this process holds
    it now, and the intent as it stands afterwards (None: settled), its token the claim's.

    A claim whose caller is cancelled may still land: it is waited out in the background and
    given back, never left held by a live process that will not settle it."""
    intent_id = entry.intent.intent_id
    me = client.owner

    async def give_back(claiming: asyncio.Future[bool]) -> None:
        if not claiming.cancelled() and claiming.exception() is None and claiming.result():
            await client.release(intent_id)

    claimed = await outliving_cancellation(
        client.call(
            client.journal.transition,
            intent_id,
            state=IntentState.RECONCILING,
            owner=me,
            expect_state=entry.state,
            expect_owner=entry.owner,
            expect_updated_at=entry.updated_at,
        ),
        in_flight,
        give_back,
        eager=client.capabilities.starts_eagerly,
    )
    try:
        now = await client.call(client.journal.get, intent_id)
    except asyncio.CancelledError:
        if claimed:
            in_flight.keep(asyncio.ensure_future(client.release(intent_id)))
        raise
    mine = claimed and now is not None and (now.state, now.owner) == (IntentState.RECONCILING, me)
    return mine, now


class Claims:
    """One session's claims on its pending intents."""

    def __init__(
        self,
        *,
        client: JournalClient,
        config: ReconcileConfig,
        store: RevisionedStore | None,
        in_flight: InFlight,
    ) -> None:
        self._client = client
        self._config = config
        self._store = store
        self._in_flight = in_flight

    def leased(self, intent_id: str, state: IntentState, fence: int) -> Renewal:
        """The lease on an intent this process holds (``state``, under ``fence``), renewed
        while the block runs."""
        return Renewal(
            self._client,
            intent_id,
            state=state,
            fence=fence,
            lease_seconds=self._config.lease_seconds,
        )

    def takeover(self, entry: JournalEntry) -> Takeover:
        """Whether this process may claim the intent now (see ``ownership.takeover``); an
        expired lease is as good as free where the store fences the old owner's late write."""
        way = takeover(
            entry.owner,
            active=entry.state in ACTIVE_STATES,
            in_flight_here=self._in_flight.holds(entry.intent.intent_id),
            age_seconds=entry.held_for(time.time()),
            lease_seconds=self._config.lease_seconds,
            me=current_owner(),
        )
        if way is Takeover.EXPIRED and self.fences(entry.intent):
            return Takeover.FREE
        return way

    def fences(self, intent: PendingWrite) -> bool:
        """Whether the store refuses a late write of ``intent`` by a holder that lost it: a
        revisioned store appends by compare-and-swap on the head the write expected."""
        return intent.expected_revision is not None and self._store is not None

    async def claim(
        self,
        entry: JournalEntry,
        *,
        landed: Callable[[PendingWrite], Awaitable[bool]] | None = None,
    ) -> int:
        """Take ownership of an intent, waiting (bounded) for a live owner to finish, or for
        one whose lease expired where the store cannot fence it; return the claim's token.

        ``landed(intent)``: whether the history already holds the batch (a fresh judgement).
        An owner whose write is in the history never writes it again, so its intent is taken
        even where nothing fences: only settling it can follow."""
        client = self._client
        deadline = time.monotonic() + self._config.in_flight_wait
        looked = -_LOOK_SECONDS
        while True:
            way = self.takeover(entry)
            if (
                way is Takeover.EXPIRED
                and landed is not None
                and time.monotonic() - looked >= _LOOK_SECONDS
            ):
                looked = time.monotonic()
                if await landed(entry.intent):
                    way = Takeover.FREE
            if way is not Takeover.FREE:
                if time.monotonic() >= deadline:
                    await self._deny_held(entry, way)
                await asyncio.sleep(_POLL_SECONDS)
                current = await client.call(client.journal.get, entry.intent.intent_id)
            else:
                mine, current = await take(client, entry, self._in_flight)
                if mine and current is not None:
                    return current.fence
            if current is None:
                raise AlreadySettled(entry.intent.intent_id)
            entry = current

    async def _deny_held(self, entry: JournalEntry, way: Takeover) -> None:
        evidence: dict[str, Any] = {"state": entry.state.value, "owner": str(entry.owner)}
        reason = Reason.IN_FLIGHT_ELSEWHERE
        if way is Takeover.EXPIRED:
            reason = Reason.LEASE_EXPIRED
            evidence |= {
                "held_for_seconds": round(entry.held_for(time.time()), 3),
                "lease_seconds": entry.owner.lease_or(self._config.lease_seconds),
                "fenced": False,
            }
        await self._client.deny(entry.intent, Outcome.AMBIGUOUS, reason, evidence)

    def in_flight_here(self, intent_id: str) -> bool:
        """Whether a task of this process still writes or settles ``intent_id``."""
        return self._in_flight.holds(intent_id)

    @contextlib.contextmanager
    def holding(self, intent_id: str) -> Iterator[None]:
        """Mark ``intent_id`` as held by a task of this process while the block runs, so no
        other wrapper of the process takes it meanwhile (a replay cancelled inside keeps it
        until the replay ends)."""
        in_flight = self._in_flight
        in_flight.busy.add(intent_id)
        try:
            yield
        finally:
            if intent_id not in in_flight.replaying:
                in_flight.busy.discard(intent_id)

    def replaying(self, intent_id: str) -> bool:
        """Whether a replay of ``intent_id`` goes on in the background (it keeps the claim)."""
        return intent_id in self._in_flight.replaying

    async def release(self, intent: PendingWrite, fence: int | None = None) -> None:
        """Give up this process's claim on ``intent`` (back to failed, for the next judge)."""
        await self._client.release(intent.intent_id, fence=fence)


# -- the lease -----------------------------------------------------------------------------


HOLDER_SHARE: Final = 2 / 3
"""The part of the lease a holder counts on: it renews at a third and stops starting writes
at two thirds, a margin of a third for the journal's reply times and the clocks' drift."""


class Renewal:
    """Keeps ``intent_id`` (held in ``state`` under ``fence``) leased while the block runs."""

    def __init__(
        self,
        client: JournalClient,
        intent_id: str,
        *,
        state: IntentState,
        fence: int,
        lease_seconds: float,
    ) -> None:
        self._client = client
        self.intent_id = intent_id
        self._state = state
        self.fence = fence
        self._lease = lease_seconds
        self._confirmed = time.monotonic()
        self._keeper: _Keeper | None = None
        self.due = math.inf
        """When the next renewal is due, on the loop's clock (inf: none while not held)."""
        self._task: asyncio.Task[None] | None = None
        self.lost = False
        """Whether a renewal found the intent no longer held under ``fence``."""

    def __enter__(self) -> Renewal:
        self._confirmed = time.monotonic()
        loop = asyncio.get_running_loop()
        keeper = _keeper_of(loop)
        self._keeper = keeper
        self.due = loop.time() + self._lease / 3
        keeper.hold(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._keeper is not None:
            self._keeper.drop(self)
            self._keeper = None
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def check(self) -> None:
        """Raise ``LeaseLost`` unless the lease is still this holder's to count on: before a
        write to the store starts."""
        if self.lost:
            raise LeaseLost(
                f"intent {self.intent_id}: another worker took it over", intent_id=self.intent_id
            )
        if time.monotonic() - self._confirmed >= self._lease * HOLDER_SHARE:
            raise LeaseLost(
                f"intent {self.intent_id}: no renewal of its lease confirmed for "
                f"{time.monotonic() - self._confirmed:.1f} s of {self._lease:g}",
                intent_id=self.intent_id,
            )

    def renew(self) -> None:
        """Start renewing (the keeper found it due)."""
        self.due = math.inf
        self._task = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        me = self._client.owner
        try:
            renewed = await self._client.journal.transition(
                self.intent_id,
                state=self._state,
                owner=me,
                expect_state=self._state,
                expect_owner=me,
                expect_fence=self.fence,
            )
        except JournalError:
            # Tried again at the next third; meanwhile the margin runs down (``check``).
            logger.warning("could not renew the lease on intent %s", self.intent_id, exc_info=True)
            renewed = True
        except Exception:
            # The journal refused to touch it at all (a journal that raises on a settled
            # intent): it is not held under this token any more.
            logger.debug("renewal of intent %s refused", self.intent_id, exc_info=True)
            renewed = False
        else:
            if renewed:
                self._confirmed = time.monotonic()
        self._task = None
        if not renewed:
            self.lost = True
            return
        keeper = self._keeper
        if keeper is not None:
            self.due = keeper.loop.time() + self._lease / 3
            keeper.hold(self)


class _Keeper:
    """The leases held on one event loop, renewed by one timer: holding a lease costs no timer
    of its own (most appends end long before their first renewal is due). The timer stays
    armed for the earliest renewal due when it was set, and when it fires it renews what is
    due and is armed again only while leases are held."""

    __slots__ = ("_armed", "_at", "_loop", "held")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Neither the loop nor its timer (which holds the loop) is referenced here: the keeper
        # is the value of its loop's entry in ``_KEEPERS``, and a value that held its key would
        # keep every loop that ever held a lease alive.
        self._loop = weakref.ref(loop)
        self.held: dict[Renewal, None] = {}
        self._armed = 0
        """How often the timer was armed: a timer armed before the last one fires for nothing."""
        self._at = math.inf

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The keeper's loop (alive while anything runs on it: only then is this asked)."""
        loop = self._loop()
        assert loop is not None
        return loop

    def hold(self, lease: Renewal) -> None:
        self.held[lease] = None
        if lease.due < self._at:
            self._arm(lease.due)

    def drop(self, lease: Renewal) -> None:
        self.held.pop(lease, None)

    def _arm(self, at: float) -> None:
        self._at = at
        self._armed += 1
        self.loop.call_at(at, self._tick, self._armed)

    def _tick(self, armed: int) -> None:
        if armed != self._armed:
            return  # a timer armed later, for an earlier renewal, took over from this one
        self._at = math.inf
        now = self.loop.time()
        following = math.inf
        for lease in list(self.held):
            if lease.due <= now:
                lease.renew()
            else:
                following = min(following, lease.due)
        if following < math.inf:
            self._arm(following)


_KEEPERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Keeper] = (
    weakref.WeakKeyDictionary()
)
_last_keeper: _Keeper | None = None
"""The keeper looked up last: every lease of a process with one loop finds it here, without
a weak dictionary's lookup (it holds its loop weakly, so keeping it keeps no loop alive)."""


def _keeper_of(loop: asyncio.AbstractEventLoop) -> _Keeper:
    """The keeper of the leases held on ``loop``."""
    global _last_keeper
    keeper = _last_keeper
    if keeper is not None and keeper._loop() is loop:
        return keeper
    keeper = _KEEPERS.get(loop)
    if keeper is None:
        keeper = _KEEPERS[loop] = _Keeper(loop)
    _last_keeper = keeper
    return keeper
