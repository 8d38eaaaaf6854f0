"""The writer for revisioned stores: every append is a compare-and-swap against the head this
wrapper knows, under the intent's id as write id. The store itself refuses the write if anyone
wrote since, so no tail is read and nothing is guessed; a refusal is judged at once by the
store's record of writes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .crashpoints import CrashPoint, reached
from .errors import RevisionConflict
from .held import KnownHead
from .inflight import despite_cancellation
from .journal import IntentState, Opened
from .judges import judge_revision
from .ownership import current_owner
from .policy import Step, refused_append_step
from .records import PendingWrite
from .revision import RevisionedStore
from .tail import TailView
from .writer import Context, Progress, Writer

if TYPE_CHECKING:
    from agents.run_context import RunContextWrapper

__all__ = ["RevisionWriter"]

logger = logging.getLogger("agents_reconcile")

_NO_TAIL = TailView((), whole=False)
_T = TypeVar("_T")


class RevisionWriter(Writer):
    """Appends to a revisioned store by compare-and-swap."""

    def __init__(self, *, store: RevisionedStore, head: KnownHead, **parts: Any) -> None:
        super().__init__(**parts)
        self.store = store
        self.known = head

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
        async with self._lock.held():
            if not self.write_ahead:
                await self._settler.settle_pending(context, wrapper, locked=True)
            accounted = await self._carried.accounted(context) if self.write_ahead else None
            first = True
            while True:
                if not first:
                    await self.back_off(progress)
                first = False
                await self.settle_first(context, wrapper)
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
                intent = dataclasses.replace(
                    self.new_intent(batch, digests, _NO_TAIL),
                    before_digests=(),
                    persisted_count=None,
                    expected_revision=known.head,
                )
                reached(CrashPoint.BEFORE_INTENT_RECORDED)
                self._in_flight.busy.add(intent.intent_id)
                opened: Opened | None = None
                if self.write_ahead:
                    opened = await self.open_intent(
                        intent, context, wrapper, accounted=accounted, expect_count=None
                    )
                    if opened is None:
                        continue
                progress.started = True

                def compare_and_swap(opened_intent: PendingWrite = intent) -> Any:
                    assert opened_intent.expected_revision is not None
                    return store.append_if(
                        items,
                        expected=opened_intent.expected_revision,
                        write_id=opened_intent.intent_id,
                        writer=str(current_owner()),
                    )

                try:
                    new_head = await self.write(
                        intent,
                        items,
                        wrapper,
                        context,
                        opened=opened,
                        appending=compare_and_swap,
                    )
                except RevisionConflict as conflict:
                    # The store refused: either the head moved (nothing written) or the write
                    # id is already there (a driver that retried after a lost reply). The
                    # record of writes says which, before the intent is let go.
                    try:
                        verdict = await judge_revision(store, intent)
                    except BaseException as exc:
                        known.head = None
                        note = await despite_cancellation(
                            self.remember_failure(
                                intent, IntentState.FAILED, context, recorded=self.write_ahead
                            )
                        )
                        exc.add_note(note)
                        raise
                    if opened is not None:
                        await client.call(client.journal.discard, intent.intent_id)
                    known.head = conflict.actual
                    step = refused_append_step(
                        verdict.outcome, on_extended=self._config.on_extended
                    )
                    if step is Step.SETTLE:
                        known.head = None
                        if opened is not None:
                            self.seen_own_write(context, opened)
                        return
                    if step is Step.REPLAY_AFTER_OTHERS:
                        progress.started = False  # proven not written: build it again
                        continue
                    await client.deny(intent, verdict.outcome, verdict.reason, verdict.evidence)
                except BaseException:
                    known.head = None
                    raise
                known.head = new_head
                return

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
