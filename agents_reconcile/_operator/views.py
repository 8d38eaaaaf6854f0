"""What an operator sees, as plain mappings (the CLI prints them as tables or as JSON): the
pending intents and the tool effects without a receipt, and whether each needs a person, one
intent with its evidence, and a session's decision trail. Payload-free: ids, states, owners,
counts, digests and reasons, never an item. Rows that fail their checks are listed as damaged,
next to the others, never instead of them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from .._backends.journal import (
    ACTIVE_STATES,
    JournalEntry,
    keeps_effects,
    reads_newest,
    sets_aside,
)
from .._backends.rows import collecting_damage
from .._core.policy import Resolution, Step, resolution_step
from .._core.records import Action, Decision, Outcome
from .waiting import effect_status

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal
    from .._backends.rows import DamagedRecord
    from .._core.classify import Verdict

__all__ = ["decision_view", "intent_view", "outlook", "status", "trail"]

_WAITING: Final = (Action.DENIED, Action.LEFT_PENDING)


async def status(
    journal: IntentJournal, *, session_id: str | None, lease_seconds: float
) -> dict[str, Any]:
    """Pending intents (every session, or one), each with its newest decision; the tool
    effects started without a receipt (``started_effects``); and whether anything
    needs an operator: a denied or left-pending intent, an effect whose owner is gone, or a
    damaged row."""
    now = time.time()
    with collecting_damage() as damaged:
        entries = await journal.pending(session_id)
        newest = await newest_decisions(journal, [entry.intent.intent_id for entry in entries])
        intents = [
            intent_view(entry, newest.get(entry.intent.intent_id), now, lease_seconds)
            for entry in entries
        ]
        effects = await started_effects(
            journal, session_id=session_id, now=now, lease_seconds=lease_seconds
        )
    waiting = [*intents, *effects]
    return {
        "session": session_id,
        "pending": intents,
        "effects": effects,
        "damaged": [damaged_view(record) for record in damaged],
        "needs_operator": bool(damaged) or any(found["needs_operator"] for found in waiting),
    }


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
        await journal.set_aside_entries(session_id=session_id, limit=limit)
        if sets_aside(journal)
        else []
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
    if not keeps_effects(journal):
        return []
    found = []
    effects = await journal.started_effects(session_id)
    newest = await newest_decisions(journal, [effect.key for effect in effects])
    for effect in effects:
        last = newest.get(effect.key)
        view = effect_status(effect, last, now, lease_seconds)
        view["last_decision"] = decision_view(last) if last is not None else None
        found.append(view)
    return found


async def newest_decisions(journal: IntentJournal, ids: list[str]) -> dict[str, Decision]:
    """The newest decision of each of ``ids`` that has one: one read where the journal declares
    ``newest_decisions``, else one per id."""
    if not ids:
        return {}
    if reads_newest(journal):
        return await journal.newest_decisions(ids)
    found: dict[str, Decision] = {}
    for ident in ids:
        newest = await journal.decisions(intent_id=ident, limit=1)
        if newest:
            found[ident] = newest[0]
    return found
