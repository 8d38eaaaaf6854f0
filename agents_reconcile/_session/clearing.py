"""Clearing acknowledged intents: one journal commit per append in the steady state.

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
asynchronous generator that the loop's own shutdown of asynchronous generators closes (the SDK's
``run_sync`` and ``asyncio.run`` both do, before they return); closing it finishes every
clearing of that loop, bounded by ``GUARD_SECONDS``. A clearing that still could not run (a
journal that failed) is retried before the wrapper's next operation.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator, Coroutine
from typing import Any, Final

from .._backends.journal import IntentState, JournalEntry, capabilities_of
from .._core.crashpoints import CrashPoint, reached
from ..errors import JournalError, LeaseLost
from .inflight import InFlight
from .journal_client import JournalClient
from .state import HeldIntents

__all__ = ["GUARD_SECONDS", "Clearing", "clear_acknowledged", "folds_clearing", "retry_discards"]

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


def folds_clearing(journal: object) -> bool:
    """Whether ``journal`` clears an acknowledged intent in the commit that opens the next."""
    return capabilities_of(journal).folds_clearing


class Clearing:
    """One wrapper's acknowledged intent on its way out of the journal."""

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
        if intent_id is not None:
            reached(CrashPoint.BEFORE_CLEARING)
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
        reached(CrashPoint.BEFORE_CLEARING)
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
