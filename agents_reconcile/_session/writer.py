"""Writers: an append goes settle what is pending -> open its intent -> inner append ->
acknowledge. Chosen once per session: ``FingerprintWriter`` for stores judged by content,
``RevisionWriter`` (``revision_writer``) for revisioned stores, which append by compare-and-swap.

What both share lives in ``Writer``: building and opening the intent write-ahead (the journal
records it only while the session's write count is the one the intent was built on), the inner
append and what a failure leaves behind (the intent marked failed in the journal and copied into
the run's context), clearing it once acknowledged, and the bounded wait between attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from .. import errors
from .._backends.fused import FailedAppend
from .._backends.journal import IntentState, Opened
from .._core import crashpoints
from .._core.cancellation import caller_cancelled, despite_cancellation, outliving_cancellation
from .._core.crashpoints import CrashPoint
from .._core.fingerprint import digest_items, journal_batch
from .._core.records import SESSION_WIDE, Action, Decision, Outcome, PendingWrite, Reason
from ..errors import (
    FingerprintError,
    JournalError,
    RevisionConflict,
)
from . import runstate
from .refused_writes import RequestRefused
from .settler import Settler
from .state import Clearing, SessionState, TailView, built_intent

if TYPE_CHECKING:
    from agents.run_context import RunContextWrapper


__all__ = ["FingerprintWriter", "Progress", "Writer"]

logger = logging.getLogger("agents_reconcile")

Context = MutableMapping[str, Any] | None
Recording = Callable[[IntentState], Awaitable[FailedAppend]]
"""How a one-step append's backend leaves the intent of an append that raised in the journal
(``FusedAppend.failed_recording``)."""
_T = TypeVar("_T")

_OPENING_FAILED = "_agents_reconcile_opening_failed"
"""Set on a journal error raised while an append's intent was recorded (its note says so)."""

MIN_ATTEMPTS = 3
"""An append builds its intent this often before a spent wait bound denies it."""


class Progress:
    """Where one append stands: how often it had to build its intent again (against its wait
    bound), and whether its batch went to the store (after that, its failure is uncertain)."""

    def __init__(self, bound: float) -> None:
        self.bound = bound
        self.attempts = 0
        self.started = False
        self._deadline = time.monotonic() + bound

    @property
    def spent(self) -> bool:
        """Whether the wait bound ran out, counting at least ``MIN_ATTEMPTS`` attempts: one
        slow attempt (a loaded machine, a slow journal) is not another writer holding the
        session, and the retry it is refused into is the common case after a stale memory."""
        return self.attempts >= MIN_ATTEMPTS and time.monotonic() >= self._deadline

    def pause(self) -> float:
        # Each refused attempt means another writer got through: a short, growing, random
        # pause lets it finish instead of meeting it again at once.
        return random.uniform(0.0, min(0.05, 0.001 * 2 ** min(self.attempts, 6)))


class Writer:
    """What every writer does around its own way of appending."""

    def __init__(self, state: SessionState, settler: Settler) -> None:
        self._client = client = state.client
        self._config = config = state.config
        self._inner = state.inner
        self._held = held = state.held
        self._tail = state.tail
        self._lock = state.lock
        self._in_flight = in_flight = state.in_flight
        self._carried = state.carried
        self._settler = settler
        self.ignore_ids = state.ignore_ids
        self.scheme = state.scheme
        self._clearing = Clearing(client, held, in_flight)
        self.failures = Failures(state)
        """What a failed append leaves behind."""
        # Intents may be built on the memory of the tail, which the journal vouches for (its
        # count); verify_tail reads the tail before every append instead.
        self.trusts_memory = not config.verify_tail

    async def add(self, items: list[Any], context: Context, wrapper: Any) -> None:
        """``add_items``: append ``items`` under a recorded intent; a failure keeps the intent
        pending and re-raises the backend's own exception with a note naming it."""
        # What the journal will hold, refused now if it could not hold it exactly: a replay
        # must write what the caller gave, or nothing.
        batch, digests = journal_batch(items, ignore_ids=self.ignore_ids, scheme=self.scheme)
        if not items:
            await self._inner.append(items, wrapper)
            self._carried.saved(context)
            return
        progress = Progress(self._config.in_flight_wait)
        try:
            await self.append(items, batch, digests, context, wrapper, progress)
            self._carried.saved(context)
        except BaseException as exc:
            opening = getattr(exc, _OPENING_FAILED, False)
            if (
                not progress.started
                and not opening
                and not isinstance(exc, errors.ContinuationDenied)
            ):
                # Raised while settling an earlier write (its replay failed, say): this
                # caller's own batch never started, so its outcome is not in doubt.
                exc.add_note(
                    "agents-reconcile: this append did not start (nothing of its batch was "
                    f"written to session {self._client.session_id!r}): settling an earlier "
                    "write failed"
                )
            raise

    async def append(
        self,
        items: list[Any],
        batch: tuple[Any, ...],
        digests: tuple[str, ...],
        context: Context,
        wrapper: RunContextWrapper[Any] | None,
        progress: Progress,
    ) -> None:
        raise NotImplementedError

    def has_local_work(self, context: Context) -> bool:
        return self._held.any() or runstate.has_pending(context)

    async def settle_first(self, context: Context, wrapper: Any) -> None:
        """Settle what this wrapper or the run still holds (the lock is held)."""
        if self.has_local_work(context):
            await self._settler.settle_pending(context, wrapper, locked=True)

    async def retries_a_write_settled_elsewhere(self, digests: tuple[str, ...]) -> bool:
        """Whether this append (its batch's ``digests``) is the caller's retry of one of this
        wrapper's failed writes that another took over from this very call's settlement (a
        worker that claimed it once this one's lease ran out) and stored: it is that write,
        not another, and is not appended again. A write settled by others before the call
        began is not: after their writes, the same batch is a new one (``Retried input``)."""
        elsewhere = self._held.settled_elsewhere
        if not elsewhere:
            return False
        same = [intent_id for intent_id, batch in elsewhere.items() if batch == digests]
        elsewhere.clear()
        client = self._client
        for intent_id in same:
            newest = await client.call(client.journal.decisions, intent_id=intent_id, limit=1)
            if newest and _stored_its_batch(newest[0]):
                logger.info(
                    "session %s: batch equal to failed write %s, which another settled with its "
                    "batch stored, was not appended again",
                    client.session_id,
                    intent_id,
                )
                return True
        return False

    def new_intent(
        self,
        batch: tuple[Any, ...],
        digests: tuple[str, ...],
        view: TailView,
        *,
        expected_revision: int | None = None,
    ) -> PendingWrite:
        return built_intent(
            self._client, batch, digests, view, self.ignore_ids, self._inner, expected_revision
        )

    async def open_intent(
        self,
        intent: PendingWrite,
        context: Context,
        wrapper: RunContextWrapper[Any] | None,
        *,
        seen_write_count: int | None,
        expect_write_count: int | None,
    ) -> Opened | None:
        """Record ``intent`` write-ahead. None: it was not recorded (another intent was pending
        and is settled now, or the session was written after the tail it was built on): build
        it again. A run whose state is older than the session is refused."""
        client = self._client
        busy = self._in_flight.busy
        capabilities = client.capabilities
        client.prune_when_due()
        # The intent is sealed where the session seals: the journal says so first.
        await client.mark_sealed()
        # The previous append's acknowledged intent goes in the same commit, where the
        # journal can fold it (else it is being cleared in the background).
        clearing = self._clearing.take() if capabilities.folds_clearing else None
        folding = {} if clearing is None else {"clearing": clearing}
        outlived = False
        try:
            # The journal answers a retry of this very call (a lost reply) with the intent
            # it already recorded, so a retried opening never meets itself as "pending".
            opening = partial(
                client.journal.open_intent,
                intent,
                state=IntentState.IN_FLIGHT,
                owner=client.owner,
                expect_write_count=expect_write_count,
                **folding,
            )
            try:
                answer: Opened | None = None
                rest: Awaitable[Opened] | None = None
                if capabilities.starts_eagerly and not caller_cancelled():
                    # A journal on the event loop answers at once, in the caller: no layers.
                    answer, rest = client.start(opening)
                else:
                    rest = client.call(opening)
                if rest is not None:
                    afterwards = partial(self._opening_outlived, intent, clearing, context)
                    answer = await outliving_cancellation(rest, self._in_flight, afterwards)
                assert answer is not None
                opened = answer
            except asyncio.CancelledError:
                # The opening ends in the background (_opening_outlived), unless the journal
                # call itself raised it.
                outlived = caller_cancelled()
                if not outlived:
                    self._clearing.folded(clearing, answered=False)
                raise
            except BaseException as exc:
                self._clearing.folded(clearing, answered=False)
                if isinstance(exc, JournalError):
                    self._opening_failed(intent, exc)
                raise
            self._clearing.folded(clearing, answered=True)
            if not opened.recorded:
                busy.discard(intent.intent_id)
                if opened.blocking:
                    await self._settler.settle_pending(context, wrapper, locked=True)
                    return None
                if seen_write_count is not None and opened.write_count > seen_write_count:
                    # Counts only grow: however often it is built again, it stays stale.
                    await self._refuse_stale(intent, seen_write_count, opened.write_count)
                # Another writer wrote after the tail this intent was built on; nothing was
                # recorded or counted, so retrying cannot hold anyone else back.
                self._tail.forget()
                return None
            if seen_write_count is not None and opened.write_count > seen_write_count:
                await client.call(client.journal.discard, intent.intent_id, owner=client.owner)
                busy.discard(intent.intent_id)
                await self._refuse_stale(intent, seen_write_count, opened.write_count)
            self._carried.record_seen(context, opened.write_count + 1)
        except BaseException:
            if not outlived:
                busy.discard(intent.intent_id)
            raise
        return opened

    def _opening_failed(self, intent: PendingWrite, exc: JournalError) -> None:
        """The journal failed while recording ``intent``, before its batch went anywhere. The
        intent may be recorded all the same (a reply lost): it is cleared before this
        wrapper's next operation, so it is never taken later for a write that failed, and
        replayed, while the caller was told that nothing of it was written."""
        self._held.undiscarded.add(intent.intent_id)
        setattr(exc, _OPENING_FAILED, True)
        exc.add_note(
            f"agents-reconcile: the journal failed while recording this append's intent "
            f"{intent.intent_id}, before the store was written: nothing of its batch was "
            f"written to session {self._client.session_id!r}; the intent, if it was recorded, "
            "is cleared before this session object is used again"
        )

    async def _opening_outlived(
        self,
        intent: PendingWrite,
        clearing: str | None,
        context: Context,
        opening: asyncio.Future[Opened],
    ) -> None:
        """The opening of ``intent`` ended after its caller was cancelled: the append never
        started, so an intent it recorded is cleared (nothing was written), never left in
        flight under this live process to be replayed by its next use or to hold others. The
        run's state learns the two writes the journal counted for it meanwhile."""
        client = self._client
        answered = not opening.cancelled() and opening.exception() is None
        self._clearing.folded(clearing, answered=answered)
        try:
            if answered and (opened := opening.result()).recorded:
                try:
                    await client.call(client.journal.discard, intent.intent_id, owner=client.owner)
                except JournalError:
                    # Cleared before this wrapper's next operation (``retry_discards``).
                    self._held.undiscarded.add(intent.intent_id)
                else:
                    self.seen_own_write(context, opened)
        finally:
            self._in_flight.busy.discard(intent.intent_id)

    async def _refuse_stale(
        self, intent: PendingWrite, seen_write_count: int, write_count: int
    ) -> NoReturn:
        await self._client.deny(
            intent,
            Outcome.AMBIGUOUS,
            Reason.STALE_STATE,
            {"seen_write_count": seen_write_count, "journal_write_count": write_count},
        )

    async def back_off(self, progress: Progress) -> None:
        """Wait a little before building an intent again (jittered, so that writers in other
        processes do not retry in step), or deny once the wait bound is spent."""
        progress.attempts += 1
        if progress.spent:
            await self._client.deny(
                None,
                Outcome.AMBIGUOUS,
                Reason.SESSION_BUSY,
                {"attempts": progress.attempts, "waited_seconds": progress.bound},
                intent_id=SESSION_WIDE,
            )
        await asyncio.sleep(progress.pause())

    async def write(
        self,
        intent: PendingWrite,
        items: list[Any],
        wrapper: Any,
        context: Context,
        *,
        opened: Opened | None,
        appending: Callable[[], Awaitable[Any]] | None = None,
    ) -> Any:
        """Run the inner append (or ``appending()`` instead), then clear the intent ``opened``
        in the journal (None: recorded only on failure). A failure leaves the intent failed in
        the journal (or held here) and in the run's context, and re-raises the backend's own
        exception with a note naming it."""
        recorded = opened is not None
        result: Any = None
        outlived = False
        try:
            if crashpoints.ARMED:
                crashpoints.reached(CrashPoint.AFTER_INTENT_RECORDED)
            with (
                contextlib.nullcontext()
                if opened is None
                else self._settler.claims.leased(
                    intent.intent_id, IntentState.IN_FLIGHT, opened.write_count
                )
            ):
                if appending is not None:
                    # A compare-and-swap: a late one cannot land on top of its replay.
                    result = await appending()
                elif self._inner.finishes_own_writes:
                    await self._inner.append(items, wrapper)
                else:
                    # A cancelled caller is not a cancelled write: a store's write may still
                    # land after it (a network driver). It is waited out (for half of
                    # in_flight_wait, so that another run of the session, which waits that long
                    # for a live owner, sees it end) while its intent stays held by this
                    # process, then settled by how it ended (``_write_outlived``), never taken
                    # for missing and replayed meanwhile.
                    try:
                        await outliving_cancellation(
                            self._inner.append(items, wrapper),
                            self._in_flight,
                            partial(self._write_outlived, intent, items, context, recorded),
                            bound=self._config.in_flight_wait / 2,
                        )
                    except asyncio.CancelledError:
                        outlived = caller_cancelled()  # else the store's own, as a failure
                        raise
        except RevisionConflict:
            # Proven not written: the caller takes the intent back and decides.
            raise
        except RequestRefused as refusal:
            # A known outcome: settled here, unless the journal cannot record it now (then it
            # is left pending as any failed append, and its replay is refused again).
            refused = await despite_cancellation(
                self._settler.refused.refused_append(intent, refusal, context, recorded=recorded)
            )
            if refused is None:
                await self.failures.failed(intent, items, context, refusal.cause, recorded=recorded)
                raise refusal.cause from None
            if opened is not None:
                self.seen_own_write(context, opened)
            # Its cause is the store's answer (none where payloads are sealed).
            raise refused from refused.__cause__
        except BaseException as exc:
            if outlived:
                self._tail.forget()
                if context is not None:
                    self._carried.put(context, intent)
                exc.add_note(
                    f"agents-reconcile: this append was cancelled while its write was under "
                    f"way; intent {intent.intent_id} for session {self._client.session_id!r} "
                    "stays held by this process until the write ends (at most half of "
                    "in_flight_wait), then it is cleared if the write landed, or left pending "
                    "to be reconciled"
                )
            else:
                await self.failures.failed(intent, items, context, exc, recorded=recorded)
            raise
        finally:
            if not outlived:
                self._in_flight.busy.discard(intent.intent_id)
        if crashpoints.ARMED:
            crashpoints.reached(CrashPoint.BEFORE_INTENT_CLEARED)
        if recorded:
            # Off the caller's path: folded into the next opening, or cleared in the
            # background at the loop's next turn (``state.Clearing``).
            self._clearing.acknowledged(intent.intent_id)
        if opened is not None:
            self.seen_own_write(context, opened)
        return result

    async def _write_outlived(
        self,
        intent: PendingWrite,
        items: list[Any],
        context: Context,
        recorded: bool,
        writing: asyncio.Future[Any],
    ) -> None:
        """The store write of ``intent`` ended after its caller was cancelled: acknowledged
        when it landed (as if the caller were still there), else left failed or cancelled in
        the journal for the next reconciliation, as any failed append is."""
        try:
            if not writing.cancelled() and writing.exception() is None:
                if recorded:
                    self._clearing.acknowledged(intent.intent_id)
                return
            exc = writing.exception() if not writing.cancelled() else None
            failure = exc if exc is not None else asyncio.CancelledError()
            await self.failures.failed(intent, items, context, failure, recorded=recorded)
        finally:
            self._in_flight.busy.discard(intent.intent_id)

    def seen_own_write(self, context: Context, opened: Opened) -> None:
        """The run has seen its own write to its end: opened, then acknowledged (or proven
        landed), the two writes the journal counts for it."""
        self._carried.record_seen(context, opened.write_count + 2)

    async def flush_clearing(self) -> None:
        """Clear this wrapper's acknowledged intents now (see ``state.Clearing``)."""
        await self._clearing.flush()

    async def write_count(self) -> int | None:
        """The journal's count of the session's writes, when the tail memory is kept at all."""
        return await self._client.write_count() if self.trusts_memory else None

    async def count_removal(self, context: Context) -> None:
        """A pop or a clear: count it, so that every wrapper's memory of the tail expires."""
        self._tail.forget()
        client = self._client
        count = await client.call(client.journal.count_write, client.session_id, client.backend)
        self._carried.record_seen(context, count)

    async def remove(
        self, context: Context, run: Callable[[], Awaitable[_T]], *, wrote: Callable[[_T], bool]
    ) -> _T:
        """A pop or a clear through this wrapper (``run``; ``wrote(result)``: whether it
        removed anything), counted first (the lock is held)."""
        await self.count_removal(context)
        return await run()

    async def refresh_head(self) -> None:
        """A fresh run read the history (revisioned stores: the head to build on)."""


def _stored_its_batch(decision: Decision) -> bool:
    """Whether ``decision`` vouches that its intent's batch is in the history: replayed, or
    judged landed (an operator's word that it is, against the rule, vouches for nothing)."""
    if decision.action is Action.REPLAYED:
        return True
    return (
        decision.action is Action.SETTLED
        and decision.outcome is Outcome.COMMITTED
        and decision.reason is not Reason.OPERATOR_RESOLVED
    )


class Failures:
    """What an append whose outcome is unknown leaves behind: the caller's items kept here, the
    intent failed (or cancelled) in the journal (held here too when the journal fails), copied
    into the run's context, and a note on the exception saying where."""

    def __init__(self, state: SessionState) -> None:
        self._client = state.client
        self._held = state.held
        self._tail = state.tail
        self._carried = state.carried

    async def failed(
        self,
        intent: PendingWrite,
        items: list[Any],
        context: Context,
        exc: BaseException,
        *,
        recorded: bool | None,
        recording: Recording | None = None,
    ) -> None:
        """An append that raised ``exc`` (its outcome unknown): keep the caller's items, leave
        the intent failed (or cancelled) where it can be found, and note where on ``exc``
        (``recorded``: whether the journal holds the intent in flight; None: unknown;
        ``recording``: how a one-step append's backend records it, ``FusedAppend``)."""
        state = (
            IntentState.CANCELLED if isinstance(exc, asyncio.CancelledError) else IntentState.FAILED
        )
        self._tail.forget()
        self._held.keep_in_hand(intent, items)
        note = await despite_cancellation(
            self.remember(intent, state, context, recorded=recorded, recording=recording)
        )
        exc.add_note(note)
        self._client.trail.append_failed(
            self._client.session_id, intent.intent_id, state.value, exc, note
        )

    async def remember(
        self,
        intent: PendingWrite,
        state: IntentState,
        context: Context,
        *,
        recorded: bool | None,
        recording: Recording | None = None,
    ) -> str:
        if context is not None:
            self._carried.put(context, intent)
        places = ["the RunState context"] if context is not None else []
        me = self._client.owner
        journal = self._client.journal
        taken = False
        try:
            if recording is not None:
                left = await recording(state)
                if left is FailedAppend.REFUSED:
                    return self._not_made(intent, context)
                taken = left is FailedAppend.TAKEN
                places.insert(0, "the journal (claimed by another)" if taken else "the journal")
            elif recorded:
                moved = await journal.transition(
                    intent.intent_id,
                    state=state,
                    owner=me,
                    expect_state=IntentState.IN_FLIGHT,
                    expect_owner=me,
                )
                places.insert(0, "the journal" if moved else "the journal (claimed by another)")
                taken = not moved
            else:
                await journal.record(intent, state=state, owner=me)
                if recorded is None:
                    # The call that may have recorded it in flight may have landed first.
                    await journal.transition(
                        intent.intent_id,
                        state=state,
                        owner=me,
                        expect_state=IntentState.IN_FLIGHT,
                        expect_owner=me,
                    )
                places.insert(0, "the journal")
        except JournalError as journal_error:
            # Kept in memory too: detach it from the caller's (mutable) items first.
            self._held.unjournaled[intent.intent_id] = PendingWrite.decode(
                intent.encode(), self._client.keyring
            )
            places.append(f"this session object (the journal failed: {journal_error})")
        if not taken:
            self._held.failed_here[intent.intent_id] = intent.batch_digests
        return (
            f"agents-reconcile: the outcome of this append is unknown; intent "
            f"{intent.intent_id} for session {self._client.session_id!r} is pending in "
            f"{' and '.join(places)} and will be reconciled before the session is used again"
        )

    def _not_made(self, intent: PendingWrite, context: Context) -> str:
        """A one-step append refused by another unresolved intent of its session: nothing of
        it was written, or will be, so no copy of it is kept to be reconciled."""
        self._held.settled(intent.intent_id)
        if context is not None:
            self._carried.drop(context, intent.intent_id)
        return (
            f"agents-reconcile: this append was not made (nothing of its batch was written to "
            f"session {self._client.session_id!r}): another intent of the session was "
            f"unresolved, and intent {intent.intent_id}'s one-step append records and writes "
            "nothing while one is; that intent is settled before the session is used again"
        )


class FingerprintWriter(Writer):
    """Appends to a store judged by content: each intent records the digests of the items
    before its batch, from memory while the journal's count vouches for it, else read."""

    async def append(
        self,
        items: list[Any],
        batch: tuple[Any, ...],
        digests: tuple[str, ...],
        context: Context,
        wrapper: RunContextWrapper[Any] | None,
        progress: Progress,
    ) -> None:
        # The journal checks for pending intents in the same transaction that records the new
        # one, so nothing is settled first unless this wrapper or the run holds some.
        async with self._lock.held():
            opened: Opened | None = None
            # What this run has seen of the session (a RunState carries it): checked against
            # the journal's count once the intent is open, so a stale state never writes.
            seen_write_count = (
                None if context is None else await self._carried.seen_write_count(context)
            )
            while True:
                await self.settle_first(context, wrapper)
                if await self.retries_a_write_settled_elsewhere(digests):
                    self._tail.forget()
                    return
                wanted = self._tail.wanted(len(items) + 1)
                view = self._tail.trusted(wanted) or await self.tail_view(wanted, wrapper)
                if self._config.merge_retried_input and self._tail.is_retried_batch(
                    digests, view.digests
                ):
                    logger.info(
                        "session %s: batch equal to the one just settled was not appended again",
                        self._client.session_id,
                    )
                    self._tail.drop_settled()
                    if context is not None:
                        # The store ends exactly as this run's own write left it: in step again.
                        self._carried.record_seen(context, await self._client.write_count())
                    return
                intent = self.new_intent(batch, digests, view)
                if crashpoints.ARMED:
                    crashpoints.reached(CrashPoint.BEFORE_INTENT_RECORDED)
                # In flight from the moment it can be seen in the journal: another wrapper in
                # this process must never take it for a failed write.
                self._in_flight.busy.add(intent.intent_id)
                opened = await self.open_intent(
                    intent,
                    context,
                    wrapper,
                    seen_write_count=seen_write_count,
                    expect_write_count=view.write_count if self.trusts_memory else None,
                )
                if opened is not None:
                    break
                await self.back_off(progress)
            self._tail.drop_settled()
            progress.started = True
            await self.write(intent, items, wrapper, context, opened=opened)
            if opened is not None:
                # Its opening and its acknowledgement are the two writes counted since.
                self._tail.extend(intent.batch_digests, write_count=opened.write_count + 2)

    async def tail_view(self, wanted: int, wrapper: Any) -> TailView:
        """Digests of the ``wanted`` newest items (``TailMemory.wanted``), read from the store
        (the memory of them, ``TailMemory.trusted``, is looked at first by the caller)."""
        count = await self.write_count()
        items = await self._inner.read(wanted, wrapper)
        try:
            digests = digest_items(items[-wanted:], ignore_ids=self.ignore_ids, scheme=self.scheme)
        except FingerprintError as exc:
            raise FingerprintError(
                f"an item already stored in session {self._client.session_id!r} cannot be "
                f"fingerprinted: {exc}",
                index=exc.index,
            ) from exc
        view = TailView(digests, whole=len(items) < wanted, write_count=count)
        self._tail.remember(view)
        return view
