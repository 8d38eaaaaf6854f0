"""An operator's resolution of a pending intent: ``committed``, ``replay`` or ``abandon``.

A resolution is a settlement like any other: the intent is claimed in the journal first (a
compare-and-set, so it never races a worker settling the same intent, and never takes an
intent a live owner is still writing), judged afresh so the trail keeps what the rule saw at
that moment, then settled with a decision naming the resolution, the actor and the reason.
What the operator may ask is the policy's word (``policy.resolution_step``); a refusal writes
nothing and releases the claim.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .. import errors
from .._backends.journal import ACTIVE_STATES, JournalEntry
from .._core.cancellation import despite_cancellation
from .._core.ownership import Takeover, current_owner, default_actor, takeover
from .._core.policy import PROVEN_ABSENT, Resolution, Step, resolution_step
from .._core.records import Action, Decision, Outcome, Reason
from ..errors import ResolutionRefused, RevisionConflict
from .refused_writes import RequestRefused
from .setting_aside import damage_of, set_aside

if TYPE_CHECKING:
    from .._core.classify import Verdict
    from .._core.records import PendingWrite
    from .journal_client import JournalClient
    from .settler import Settler
    from .state import SessionLock

__all__ = ["Resolver"]

logger = logging.getLogger("agents_reconcile")

_ACTIONS: Final = {
    Resolution.COMMITTED: Action.SETTLED,
    Resolution.REPLAY: Action.REPLAYED,
    Resolution.ABANDON: Action.DROPPED,
}
# What each resolution asserts about the batch; abandon asserts nothing (the judged outcome,
# or ambiguous when nothing was judged, is kept).
_ASSERTED: Final = {Resolution.COMMITTED: Outcome.COMMITTED, Resolution.REPLAY: Outcome.UNCHANGED}
_MAX_REASON: Final = 500
RESOLVE_AFTER_LEASES: Final = 10
"""How many of its owner's leases an active intent must be past its last renewal before an
operator may resolve it where the store cannot refuse the owner's late write."""


@dataclass(frozen=True)
class Resolver:
    """Resolves one session's intents. Without a ``settler`` (only a journal at hand) nothing
    is judged, so ``replay`` is refused and the decision says the store was not read."""

    client: JournalClient
    settler: Settler | None = None
    lock: SessionLock | None = None

    async def resolve(
        self,
        intent_id: str,
        resolution: Resolution | str,
        *,
        reason: str,
        actor: str | None = None,
        override: bool = False,
    ) -> Decision:
        """Resolve ``intent_id`` as ``resolution`` and return the decision stored for it.
        Raises ``ResolutionRefused`` (nothing written) when it cannot be done as asked."""
        chosen = _resolution(resolution, intent_id)
        note = _reason(reason, intent_id)
        who = _actor(actor, intent_id)
        if not isinstance(override, bool):
            raise ResolutionRefused(
                f"override must be True or False, not {override!r}", intent_id=intent_id
            )
        if self.lock is None:
            return await self._resolve(intent_id, chosen, note, who, override)

        async def busy(waited: float) -> None:
            # Not a denial of a run: nothing is recorded, the operator is told.
            raise ResolutionRefused(
                f"session {self.client.session_id!r} stayed busy in this process for "
                f"{waited} s; try again",
                intent_id=intent_id,
            )

        async with self.lock.held(busy):
            return await self._resolve(intent_id, chosen, note, who, override)

    async def resolve_effect(
        self, key: str, outcome: str, *, reason: str, actor: str | None, output: Any
    ) -> Decision:
        """An operator's resolution of a tool effect whose outcome is unknown
        (``ReconcilingSession.resolve_effect``)."""
        from .._effects.resolve_effect import resolve_effect
        from .._effects.tool import effects_of

        client = self.client
        return await resolve_effect(
            client,
            effects_of(client.journal),
            key,
            outcome,
            reason=reason,
            actor=actor,
            output=output,
            lease_seconds=client.config.lease_seconds,
        )

    async def preview(self, intent_id: str) -> Verdict | None:
        """What the rule judges about a pending intent now, without claiming or settling it
        (None: no store to judge it against). Raises ``ResolutionRefused`` for an intent this
        session cannot resolve."""
        return await self._judge((await self._entry(intent_id)).intent)

    async def _resolve(
        self, intent_id: str, resolution: Resolution, note: str, actor: str, override: bool
    ) -> Decision:
        problem = await damage_of(self.client.journal, intent_id)
        if problem is not None:
            return await self._set_aside(intent_id, resolution, problem, note, actor, override)
        entry = await self._entry(intent_id)
        self._refuse_if_held(entry)
        if self.settler is None and resolution is Resolution.REPLAY:
            # Nothing to judge it against: refused before anything is claimed.
            raise ResolutionRefused(_refusal(intent_id, None, resolution), intent_id=intent_id)
        if self.settler is None:
            return await self._resolve_claimed(entry, resolution, note, actor, override)
        with self.settler.claims.holding(intent_id):
            return await self._resolve_claimed(entry, resolution, note, actor, override)

    async def _resolve_claimed(
        self,
        entry: JournalEntry,
        resolution: Resolution,
        note: str,
        actor: str,
        override: bool,
    ) -> Decision:
        client = self.client
        entry = await self._claim(entry)
        intent = entry.intent
        intent_id = intent.intent_id
        replaying = False
        try:
            verdict = await self._judge(intent)
            step = resolution_step(
                resolution, None if verdict is None else verdict.outcome, override=override
            )
            judged = None if verdict is None else verdict.outcome
            forced = (step is Step.REPLAY_AFTER_OTHERS and judged is not Outcome.EXTENDED) or (
                resolution is Resolution.COMMITTED and override and judged in PROVEN_ABSENT
            )
            evidence = _evidence(verdict, resolution, actor, note, forced)
            if step is Step.REFUSE:
                raise ResolutionRefused(
                    _refusal(intent_id, verdict, resolution),
                    intent_id=intent_id,
                    evidence=evidence,
                )
            if step is Step.SETTLE and verdict is not None and verdict.outcome is Outcome.UNCHANGED:
                # Closed without being written while the store would still take the write:
                # fence the store first, so no late write of its owner lands after this.
                evidence |= await self._fence(intent, verdict, evidence)
            if step in (Step.REPLAY, Step.REPLAY_REST, Step.REPLAY_AFTER_OTHERS):
                assert self.settler is not None  # only a judged intent is replayed
                replaying = True
                try:
                    await self.settler.replays.replay(intent, None, step, evidence)
                except RevisionConflict as moved:
                    raise ResolutionRefused(
                        f"the session's head moved while intent {intent_id} was replayed "
                        "(nothing was written); look again",
                        intent_id=intent_id,
                        evidence={**evidence, "head_now": moved.actual},
                    ) from moved
                except RequestRefused as refusal:
                    # The store refused the replay outright: a known outcome, recorded as
                    # the settler records it.
                    before = int(evidence["landed"]) if step is Step.REPLAY_REST else 0
                    refused = await self.settler.refused.refused_replay(
                        intent, refusal, None, before=before, fence=entry.fence, evidence=evidence
                    )
                    raise refused from refused.__cause__
            outcome = _ASSERTED.get(resolution) or (
                verdict.outcome if verdict is not None else Outcome.AMBIGUOUS
            )
            decision = client.decision(
                intent, outcome, Reason.OPERATOR_RESOLVED, _ACTIONS[resolution], evidence
            )
            await client.call(
                client.journal.settle, decision, owner=client.owner, fence=entry.fence
            )
        except BaseException:
            if not (replaying and self._replay_goes_on(intent_id)):
                await despite_cancellation(self.client.release(intent_id, fence=entry.fence))
            raise
        if self.settler is not None:
            # Only a batch the store holds (found, or just replayed) may spare a later one.
            vouched = resolution is Resolution.REPLAY or (
                verdict is not None and verdict.outcome is Outcome.COMMITTED
            )
            await self.settler.after_settlement(intent, None, decision.action, vouched=vouched)
        client.trail.decided(decision)
        return decision

    async def _set_aside(
        self,
        intent_id: str,
        resolution: Resolution,
        problem: str,
        note: str,
        actor: str,
        override: bool,
    ) -> Decision:
        """A damaged intent: nothing can be judged or replayed from it, so only ``abandon``
        clears it, by setting it aside with its bytes kept (``setting_aside``)."""
        if resolution is not Resolution.ABANDON:
            raise ResolutionRefused(
                f"intent {intent_id}'s record is damaged ({problem}): nothing can be judged or "
                f"replayed from it, so it cannot be resolved as {resolution.value}. Resolve it "
                "as abandon: it is set aside, its bytes kept for the evidence, and the session "
                "runs again",
                intent_id=intent_id,
            )
        decision = await set_aside(
            self.client,
            intent_id,
            reason=note,
            actor=actor,
            wait_leases=RESOLVE_AFTER_LEASES,
            session_id=self.client.session_id,
            backend=self.client.backend,
            in_flight_here=self.settler is not None
            and self.settler.claims.in_flight_here(intent_id),
        )
        if decision is None:  # repaired meanwhile: resolved as any other
            return await self._resolve(intent_id, resolution, note, actor, override)
        if self.settler is not None:
            self.settler.after_set_aside(intent_id)
        return decision

    async def _entry(self, intent_id: str) -> JournalEntry:
        client = self.client
        journal = client.journal
        entry = await client.call(journal.get, intent_id)
        if entry is None:
            if await client.call(journal.is_settled, intent_id):
                settled = [
                    d
                    for d in await client.call(journal.decisions, intent_id=intent_id, limit=20)
                    if d.settled
                ]
                how = f" ({settled[0].action.value}, {settled[0].reason.value})" if settled else ""
                raise ResolutionRefused(
                    f"intent {intent_id} is settled already{how}: nothing to resolve",
                    intent_id=intent_id,
                )
            raise ResolutionRefused(
                f"no pending intent {intent_id} in this journal", intent_id=intent_id
            )
        intent = entry.intent
        if (intent.session_id, intent.backend) != (client.session_id, client.backend):
            raise ResolutionRefused(
                f"intent {intent_id} belongs to session {intent.session_id!r} on "
                f"{intent.backend}, not to session {client.session_id!r} on {client.backend}",
                intent_id=intent_id,
            )
        return entry

    def _refuse_if_held(self, entry: JournalEntry) -> None:
        """A live owner's intent (appending, or being settled) is not the operator's yet, and
        neither is one whose owner on another host let its lease run out, where nothing would
        refuse that owner's late write, until the lease is long past (``RESOLVE_AFTER_LEASES``
        of the owner's own lease): the owner may only be frozen. On a revisioned store the
        resolution fences the store instead (see ``_fence``)."""
        lease = entry.owner.lease_or(self.client.config.lease_seconds)
        held_for = entry.held_for(time.time())
        way = self._takeover(entry, held_for)
        intent_id = entry.intent.intent_id
        evidence: dict[str, object] = {
            "state": entry.state.value,
            "owner": str(entry.owner),
            "held_for_seconds": round(held_for, 3),
            "lease_seconds": lease,
        }
        if way is Takeover.HELD:
            raise ResolutionRefused(
                f"intent {intent_id} is {entry.state.value} under a live owner "
                f"({entry.owner}, lease {lease:g} s); wait for it to finish, or stop that "
                "process first",
                intent_id=intent_id,
                evidence=evidence,
            )
        if way is Takeover.EXPIRED and held_for < lease * RESOLVE_AFTER_LEASES:
            wait = lease * RESOLVE_AFTER_LEASES - held_for
            raise ResolutionRefused(
                f"intent {intent_id} is {entry.state.value} under {entry.owner}, whose lease "
                f"({lease:g} s) ran out {held_for - lease:.3g} s ago: that worker may only be "
                "frozen and still write, and this store cannot refuse its late write. Stop that "
                f"worker (or make sure its host is gone), then resolve again in {wait:.3g} s "
                f"({RESOLVE_AFTER_LEASES} leases after its last renewal)",
                intent_id=intent_id,
                evidence=evidence,
            )

    def _takeover(self, entry: JournalEntry, held_for: float) -> Takeover:
        """Whether the intent may be taken now, as a settling worker judges it (an expired
        lease is free where the store fences it); without a store, nothing is fenced."""
        if self.settler is not None:
            return self.settler.claims.takeover(entry)
        return takeover(
            entry.owner,
            active=entry.state in ACTIVE_STATES,
            in_flight_here=False,
            age_seconds=held_for,
            lease_seconds=self.client.config.lease_seconds,
            me=current_owner(),
        )

    async def _claim(self, entry: JournalEntry) -> JournalEntry:
        """Take the intent, as a settling worker would (a compare-and-set on what was read)."""
        from .claims import take  # the settler's own claim, loaded with it

        intent_id = entry.intent.intent_id
        mine, now = await take(self.client, entry)
        if not mine or now is None:
            what = "settled meanwhile" if now is None else f"taken by {now.owner}"
            raise ResolutionRefused(
                f"intent {intent_id} was {what} while this resolution looked at it; "
                "look again (agents-reconcile show)",
                intent_id=intent_id,
            )
        return now  # its token the claim's: settled under it, or refused if taken since

    async def _judge(self, intent: PendingWrite) -> Verdict | None:
        if self.settler is None:
            return None
        try:
            return await self.settler.judge(intent, None)
        except errors.ContinuationDenied as denied:  # looked up only when raised
            raise ResolutionRefused(
                f"intent {intent.intent_id} cannot be judged here: {denied.decision.reason.value}",
                intent_id=intent.intent_id,
                evidence=dict(denied.decision.evidence),
            ) from denied

    async def _fence(
        self, intent: PendingWrite, verdict: Verdict, evidence: dict[str, Any]
    ) -> dict[str, Any]:
        """Make the store refuse any late write of ``intent`` (a revisioned store: its head
        moves past the one the write expects); the evidence of it. A store that cannot be
        fenced was refused before (``_refuse_if_held``) where its owner might still write."""
        if self.settler is None or not self.settler.claims.fences(intent):
            return {}
        try:
            head = await self.settler.replays.void(intent)
        except RevisionConflict as moved:
            raise ResolutionRefused(
                f"the session's head moved while intent {intent.intent_id} was resolved (its "
                "owner or another writer wrote meanwhile; nothing was resolved); look again",
                intent_id=intent.intent_id,
                evidence={**evidence, "head_now": moved.actual},
            ) from moved
        return {"fenced_at_revision": head}

    def _replay_goes_on(self, intent_id: str) -> bool:
        """Whether a cancelled replay goes on in the background, keeping the claim."""
        settler = self.settler
        return settler is not None and settler.claims.replaying(intent_id)


def _resolution(value: Resolution | str, intent_id: str) -> Resolution:
    try:
        return value if isinstance(value, Resolution) else Resolution(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(r.value for r in Resolution)
        raise ResolutionRefused(
            f"{value!r} is not a resolution; choose one of {allowed}", intent_id=intent_id
        ) from None


def _actor(actor: str | None, intent_id: str) -> str:
    if actor is not None and not isinstance(actor, str):
        raise ResolutionRefused(
            f"actor must be a name (a string) or None, not {type(actor).__name__}",
            intent_id=intent_id,
        )
    return (actor or "").strip()[:_MAX_REASON] or default_actor()


def _reason(reason: str, intent_id: str) -> str:
    text = " ".join(reason.split()) if isinstance(reason, str) else ""
    if not text:
        raise ResolutionRefused(
            "a resolution needs a reason (what the operator checked), for the trail",
            intent_id=intent_id,
        )
    return text[:_MAX_REASON]


def _evidence(
    verdict: Verdict | None, resolution: Resolution, actor: str, note: str, override: bool
) -> dict[str, Any]:
    evidence: dict[str, Any] = dict(verdict.evidence) if verdict is not None else {}
    evidence.update(
        resolution=resolution.value,
        actor=actor,
        operator_reason=note,
        judged=verdict.outcome.value if verdict is not None else "not_judged",
    )
    if verdict is not None:
        evidence["judged_reason"] = verdict.reason.value
    else:
        evidence["store"] = "not read"
    if override:
        evidence["override"] = True
    return evidence


def _refusal(intent_id: str, verdict: Verdict | None, resolution: Resolution) -> str:
    if resolution is Resolution.COMMITTED:
        assert verdict is not None  # only a batch the store shows missing refuses it
        return (
            f"resolving intent {intent_id} as committed is refused: the store shows the batch "
            f"{'partly ' if verdict.outcome is Outcome.PARTIAL else ''}missing "
            f"({verdict.outcome.value}, {verdict.reason.value}); settling it as written would "
            "lose it. Resolve it as replay to append it once, or as abandon to drop it; pass "
            "override (--override) to settle it as committed regardless."
        )
    if verdict is None:
        return (
            f"replaying intent {intent_id} needs its store (the rule must see the history "
            "before the write): give the store (agents-reconcile resolve --store ADDRESS)"
        )
    if verdict.outcome is Outcome.COMMITTED:
        return (
            f"replaying intent {intent_id} is refused: its batch is in the history already "
            f"({verdict.reason.value}); appending it again would store it twice. Resolve it "
            "as committed."
        )
    return (
        f"replaying intent {intent_id} is refused: the rule judges it {verdict.outcome.value} "
        f"({verdict.reason.value}), not the history the write was meant for. "
        f"{verdict.reason.explanation} Pass override (--override) to append it at the end "
        "regardless."
    )
