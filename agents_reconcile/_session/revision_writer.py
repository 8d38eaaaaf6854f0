"""The writer for revisioned stores: every append is a compare-and-swap against the head this
wrapper knows, under the intent's id as write id. The store itself refuses the write if anyone
wrote since, so no tail is read and nothing is guessed; a refusal is judged at once by the
store's record of writes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._backends.journal import IntentState, Opened
from .._core import crashpoints
from .._core.cancellation import despite_cancellation
from .._core.crashpoints import CrashPoint
from .._core.ownership import current_owner
from .._core.policy import Step, refused_append_step
from .._core.records import Outcome, PendingWrite
from .._core.revision import RevisionedStore
from ..errors import LeaseLost, RevisionConflict
from .fused import FusedAppend, fused_append
from .judges import judge_revision
from .state import SessionState, TailView
from .writer import Context, Progress, Writer

if TYPE_CHECKING:
    from agents.run_context import RunContextWrapper

    from .settler import Settler

__all__ = ["RevisionWriter"]

logger = logging.getLogger("agents_reconcile")

_NO_TAIL = TailView((), whole=False)
_UNKNOWN = object()
_T = TypeVar("_T")


class RevisionWriter(Writer):
    """Appends to a revisioned store by compare-and-swap."""

    def __init__(self, state: SessionState, settler: Settler) -> None:
        super().__init__(state, settler)
        assert state.store is not None  # a revisioned store's writer
        self.store: RevisionedStore = state.store
        self.known = state.head
        # Whether this store and the journal can append in one script (decided on first use).
        self._fusion: FusedAppend | object | None = _UNKNOWN

    async def append(
        self,
        items: list[Any],
        batch: tuple[Any, ...],
        digests: tuple[str, ...],
        context: Context,
        wrapper: RunContextWrapper[Any] | None,
        progress: Progress,
    ) -> None:
        store, known = self.store, self.known
        client = self._client
        client.prune_when_due()
        # Its intents are sealed where the session seals: the journal says so first.
        await client.mark_sealed()
        async with self._lock.held():
            seen_write_count = await self._carried.seen_write_count(context)
            fused = await self._fused()
            first = True
            while True:
                if not first:
                    await self.back_off(progress)
                first = False
                await self.settle_first(context, wrapper)
                if await self.retries_a_write_settled_elsewhere(digests):
                    known.head = None  # others wrote meanwhile: read it before the next
                    return
                if known.head is None:
                    known.head = await store.head()
                settled, known.settled_at = known.settled_at, None
                if (
                    settled is not None
                    and self._config.merge_retried_input
                    and settled == (digests, known.head)
                ):
                    logger.info(
                        "session %s: batch equal to the one just settled was not appended again",
                        client.session_id,
                    )
                    return
                # No tail before it: the store's compare-and-swap judges what came first.
                intent = self.new_intent(batch, digests, _NO_TAIL, expected_revision=known.head)
                if crashpoints.ARMED:
                    crashpoints.reached(CrashPoint.BEFORE_INTENT_RECORDED)
                self._in_flight.busy.add(intent.intent_id)
                opened: Opened | None = None
                try:
                    if fused is not None:
                        new_head = await self._append_fused(
                            fused, intent, items, context, wrapper, seen_write_count, progress
                        )
                        if new_head is None:
                            continue
                        known.head = new_head
                        return
                    opened = await self.open_intent(
                        intent,
                        context,
                        wrapper,
                        seen_write_count=seen_write_count,
                        expect_write_count=None,
                    )
                    if opened is None:
                        continue
                    progress.started = True
                    new_head = await self.write(
                        intent,
                        items,
                        wrapper,
                        context,
                        opened=opened,
                        appending=self._compare_and_swap(intent, items),
                    )
                except RevisionConflict as conflict:
                    if await self._refused(intent, conflict, opened, context, progress):
                        continue
                    return
                except BaseException:
                    known.head = None
                    raise
                known.head = new_head
                return

    def _compare_and_swap(
        self, intent: PendingWrite, items: list[Any]
    ) -> Callable[[], Awaitable[int]]:
        def compare_and_swap() -> Awaitable[int]:
            assert intent.expected_revision is not None
            return self.store.append_if(
                items,
                expected=intent.expected_revision,
                write_id=intent.intent_id,
                writer=str(current_owner()),
            )

        return compare_and_swap

    async def _refused(
        self,
        intent: PendingWrite,
        conflict: RevisionConflict,
        opened: Opened | None,
        context: Context,
        progress: Progress,
    ) -> bool:
        """The store refused ``intent``'s append: either the head moved (nothing written) or
        the write id is already there (a retry after a lost reply). The record of writes says
        which, before the intent is let go. True: build the intent again."""
        client, known = self._client, self.known
        try:
            verdict = await judge_revision(self.store, intent)
        except BaseException as exc:
            known.head = None
            note = await despite_cancellation(
                self.failures.remember(
                    intent, IntentState.FAILED, context, recorded=opened is not None
                )
            )
            exc.add_note(note)
            client.trail.append_failed(client.session_id, intent.intent_id, "failed", exc, note)
            raise
        if opened is not None:
            try:
                # Taken back only while still held in flight by this writer, checked in the
                # same step: an intent claimed by another (a worker that took over an expired
                # lease), or settled by one (that worker, an operator's resolution) even as
                # this writer looked, is refused with LeaseLost; its fate is decided elsewhere.
                await client.call(client.journal.discard, intent.intent_id, owner=client.owner)
            except LeaseLost as lost:
                # Its lease ran out and another worker claimed it: the store refused this
                # late write, and the batch is the new holder's to settle, never this one's.
                known.head = None
                if verdict.outcome is Outcome.COMMITTED:
                    return False  # the new holder's replay already stored it, under its id
                lost.add_note(
                    f"agents-reconcile: intent {intent.intent_id} for session "
                    f"{client.session_id!r} was taken over; its new holder settles the batch"
                )
                raise
        known.head = conflict.actual
        step = refused_append_step(verdict.outcome, on_extended=self._config.on_extended)
        if step is Step.SETTLE:
            known.head = None
            if opened is not None:
                self.seen_own_write(context, opened)
            return False
        if step is Step.REPLAY_AFTER_OTHERS:
            progress.started = False  # proven not written: build it again
            return True
        await client.deny(intent, verdict.outcome, verdict.reason, verdict.evidence)

    async def _fused(self) -> FusedAppend | None:
        if self._fusion is _UNKNOWN:
            self._fusion = await fused_append(self._client.journal, self.store)
        return self._fusion if isinstance(self._fusion, FusedAppend) else None

    async def _append_fused(
        self,
        fused: FusedAppend,
        intent: PendingWrite,
        items: list[Any],
        context: Context,
        wrapper: RunContextWrapper[Any] | None,
        seen_write_count: int | None,
        progress: Progress,
    ) -> int | None:
        """Open ``intent`` and append its batch in one script (``fused``). The new head, or
        None to build the intent again; a refusal of the store raises ``RevisionConflict``
        (nothing was recorded), a stale run is denied."""
        busy = self._in_flight.busy
        clearing = self._clearing.take()
        progress.started = True
        try:
            answer = await fused.append(
                intent,
                items,
                owner=self._client.owner,
                clearing=clearing,
                seen_write_count=seen_write_count,
            )
        except BaseException as exc:
            # Unknown: both or neither happened (a script whose caller was cancelled may still
            # run). The intent is recorded failed (moved to failed when the script recorded
            # it) and judged by the record of writes, which a late script cannot fool: its
            # append and any replay of it are compare-and-swaps on one head, under one id.
            # Where the backend can, that is decided with the step's own check: an intent
            # of the session in the way refused the step, which then wrote nothing.
            self._clearing.folded(clearing, answered=False)
            busy.discard(intent.intent_id)
            recording = fused.failed_recording(intent, owner=self._client.owner, clearing=clearing)
            await self.failures.failed(
                intent, items, context, exc, recorded=None, recording=recording
            )
            raise
        self._clearing.folded(clearing, answered=True)
        busy.discard(intent.intent_id)
        opened = answer.opened
        if answer.refused == "stale_state":
            assert seen_write_count is not None
            progress.started = False
            await self._refuse_stale(intent, seen_write_count, opened.write_count)
        if answer.refused is not None:
            progress.started = False
            actual = answer.head if answer.head is not None else -1
            raise RevisionConflict(
                f"session {self._client.session_id!r}: the store refused write "
                f"{intent.intent_id} ({answer.refused}); nothing was recorded",
                expected=intent.expected_revision if intent.expected_revision is not None else -1,
                actual=actual,
            )
        if not opened.recorded:
            progress.started = False
            if opened.blocking:
                await self._settler.settle_pending(context, wrapper, locked=True)
            return None
        revision = answer.revision
        if revision is None:
            # Opened already by this very call (its reply was lost, the client retried): the
            # script appended then, and the record of writes has the revision.
            found = await self.store.find_write(intent.intent_id)
            if found is None:
                return None
            revision = found.revision
        if crashpoints.ARMED:
            crashpoints.reached(CrashPoint.BEFORE_INTENT_CLEARED)
        self._clearing.acknowledged(intent.intent_id)
        self.seen_own_write(context, opened)
        return int(revision)

    async def remove(
        self, context: Context, run: Callable[[], Awaitable[_T]], *, wrote: Callable[[_T], bool]
    ) -> _T:
        await self.count_removal(context)
        head = self.known.head
        result = await run()
        await self.follow_own_removal(head, wrote=wrote(result))
        return result

    async def refresh_head(self) -> None:
        """A fresh run's read of the history: what it sees is the head its next append
        builds on."""
        self.known.head = await self.store.head()

    async def follow_own_removal(self, head: int | None, *, wrote: bool) -> None:
        """Move the known head past this wrapper's own pop or clear.

        The store records the removal as a write (of an anonymous writer), so the next
        append's compare-and-swap would otherwise meet it and take it for someone else's.
        The head moves only when it moved by exactly this removal's own write: then nobody
        else wrote in between. Otherwise the known head stays, and the next append meets
        the others' writes and is judged by them."""
        if head is None:
            return
        now = await self.store.head()
        if now == head + int(wrote) or now == head:
            self.known.head = now
