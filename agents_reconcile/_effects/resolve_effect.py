"""An operator's resolution of an effect whose outcome is unknown (an intent without a
receipt): ``committed`` with the output the external system shows (it becomes the receipt;
the body never runs), ``retry`` (the next call under the key runs the body again), or
``abandon`` (the next call returns a note that the effect was abandoned; the body never runs).
Each is a decision in the trail, with the actor and the reason; each takes the effect by
compare-and-set, so it never races a worker that took it first."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._backends.sealing_marks import unsealed_write
from .._core.effect_records import Effect, EffectState
from .._core.ownership import Owner, current_owner, default_actor, holds
from .._core.records import Action, Decision, Outcome, Reason
from ..errors import ReconcileError, ResolutionRefused

if TYPE_CHECKING:
    from .._backends.components import JournalEffects
    from .._session.journal_client import JournalClient

__all__ = ["RETRY_OWNER", "held", "resolve_effect"]

RETRY_OWNER: Final = "operator-retry/0/0"
"""The owner an effect is left under when an operator asked for it to be run again."""
_OUTCOMES: Final = ("committed", "retry", "abandon")
_MAX_TEXT: Final = 500


async def resolve_effect(
    client: JournalClient,
    effects: JournalEffects,
    key: str,
    outcome: str,
    *,
    reason: str,
    actor: str | None = None,
    output: Any = None,
    lease_seconds: float,
) -> Decision:
    """Resolve the effect ``key`` (see the module docstring); ``ResolutionRefused`` when it
    is unknown, has its receipt, is held by a live owner, or an argument is not one it takes
    (every argument is checked before anything is read or written)."""
    note, who, receipt = _checked(key, outcome, reason, actor, output, lease_seconds)
    stored = await effects.get(key)
    if stored is None or stored.session_id != client.session_id:
        raise ResolutionRefused(f"no effect {key} in session {client.session_id!r}", intent_id=key)
    if stored.state is EffectState.DONE:
        raise ResolutionRefused(f"effect {key} has its receipt already", intent_id=key)
    if held(stored, lease_seconds):
        raise ResolutionRefused(
            f"effect {key} is being run by a live owner ({stored.owner}); wait for it",
            intent_id=key,
        )
    me = RETRY_OWNER if outcome == "retry" else str(current_owner())
    # Sealed and signed as the session's own records are (a started record holds no key).
    keyring = client.keyring
    seal_key = keyring.current or stored.seal_key
    if receipt is not None:
        # A receipt holds its output: never readable, nor under a key the deployment lacks,
        # in a journal marked sealed (even with no sealed record left in it).
        problem = await unsealed_write(client.journal, seal_key)
        if problem is not None:
            raise ResolutionRefused(
                f"effect {key}: {problem}; give the deployment's payload key "
                "(--payload-key-file PATH or --payload-key-env NAME); nothing was written",
                intent_id=key,
            )
        await client.mark_sealed()
    signing = keyring.signer.current if keyring.signer is not None else None
    taken = dataclasses.replace(stored, owner=me, seal_key=seal_key, sign_key=signing, age=None)
    if not await effects.restart(taken, expect_owner=stored.owner):
        raise ResolutionRefused(
            f"effect {key} changed while this resolution looked at it; look again",
            intent_id=key,
        )
    if receipt is not None:
        await effects.finish(taken.with_receipt(receipt, at=time.time()))
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


def _checked(
    key: object,
    outcome: object,
    reason: object,
    actor: object,
    output: object,
    lease_seconds: object,
) -> tuple[str, str, Any]:
    """The reason and the actor as the trail keeps them, and the receipt's output (None for
    a retry); ``ResolutionRefused`` for any argument that is not one ``resolve_effect``
    takes, before anything is written."""
    shown = key if isinstance(key, str) else repr(key)[:80]
    if not isinstance(key, str) or not key.strip():
        raise ResolutionRefused(
            f"an effect key is a non-empty string, not {shown}", intent_id=shown
        )

    def refuse(problem: str) -> NoReturn:
        raise ResolutionRefused(problem, intent_id=shown)

    if not isinstance(outcome, str) or outcome not in _OUTCOMES:
        refuse(f"{outcome!r} is not an effect resolution; choose one of {', '.join(_OUTCOMES)}")
    note = " ".join(reason.split())[:_MAX_TEXT] if isinstance(reason, str) else ""
    if not note:
        refuse("a resolution needs a reason (a non-blank string), for the trail")
    if actor is not None and not isinstance(actor, str):
        refuse(f"actor must be a name (a string) or None, not {type(actor).__name__}")
    who = " ".join((actor or "").split())[:_MAX_TEXT] or default_actor()
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int | float):
        refuse(f"lease_seconds must be a number, not {type(lease_seconds).__name__}")
    if not (math.isfinite(lease_seconds) and lease_seconds > 0):
        refuse(f"lease_seconds must be a finite number above 0, not {lease_seconds!r}")
    if outcome == "committed":
        if output is None:
            refuse("resolving an effect as committed needs the output the external system shows")
        try:
            # The receipt as it will be stored, made now: an output it cannot hold is refused
            # before the effect is taken.
            _PROBE.with_receipt(output, at=0.0).encode()
        except (ReconcileError, TypeError, ValueError) as exc:
            refuse(f"the output cannot be kept as a receipt: {exc}")
        return note, who, output
    if output is not None:
        refuse(f"an output is given only with 'committed', not with {outcome!r}")
    if outcome == "abandon":
        return note, who, f"not done: abandoned by an operator ({note})"
    return note, who, None


_PROBE: Final = Effect(
    key="probe", session_id="", tool="", call_id="", arguments_digest="", owner="", started_at=0.0
)


def held(effect: Effect, lease_seconds: float) -> bool:
    """Whether a live owner may be running ``effect``'s body now, judged as an effect tool
    judges it from a process that runs none of it (``ownership.holds``): a process alive on
    this host, or a worker elsewhere within its lease (its own, where it stamped one), its
    age read on the journal's clock where the journal tells it (``Effect.held_for``). An
    effect left for a retry, or whose owner cannot be read, is held by nobody."""
    if effect.state is not EffectState.STARTED or effect.owner == RETRY_OWNER:
        return False
    try:
        owner = Owner.parse(effect.owner)
    except ValueError:
        return False
    return holds(
        owner,
        active=True,
        in_flight_here=False,
        age_seconds=effect.held_for(time.time()),
        lease_seconds=lease_seconds,
        me=current_owner(),
    )
