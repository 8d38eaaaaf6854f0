"""An operator's way out of a damaged intent: ``abandon`` on an intent whose journal record
fails its checks sets it aside (``_backends/aside.py``) instead of refusing.

Nothing can be judged from a record that cannot be trusted, so its session is denied until
someone clears it. Setting it aside keeps the evidence: the bytes stay in the journal as they
were, listed with their digest, size and why they were refused, and a decision names the
actor and the reason. It is fenced as a resolution is, from what the row's own columns say:

=========================  ========================================================
the row says               setting it aside
=========================  ========================================================
failed or cancelled        now (nobody is writing it)
active, owner live         refused: wait for the owner, or stop it
active, lease ran out      refused until ``wait_leases`` of its leases passed
                           since its last renewal (the owner may be frozen, and nothing
                           can fence its store write without the record)
active, owner unreadable   the same wait, on the deployment's own lease
=========================  ========================================================

The move itself is a compare-and-set: the row goes only while it still holds the bytes, state
and owner that were read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .._backends.aside import RawIntent, SetAside
from .._backends.journal import IntentState
from .._core.ownership import Owner, Takeover, current_owner, takeover
from .._core.records import Action, BackendIdentity, Decision, Outcome, Reason
from ..errors import (
    JournalCorrupt,
    PayloadKeyUnknown,
    RecordError,
    RecordMalformed,
    RecordUnsigned,
    ResolutionRefused,
    UnsupportedRecordVersion,
)

if TYPE_CHECKING:
    from .journal_client import JournalClient

__all__ = ["damage_of", "row_backend", "set_aside"]

_ACTIVE = {IntentState.IN_FLIGHT.value, IntentState.RECONCILING.value}
_SETTLED_STATES = {IntentState.FAILED.value, IntentState.CANCELLED.value}


async def damage_of(journal: Any, intent_id: str) -> str | None:
    """Why the unresolved intent's record cannot be trusted (None: it can, or there is no such
    intent). A record that is sound but cannot be read here (sealed under a key not given, or
    written by a newer release) is not damage: ``ResolutionRefused`` says what is missing."""
    try:
        await journal.get(intent_id)
    except PayloadKeyUnknown as exc:
        raise ResolutionRefused(
            f"{exc}: give the deployment's payload keys (--payload-key-file or "
            "--payload-key-env) to read it; it is not damaged",
            intent_id=intent_id,
        ) from exc
    except UnsupportedRecordVersion as exc:
        raise ResolutionRefused(
            f"{exc}: use the release that wrote it; it is not damaged", intent_id=intent_id
        ) from exc
    except RecordUnsigned as exc:
        if exc.key_id:
            # Signed, under a key this command was not given: perhaps sound. Never dropped
            # for a key the operator lacks.
            raise ResolutionRefused(
                f"{exc}: give the deployment's signing keys (AGENTS_RECONCILE_SIGNING_KEY) to "
                "check it; it is not known to be damaged",
                intent_id=intent_id,
            ) from exc
        return str(exc)
    except (RecordError, JournalCorrupt) as exc:
        return str(exc)
    return None


async def set_aside(
    client: JournalClient,
    intent_id: str,
    *,
    reason: str,
    actor: str,
    wait_leases: int,
    session_id: str | None = None,
    backend: BackendIdentity | None = None,
    in_flight_here: bool = False,
) -> Decision | None:
    """Set the damaged intent ``intent_id`` aside, with ``actor`` and ``reason`` in the trail,
    and return the decision; None when its record is sound (resolve it as any other). With
    ``session_id`` (and ``backend``), only an intent whose row names that session (and
    backend); ``in_flight_here``: this process still writes it; ``wait_leases``: how many of
    an expired owner's leases must pass first (``resolver.RESOLVE_AFTER_LEASES``). Raises
    ``ResolutionRefused`` (nothing written) when it cannot be done now."""
    journal = client.journal
    problem = await damage_of(journal, intent_id)
    if problem is None:
        return None
    component = journal.aside
    if component is None:
        raise ResolutionRefused(
            f"intent {intent_id}'s record is damaged ({problem}) and this journal cannot set "
            "it aside",
            intent_id=intent_id,
        )
    raw = await component.raw(intent_id)
    if raw is None:
        raise ResolutionRefused(f"intent {intent_id} is gone meanwhile", intent_id=intent_id)
    if (session_id is not None and raw.session_id != session_id) or (
        backend is not None and raw.backend != str(backend)
    ):
        raise ResolutionRefused(
            f"intent {intent_id}'s row names session {raw.session_id!r} on {raw.backend}, not "
            f"session {session_id!r} on {backend}",
            intent_id=intent_id,
        )
    if in_flight_here:
        raise ResolutionRefused(
            f"intent {intent_id} is being written by this process; wait for it to finish",
            intent_id=intent_id,
        )
    _refuse_if_held(raw, client.config.lease_seconds, wait_leases)
    now = time.time()
    aside = SetAside.of(raw, problem=problem, actor=actor, reason=reason, at=now)
    evidence = {
        "resolution": "abandon",
        "actor": actor,
        "operator_reason": reason,
        "judged": "not_judged",
        "store": "not read",
        "set_aside": {"digest": aside.digest, "size": aside.size, "problem": problem},
    }
    decision = Decision(
        intent_id=intent_id,
        session_id=raw.session_id,
        backend=row_backend(raw),
        outcome=Outcome.AMBIGUOUS,
        reason=Reason.OPERATOR_RESOLVED,
        action=Action.DROPPED,
        decided_at=now,
        evidence=evidence,
    )
    if not await component.set_aside(raw, aside, decision):
        raise ResolutionRefused(
            f"intent {intent_id}'s row changed while it was being set aside; look again "
            "(agents-reconcile show)",
            intent_id=intent_id,
        )
    client.trail.decided(decision)
    return decision


def _refuse_if_held(raw: RawIntent, lease_seconds: float, leases: int) -> None:
    if raw.state in _SETTLED_STATES:
        return
    held_for = raw.held_for(time.time())
    try:
        owner: Owner | None = Owner.parse(raw.owner)
    except ValueError:
        owner = None
    if owner is None or raw.state not in _ACTIVE:
        way, lease = Takeover.EXPIRED, lease_seconds
    else:
        lease = owner.lease_or(lease_seconds)
        way = takeover(
            owner,
            active=True,
            in_flight_here=False,
            age_seconds=held_for,
            lease_seconds=lease_seconds,
            me=current_owner(),
        )
    if way is Takeover.HELD:
        raise ResolutionRefused(
            f"intent {raw.intent_id} is {raw.state} under a live owner ({raw.owner}, lease "
            f"{lease:g} s); wait for it to finish, or stop that process first",
            intent_id=raw.intent_id,
        )
    if way is Takeover.EXPIRED and held_for < lease * leases:
        wait = lease * leases - held_for
        unread = "" if raw.age_known else " (its update time cannot be read: as if just renewed)"
        raise ResolutionRefused(
            f"intent {raw.intent_id} is {raw.state!r} under {raw.owner!r}, whose lease "
            f"({lease:g} s) ran out{unread}: that worker may only be frozen and still write. "
            f"Stop it (or make sure its host is gone), then set the intent aside again in "
            f"{wait:.3g} s ({leases} leases after its last renewal)",
            intent_id=raw.intent_id,
        )


def row_backend(raw: RawIntent) -> BackendIdentity:
    """The backend the row names (``unreadable`` when it names none)."""
    try:
        return BackendIdentity.parse(raw.backend)
    except RecordMalformed:
        return BackendIdentity("unreadable")
