"""Tool effects that may wait for an operator: started, with no receipt, their owner gone.

Such an effect is refused (``effect_unknown``) the next time its call comes, unless the tool
has a ``check`` or is idempotent; only an operator who looked at the external system can say
what happened (``agents-reconcile resolve --as committed|retry|abandon -- KEY``). Liveness is
judged as effect tools judge it (``_effects.resolve_effect.held``). Payload-free: keys, tools,
owners, ages and decisions, never an output."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core.records import Reason

if TYPE_CHECKING:
    from .._core.effect_records import Effect
    from .._core.records import Decision

__all__ = ["effect_status", "effect_view"]


def effect_status(
    effect: Effect, newest: Decision | None, now: float, lease_seconds: float
) -> dict[str, Any]:
    """Where a started effect stands for an operator: whether its owner may still be running
    its body (``owner_live``), whether its next call runs the body again (``runs_again``: an
    operator asked for a retry, or the body never started), and so whether it waits for an
    operator."""
    # Imported here, where an effect is shown: they bring the effect tools' machinery, which
    # a status with no started effect (most of them) need not load.
    from .._effects.holds import NEVER_STARTED_OWNER
    from .._effects.resolve_effect import RETRY_OWNER, held

    live = held(effect, lease_seconds)
    # The owners of an effect whose next call runs its body again, so that nobody needs to
    # look at it: left for a retry by an operator, or marked never started by its tool.
    again = effect.owner in (RETRY_OWNER, NEVER_STARTED_OWNER)
    return {
        **effect_view(effect),
        "owner_live": live,
        "runs_again": again,
        "age_seconds": round(effect.held_for(now), 3),
        "refused": newest is not None and newest.reason is Reason.EFFECT_UNKNOWN,
        "needs_operator": not live and not again,
    }


def effect_view(effect: Effect) -> dict[str, Any]:
    """A tool effect, payload-free (its output by digest only)."""
    return {
        "effect": effect.key,
        "session_id": effect.session_id,
        "tool": effect.tool,
        "call_id": effect.call_id,
        "state": effect.state.value,
        "owner": effect.owner,
        "attempts": effect.attempts,
        "started_at": effect.started_at,
        "finished_at": effect.finished_at,
        "arguments_digest": effect.arguments_digest,
        "output_digest": effect.output_digest,
    }
