"""An operator's resolution of an effect whose outcome is unknown (an intent without a
receipt): ``committed`` with the output the external system shows (it becomes the receipt;
the body never runs), ``retry`` (the next call under the key runs the body again), or
``abandon`` (the next call returns a note that the effect was abandoned; the body never runs).
Each is a decision in the trail, with the actor and the reason; each takes the effect by
compare-and-set, so it never races a worker that took it first."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Final

from ..errors import ResolutionRefused
from ..ownership import Owner, current_owner
from ..records import Action, Decision, Outcome, Reason
from ..resolution import default_actor
from .records import Effect, EffectState

if TYPE_CHECKING:
    from ..journal.base import EffectJournal
    from ..journal_client import JournalClient

__all__ = ["RETRY_OWNER", "resolve_effect"]

RETRY_OWNER: Final = "operator-retry/0/0"
"""The owner an effect is left under when an operator asked for it to be run again."""
_OUTCOMES: Final = ("committed", "retry", "abandon")


async def resolve_effect(
    client: JournalClient,
    journal: EffectJournal,
    key: str,
    outcome: str,
    *,
    reason: str,
    actor: str | None = None,
    output: Any = None,
    lease_seconds: float,
) -> Decision:
    """Resolve the effect ``key`` (see the module docstring); ``ResolutionRefused`` when it
    is unknown, has its receipt, is held by a live owner, or the resolution is not one."""
    if outcome not in _OUTCOMES:
        raise ResolutionRefused(
            f"{outcome!r} is not an effect resolution; choose one of {', '.join(_OUTCOMES)}",
            intent_id=key,
        )
    note = " ".join(reason.split()) if isinstance(reason, str) else ""
    if not note:
        raise ResolutionRefused("a resolution needs a reason, for the trail", intent_id=key)
    if outcome == "committed" and output is None:
        raise ResolutionRefused(
            "resolving an effect as committed needs the output the external system shows",
            intent_id=key,
        )
    stored = await journal.effect(key)
    if stored is None or stored.session_id != client.session_id:
        raise ResolutionRefused(f"no effect {key} in session {client.session_id!r}", intent_id=key)
    if stored.state is EffectState.DONE:
        raise ResolutionRefused(f"effect {key} has its receipt already", intent_id=key)
    if _live(stored, lease_seconds):
        raise ResolutionRefused(
            f"effect {key} is being run by a live owner ({stored.owner}); wait for it",
            intent_id=key,
        )
    me = RETRY_OWNER if outcome == "retry" else str(current_owner())
    taken = dataclasses.replace(stored, owner=me)
    if not await journal.restart_effect(taken, expect_owner=stored.owner):
        raise ResolutionRefused(
            f"effect {key} changed while this resolution looked at it; look again",
            intent_id=key,
        )
    if outcome == "committed":
        await journal.finish_effect(taken.with_receipt(output, at=time.time()))
    elif outcome == "abandon":
        await journal.finish_effect(
            taken.with_receipt(f"not done: abandoned by an operator ({note})", at=time.time())
        )
    who = (actor or "").strip() or default_actor()
    decision = client.decision(
        None,
        Outcome.COMMITTED if outcome == "committed" else Outcome.AMBIGUOUS,
        Reason.OPERATOR_RESOLVED,
        Action.RESOLVED,
        {
            "effect": key,
            "tool": stored.tool,
            "call_id": stored.call_id,
            "resolution": outcome,
            "actor": who,
            "operator_reason": note,
            "earlier_owner": stored.owner,
            "attempts": stored.attempts,
        },
        intent_id=key,
    )
    await client.call(client.journal.note, decision)
    client.trail.decided(decision)
    return decision


def _live(effect: Effect, lease_seconds: float) -> bool:
    if effect.owner == RETRY_OWNER:
        return False
    try:
        owner = Owner.parse(effect.owner)
    except ValueError:
        return False
    if owner == current_owner():
        return False
    age = time.time() - effect.started_at
    return owner.is_live(age_seconds=age, lease_seconds=lease_seconds)
