"""What an operator sees, as plain mappings (the CLI prints them as tables or as JSON): the
pending intents and the tool effects without a receipt, and whether each needs a person, one
intent with its evidence, and a session's decision trail. Payload-free: ids, states, owners,
counts, digests and reasons, never an item. Rows that fail their checks are listed as damaged,
next to the others, never instead of them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from .._backends.components import Page
from .._backends.journal import ACTIVE_STATES, JournalEntry
from .._backends.rows import collecting_damage
from .._core.effect_records import Effect
from .._core.policy import Resolution, Step, resolution_step
from .._core.records import Action, Decision, Outcome
from .paging import DEFAULT_LIMIT, Position, effects_page, pending_page
from .waiting import effect_status

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal
    from .._backends.rows import DamagedRecord
    from .._core.classify import Verdict

__all__ = ["decision_view", "intent_view", "outlook", "status", "trail"]

_WAITING: Final = (Action.DENIED, Action.LEFT_PENDING)


async def status(
    journal: IntentJournal,
    *,
    session_id: str | None,
    lease_seconds: float,
    limit: int = DEFAULT_LIMIT,
    after: str | None = None,
) -> dict[str, Any]:
    """A page of the pending intents (every session's, or one's), each with its newest
    decision, and a page of the tool effects started without a receipt
    (``started_effects``), each listing at most ``limit`` rows from where the token ``after``
    (``paging.Position``) says; what follows each page, and the token of the next page
    (``page``); and whether anything needs an operator: a denied or left-pending intent or an
    effect whose owner is gone on this page, a damaged row on it, or, after it, an intent whose
    newest decision denied it or left it pending, or an effect begun longer ago than the lease.
    One read of the journal per listing (``paging``)."""
    now = time.time()
    position = Position.read(after, session_id)
    with collecting_damage() as damaged:
        intents = (
            Page[JournalEntry](rows=[])
            if position.pending_over
            else await pending_page(
                journal, limit=limit, after=position.pending, session_id=session_id
            )
        )
        effects = (
            Page[Effect](rows=[])
            if position.effects_over
            else await effects_page(
                journal,
                limit=limit,
                after=position.effects,
                session_id=session_id,
                overdue_before=now - lease_seconds,
            )
        )
    shown = [
        intent_view(entry, intents.newest.get(entry.intent.intent_id), now, lease_seconds)
        for entry in sorted(intents.rows, key=_oldest_by_session)
    ]
    started = [
        started_view(effect, effects.newest.get(effect.key), now, lease_seconds)
        for effect in effects.rows
    ]
    following = intents.more_waiting + effects.more_waiting
    return {
        "session": session_id,
        "pending": shown,
        "effects": started,
        "damaged": [damaged_view(record) for record in damaged],
        "page": {
            "limit": limit,
            "after": after,
            "next": Position.token(session_id, intents.after, effects.after),
            "pending_more": intents.more,
            "pending_more_waiting": intents.more_waiting,
            "pending_counted_all": intents.counted_all,
            "effects_more": effects.more,
            "effects_more_overdue": effects.more_waiting,
            "effects_counted_all": effects.counted_all,
        },
        # Past the count's bound, what follows is not all judged: an operator should look.
        "needs_operator": bool(damaged)
        or following > 0
        or not (intents.counted_all and effects.counted_all)
        or any(found["needs_operator"] for found in [*shown, *started]),
    }


def _oldest_by_session(entry: JournalEntry) -> tuple[str, float, str]:
    # A page is shown by session, each session's intents oldest first, whatever order the
    # journal lists them in (on Redis, by id).
    return (entry.intent.session_id, entry.intent.created_at, entry.intent.intent_id)


def intent_view(
    entry: JournalEntry, newest: Decision | None, now: float, lease_seconds: float
) -> dict[str, Any]:
    intent = entry.intent
    # The age by the journal's clock where it tells one (Redis, PostgreSQL).
    held_for = entry.held_for(now)
    live = entry.state in ACTIVE_STATES and entry.owner.is_live(
        age_seconds=held_for, lease_seconds=lease_seconds
    )
    waiting = newest is not None and newest.action in _WAITING
    return {
        "intent_id": intent.intent_id,
        "session_id": intent.session_id,
        "backend": str(intent.backend),
        "state": entry.state.value,
        "owner": str(entry.owner),
        "owner_live": live,
        "age_seconds": round(now - intent.created_at, 3),
        "updated_seconds_ago": round(held_for, 3),
        "fence": entry.fence,
        "items": len(intent.batch_digests),
        "last_decision": None if newest is None else decision_view(newest),
        "needs_operator": waiting and not live,
    }


def damaged_view(record: DamagedRecord) -> dict[str, Any]:
    return {
        "kind": record.kind,
        "id": record.ident,
        "session_id": record.session_id,
        "problem": record.problem,
        "error": record.error,
        "needs_operator": True,
    }


def decision_view(decision: Decision) -> dict[str, Any]:
    return {
        "decided_at": decision.decided_at,
        "intent_id": decision.intent_id,
        "session_id": decision.session_id,
        "outcome": decision.outcome.value,
        "reason": decision.reason.value,
        "action": decision.action.value,
        "explanation": decision.reason.explanation,
        "evidence": dict(decision.evidence),
        "repeats": decision.repeats,
        "last_seen": decision.last_seen,
    }


async def trail(
    journal: IntentJournal, session_id: str, *, limit: int, lease_seconds: float
) -> dict[str, Any]:
    """A session's decisions, oldest first (a timeline), with any damaged ones named, the
    session's tool effects that still have no receipt (``started_effects``), and the damaged
    intents set aside (``_backends/aside.py``), described without their bytes."""
    with collecting_damage() as damaged:
        decisions = await journal.decisions(session_id=session_id, limit=limit)
        effects = await started_effects(
            journal, session_id=session_id, now=time.time(), lease_seconds=lease_seconds
        )
    aside = (
        []
        if journal.aside is None
        else await journal.aside.entries(session_id=session_id, limit=limit)
    )
    return {
        "session": session_id,
        "decisions": [decision_view(d) for d in reversed(decisions)],
        "effects": effects,
        "set_aside": [entry.view() for entry in reversed(aside)],
        "damaged": [damaged_view(record) for record in damaged],
    }


def outlook(verdict: Verdict | None, items: int) -> dict[str, str]:
    """What each resolution would do now, given what the rule judges (None: not judged)."""
    said: dict[str, str] = {}
    for resolution in Resolution:
        step = resolution_step(
            resolution, None if verdict is None else verdict.outcome, override=False
        )
        if resolution is Resolution.COMMITTED:
            if step is Step.REFUSE:
                assert verdict is not None
                said[resolution.value] = (
                    f"refused ({verdict.reason.value}): the store shows the batch missing; "
                    "--override settles it as written regardless"
                )
            else:
                said[resolution.value] = "settle the intent as written; nothing is appended"
        elif resolution is Resolution.ABANDON:
            said[resolution.value] = "drop the intent; nothing is appended"
        elif step is Step.REFUSE:
            if verdict is None:
                said[resolution.value] = "refused: give --store to judge it first"
            elif verdict.outcome is Outcome.COMMITTED:
                said[resolution.value] = "refused: the batch is stored already"
            else:
                said[resolution.value] = (
                    f"refused ({verdict.reason.value}); --override appends {items} item(s) "
                    "at the end regardless"
                )
        elif step is Step.REPLAY_REST:
            assert verdict is not None
            rest = items - int(verdict.evidence.get("landed", 0))
            said[resolution.value] = (
                f"append the {rest} missing item(s) after the {items - rest} that landed, once"
            )
        else:
            where = (
                "after the others' writes"
                if step is Step.REPLAY_AFTER_OTHERS
                else "where it was meant to go"
            )
            said[resolution.value] = f"append the {items} missing item(s) once, {where}"
    return said


async def started_effects(
    journal: IntentJournal, *, session_id: str | None, now: float, lease_seconds: float
) -> list[dict[str, Any]]:
    """The journal's started effects (every session, or one), oldest first, each with its
    newest decision and whether it waits for an operator (``waiting.effect_status``); none for
    a journal that keeps no effects. Run it under ``collecting_damage`` to have damaged rows
    reported, not raised."""
    if journal.effects is None:
        return []
    effects = await journal.effects.started(session_id)
    if not effects:
        return []
    newest = await journal.newest_decisions([effect.key for effect in effects])
    return [started_view(effect, newest.get(effect.key), now, lease_seconds) for effect in effects]


def started_view(
    effect: Effect, newest: Decision | None, now: float, lease_seconds: float
) -> dict[str, Any]:
    """A started effect for an operator (``waiting.effect_status``), with its newest
    decision."""
    view = effect_status(effect, newest, now, lease_seconds)
    view["last_decision"] = decision_view(newest) if newest is not None else None
    return view
