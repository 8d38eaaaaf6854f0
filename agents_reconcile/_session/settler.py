"""The settler: every pending intent of a session goes claim -> judge -> policy -> settle,
replay or refuse, oldest first, before the session is used again.

An intent is claimed in the journal (a compare-and-set) so two workers never both replay it, and
never while a live owner may still be writing it: that is waited for, within a bound. A replay
whose caller is cancelled goes on in the background, keeping its claim, so nobody else replays
it meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from .._backends.journal import IntentState, JournalEntry
from .._core import crashpoints
from .._core.cancellation import despite_cancellation
from .._core.classify import Verdict
from .._core.crashpoints import CrashPoint
from .._core.ownership import current_owner
from .._core.policy import Step, settlement_step
from .._core.records import Action, Decision, Outcome, PendingWrite, Reason
from .._core.revision import extended_write_id, void_write_id
from ..errors import IntentConflict, LeaseLost, RevisionConflict
from .claims import AlreadySettled, Claims, Renewal
from .inner import reconciling_allowed, without_reconciling
from .judges import judge
from .refused_writes import RefusedWrites, RequestRefused
from .state import SessionState, clear_acknowledged, retry_discards

if TYPE_CHECKING:
    from agents.run_context import RunContextWrapper

__all__ = ["Settler"]

logger = logging.getLogger("agents_reconcile")

# A replay that keeps meeting other writers' compare-and-swaps is judged again, this often.
_REPLAY_ATTEMPTS: Final = 3
# An intent whose claim was lost (taken over, or its lease ran down) is looked at again, this
# often, before the loss is reported.
_RECLAIMS: Final = 3
_ACTIONS: Final = {Step.SETTLE: Action.SETTLED, Step.REPLAY: Action.REPLAYED}


class Settler:
    """Settles one session's pending intents (from its journal, this wrapper, and the run)."""

    def __init__(self, state: SessionState) -> None:
        self._client = client = state.client
        self._config = config = state.config
        self._inner = state.inner
        self._store = store = state.store
        self._held = state.held
        self._tail = state.tail
        self._head = state.head
        self._lock = state.lock
        self._in_flight = in_flight = state.in_flight
        self._carried = state.carried
        self._state = state
        self.claims = Claims(client=client, config=config, store=store, in_flight=in_flight)
        """Taking this session's intents, the leases on them, giving them back."""
        self.replays = Replays(state, self.claims)
        """The settler's own writes to the store."""
        self.refused = RefusedWrites(state, self)
        """Settling the writes the store refused outright (the writer's and the replays')."""

    async def settle_before_read(
        self, context: MutableMapping[str, Any] | None, wrapper: RunContextWrapper[Any] | None
    ) -> None:
        """Before the session is read: settle pending intents, unless the read is one this
        package makes itself while reconciling (``inner.reconciling_allowed``)."""
        if reconciling_allowed():
            await self.settle_pending(context, wrapper)

    async def settle_pending(
        self,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None = None,
        *,
        locked: bool = False,
    ) -> list[Decision]:
        """Settle every pending intent of this session, oldest first; deny on the first that
        cannot be vouched for. ``locked``: the caller holds the session's lock already."""
        client = self._client
        await retry_discards(client, self._held, self._in_flight)
        unverified = await self._carried.adopt(context)
        entries = await client.call(client.journal.pending, client.session_id, client.backend)
        # This wrapper's failed appends pending nowhere were settled elsewhere meanwhile.
        held = self._held
        if held.failed_here:
            still = {e.intent.intent_id for e in entries}.union(held.unjournaled)
            for gone in [i for i in held.failed_here if i not in still]:
                held.settled(gone)
        if entries and self._in_flight.acknowledged:
            entries = await clear_acknowledged(client, self._in_flight, entries)
        if not entries and not self._held.unjournaled and not unverified:
            return []
        if not locked:
            async with self._lock.held():
                return await self.settle_pending(context, wrapper, locked=True)
        with client.trail.step(
            "reconcile",
            session_id=client.session_id,
            journaled=len(entries),
            unjournaled=len(self._held.unjournaled),
            carried=len(unverified),
        ) as traced:
            decisions = await self._settle_all(entries, unverified, context, wrapper)
            traced["decisions"] = len(decisions)
        return decisions

    async def _settle_all(
        self,
        entries: list[JournalEntry],
        unverified: list[PendingWrite],
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> list[Decision]:
        decisions: list[Decision] = []
        for entry in entries:
            try:
                decisions.append(await self._settle_entry(entry, context, wrapper))
            except AlreadySettled:
                # Settled by another while this call settled it (it took the claim over).
                self._held.settled_by_another([entry.intent.intent_id])
                continue
        for intent in list(self._held.unjournaled.values()):
            decision = await self._settle_unjournaled(intent, context, wrapper)
            if decision is not None:
                decisions.append(decision)
        for intent in unverified:
            decision = await self._settle_carried(intent, context, wrapper)
            if decision is not None:
                decisions.append(decision)
        return decisions

    async def _settle_carried(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision | None:
        """Settle a copy only the run carries, which the journal has never seen and no
        signature vouches for: it may have been edited by whoever held the state. It is judged
        for this run alone; only a replay records it in the journal (claimed, then settled at
        once like any other), so it never stays there as a pending intent that would hold
        other runs of the session back."""
        client = self._client
        verdict = await self.judge(intent, wrapper)
        step = settlement_step(
            verdict.outcome,
            on_unchanged=self._config.on_unchanged,
            on_extended=self._config.on_extended,
        )
        if step is Step.SETTLE:
            # Its batch is in the history (often: a write that ended after its caller was
            # cancelled, acknowledged and cleared from the journal meanwhile). Nothing is
            # pending in the journal to close: the copy is dropped, the decision traced.
            decision = client.decision(
                intent, verdict.outcome, verdict.reason, Action.SETTLED, verdict.evidence
            )
            await self.after_settlement(intent, context, Action.SETTLED)
            client.trail.decided(decision)
            return decision
        if step in (Step.LEAVE_FOR_OPERATOR, Step.REFUSE):
            await client.deny(
                intent,
                verdict.outcome,
                Reason.OPERATOR_REQUIRED if step is Step.LEAVE_FOR_OPERATOR else verdict.reason,
                {**verdict.evidence, "source": "run_state_only"},
            )
        await client.call(
            client.journal.record, intent, state=IntentState.FAILED, owner=client.owner
        )
        return await self._settle_recorded(intent.intent_id, context, wrapper)

    async def _settle_unjournaled(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision | None:
        """Settle an intent only this object remembers (the journal failed when it failed)."""
        client = self._client
        journal = client.journal
        if await client.call(journal.is_settled, intent.intent_id):
            del self._held.unjournaled[intent.intent_id]
            return None
        try:
            await client.call(journal.record, intent, state=IntentState.FAILED, owner=client.owner)
        except IntentConflict as exc:
            if await client.call(journal.is_settled, intent.intent_id):
                del self._held.unjournaled[intent.intent_id]
                return None
            await client.deny(
                intent,
                Outcome.AMBIGUOUS,
                Reason.COPIES_DISAGREE,
                {"error": str(exc)},
                binding=True,
                cause=exc,
            )
        del self._held.unjournaled[intent.intent_id]
        return await self._settle_recorded(intent.intent_id, context, wrapper)

    async def _settle_recorded(
        self,
        intent_id: str,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision | None:
        """Settle an intent just recorded in the journal (None: someone settled it first)."""
        entry = await self._client.call(self._client.journal.get, intent_id)
        if entry is None:
            return None
        try:
            return await self._settle_entry(entry, context, wrapper)
        except AlreadySettled:
            return None

    async def _settle_entry(
        self,
        entry: JournalEntry,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision:
        for _ in range(_RECLAIMS):
            try:
                return await self._settle_claimed(entry, context, wrapper)
            except LeaseLost:
                # Taken over, or its lease ran down before a write: it is still pending until
                # someone settles it. Look again (a new holder is waited for like any other).
                current = await self._client.call(self._client.journal.get, entry.intent.intent_id)
                if current is None:
                    raise AlreadySettled(entry.intent.intent_id) from None
                entry = current
        return await self._settle_claimed(entry, context, wrapper)

    async def _settle_claimed(
        self,
        entry: JournalEntry,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
    ) -> Decision:
        intent = entry.intent
        fence = await self.claims.claim(entry, landed=partial(self._landed, wrapper=wrapper))
        in_flight = self._in_flight
        in_flight.busy.add(intent.intent_id)
        try:
            with self.claims.leased(intent.intent_id, IntentState.RECONCILING, fence) as lease:
                return await self._decide(intent, context, wrapper, lease)
        except LeaseLost:
            await despite_cancellation(self.claims.release(intent, fence))
            raise
        except BaseException:
            if intent.intent_id in in_flight.replaying:
                # A cancelled replay goes on in the background and keeps the claim; it
                # releases both when it ends (see replay).
                raise
            await despite_cancellation(self.claims.release(intent, fence))
            raise
        finally:
            if intent.intent_id not in in_flight.replaying:
                in_flight.busy.discard(intent.intent_id)

    async def _landed(self, intent: PendingWrite, *, wrapper: Any) -> bool:
        """Whether the history holds ``intent``'s batch now (judged afresh)."""
        return (await self.judge(intent, wrapper)).outcome is Outcome.COMMITTED

    async def judge(self, intent: PendingWrite, wrapper: Any) -> Verdict:
        """What the store's history says about ``intent`` now (``judges.judge``)."""
        return await judge(self._state, intent, wrapper)

    async def _decide(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        wrapper: RunContextWrapper[Any] | None,
        lease: Renewal,
    ) -> Decision:
        """Judge, then act as the policy says, under ``lease`` (a holder that lost it writes
        nothing more: ``LeaseLost``); a replay that meets another writer's compare-and-swap
        (revisioned stores) is judged again, a bounded number of times."""
        client, config = self._client, self._config
        for _ in range(_REPLAY_ATTEMPTS):
            verdict = await self.judge(intent, wrapper)
            if crashpoints.ARMED:
                crashpoints.reached(CrashPoint.DURING_RECONCILE_READ)
            outcome, evidence = verdict.outcome, verdict.evidence
            step = settlement_step(
                outcome, on_unchanged=config.on_unchanged, on_extended=config.on_extended
            )
            if step is Step.SETTLE:
                if crashpoints.ARMED:
                    crashpoints.reached(CrashPoint.BEFORE_SETTLE)
            elif step is Step.LEAVE_FOR_OPERATOR:
                await client.deny(
                    intent, outcome, Reason.OPERATOR_REQUIRED, evidence, Action.LEFT_PENDING
                )
            elif step is Step.REFUSE:
                await client.deny(intent, outcome, verdict.reason, evidence)
            else:
                if crashpoints.ARMED:
                    crashpoints.reached(CrashPoint.BEFORE_REPLAY)
                lease.check()
                try:
                    await self.replays.replay(intent, wrapper, step, evidence, lease.fence)
                except RevisionConflict:
                    continue  # someone wrote meanwhile: judge again
                except RequestRefused as refusal:
                    # A known outcome: recorded, and nothing of the rest sent again.
                    before = int(evidence["landed"]) if step is Step.REPLAY_REST else 0
                    refused = await self.refused.refused_replay(
                        intent,
                        refusal,
                        context,
                        before=before,
                        fence=lease.fence,
                        evidence=evidence,
                    )
                    raise refused from refused.__cause__
                if crashpoints.ARMED:
                    crashpoints.reached(CrashPoint.AFTER_REPLAY)
            action = _ACTIONS.get(step, Action.REPLAYED)
            decision = client.decision(intent, outcome, verdict.reason, action, evidence)
            await client.call(
                client.journal.settle, decision, owner=client.owner, fence=lease.fence
            )
            await self.after_settlement(intent, context, action)
            client.trail.decided(decision)
            return decision
        await client.deny(
            intent,
            Outcome.AMBIGUOUS,
            Reason.SESSION_BUSY,
            {"expected_revision": intent.expected_revision, "problem": "head kept moving"},
            Action.LEFT_PENDING,
        )

    def after_set_aside(self, intent_id: str) -> None:
        """Forget a damaged intent an operator set aside: nothing of it vouches for the
        history, so nothing this session remembers of the tail does either."""
        self._held.settled(intent_id)
        self._tail.forget()
        self._head.settled_at = None

    async def after_settlement(
        self,
        intent: PendingWrite,
        context: MutableMapping[str, Any] | None,
        action: Action,
        *,
        vouched: bool = True,
    ) -> None:
        """Forget a settled intent everywhere this session remembers it. ``vouched``: the
        settlement found (or put) its batch in the history; one that did not (an operator
        abandoned it, or called it committed against the rule) leaves nothing to skip a
        later identical batch by."""
        if context is not None:
            self._carried.drop(context, intent.intent_id)
        self._held.settled(intent.intent_id)
        if not vouched:
            self._tail.forget()
            self._head.settled_at = None
            return
        # A settlement is a counted write; the next append re-reads the tail in any case.
        self._tail.settle(intent.batch_digests, intent.before_digests)
        if intent.expected_revision is not None and self._store is not None:
            known = self._head
            head = await self._store.head() if action is Action.SETTLED else known.head
            known.settled_at = (intent.batch_digests, head) if head is not None else None


class Replays:
    """The settler's own writes to the store: a batch the history lacks appended once
    (``replay``), and a revisioned store fenced against a write closed without being written
    (``void``)."""

    def __init__(self, state: SessionState, claims: Claims) -> None:
        self._inner = state.inner
        self._store = state.store
        self._held = state.held
        self._tail = state.tail
        self._head = state.head
        self._in_flight = state.in_flight
        self._claims = claims

    async def replay(
        self,
        intent: PendingWrite,
        wrapper: Any,
        step: Step,
        evidence: dict[str, Any],
        fence: int | None = None,
    ) -> None:
        """Append the missing batch once (``REPLAY_REST``: the part after the requests that
        landed). A cancelled caller gets its cancellation at once; the append goes on in the
        background, still owning the intent, so nobody replays it meanwhile, and releases it
        when it ends (the next reconciliation then settles it)."""
        # Whatever happens next, the store may change: no memory of its tail survives this.
        self._tail.forget_view()
        batch = self._held.replay_batch(intent)
        if step is Step.REPLAY_REST:
            batch = batch[int(evidence["landed"]) :]
        store = self._store if intent.expected_revision is not None else None
        with without_reconciling():
            task: asyncio.Future[Any]
            if store is None:
                task = asyncio.ensure_future(self._inner.append(batch, wrapper))
            else:
                # After others' writes it lands elsewhere than the write expected: an id of
                # its own (see revision.extended_write_id).
                write_id = intent.intent_id
                if step is Step.REPLAY_AFTER_OTHERS:
                    write_id = extended_write_id(write_id)
                task = asyncio.ensure_future(
                    store.append_if(
                        batch,
                        expected=int(evidence["head"]),
                        write_id=write_id,
                        writer=str(current_owner()),
                    )
                )
        try:
            head = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._in_flight.replaying.add(intent.intent_id)
                self._in_flight.keep(task)
                task.add_done_callback(partial(self._replay_ended, intent, fence))
            raise
        if store is not None:
            self._head.head = head

    async def void(self, intent: PendingWrite) -> int:
        """Fence a revisioned store against ``intent``'s write, which is being closed without
        being written (an operator's abandon, or committed against the rule): an empty write
        under ``void_write_id`` at the head the write expected, so that head is gone and the
        owner's late compare-and-swap is refused. Returns the new head; ``RevisionConflict``
        when the head moved meanwhile (nothing written)."""
        assert self._store is not None and intent.expected_revision is not None
        head = await self._store.append_if(
            [],
            expected=intent.expected_revision,
            write_id=void_write_id(intent.intent_id),
            writer=str(current_owner()),
        )
        self._head.head = None  # the next append builds on the head as it is now
        return head

    def _replay_ended(
        self, intent: PendingWrite, fence: int | None, task: asyncio.Future[Any]
    ) -> None:
        in_flight = self._in_flight
        in_flight.replaying.discard(intent.intent_id)
        in_flight.busy.discard(intent.intent_id)
        if not task.cancelled():
            task.exception()  # retrieved: the outcome is settled by the next reconciliation
        in_flight.keep(asyncio.ensure_future(self._claims.release(intent, fence)))
