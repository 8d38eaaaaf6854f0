"""Records the checks feed a backend: well-formed intents, payload-free decisions, effects, and
the owners and backend identities they name. Usable in a backend's own tests as well."""

from __future__ import annotations

from typing import Any, Final

from .._core.effect_records import Effect, arguments_digest, effect_key
from .._core.fingerprint import digest_items
from .._core.ownership import Owner
from .._core.records import Action, BackendIdentity, Decision, Outcome, PendingWrite, Reason

__all__ = [
    "BACKEND",
    "ME",
    "OTHER_BACKEND",
    "OTHER_KIND",
    "STRANGER",
    "make_decision",
    "make_effect",
    "make_intent",
]

BACKEND: Final = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/data/chat.db")
"""The store the intents of the checks were written to."""
OTHER_BACKEND: Final = BackendIdentity(
    "agents.memory.sqlite_session.SQLiteSession", "/srv/data/other.db"
)
"""Another instance of the same kind of store."""
OTHER_KIND: Final = BackendIdentity("conformance.custom.ListSession", "/srv/data/chat.db")
"""Another kind of store with the same namespace."""

ME: Final = Owner(host="conformance-host#0c0ffee0", pid=1111, started="123456")
"""The owner the checks write as."""
STRANGER: Final = Owner(host="elsewhere#0badc0de", pid=4242, started="987654")
"""Another owner (another worker, on another host)."""


def make_intent(
    intent_id: str,
    *,
    session_id: str = "session-a",
    backend: BackendIdentity = BACKEND,
    created_at: float = 1_700_000_000.0,
    text: str = "hello",
) -> PendingWrite:
    """A well-formed pending write of one user item on top of one assistant item."""
    batch: tuple[dict[str, Any], ...] = ({"role": "user", "content": text},)
    before = ({"role": "assistant", "content": "earlier answer"},)
    return PendingWrite(
        intent_id=intent_id,
        session_id=session_id,
        backend=backend,
        batch=batch,
        batch_digests=digest_items(batch),
        before_digests=digest_items(before),
        before_is_whole=True,
        created_at=created_at,
        persisted_count=1,
    )


def make_decision(
    intent: PendingWrite,
    *,
    action: Action = Action.SETTLED,
    outcome: Outcome | None = None,
    reason: Reason | None = None,
    decided_at: float = 1_700_000_100.0,
) -> Decision:
    """A payload-free decision about ``intent``: one that settles it (``SETTLED``,
    ``REPLAYED``, ``DROPPED``) or one that leaves it unresolved (``DENIED``, ``LEFT_PENDING``);
    outcome and reason follow the action unless given."""
    settling = action in (Action.SETTLED, Action.REPLAYED, Action.DROPPED)
    return Decision(
        intent_id=intent.intent_id,
        session_id=intent.session_id,
        backend=intent.backend,
        outcome=outcome or (Outcome.COMMITTED if settling else Outcome.AMBIGUOUS),
        reason=reason or (Reason.BATCH_PRESENT if settling else Reason.HISTORY_CHANGED),
        action=action,
        decided_at=decided_at,
        evidence={"batch_digests": list(intent.batch_digests), "observed_count": 2},
    )


def make_effect(
    call_id: str = "c1",
    *,
    session_id: str = "session-a",
    owner: str = "host/1/1",
    seal_key: Any = None,
) -> Effect:
    """A started effect of one ``charge_card`` call (its output sealed with ``seal_key``)."""
    arguments = '{"amount": 5}'
    return Effect(
        key=effect_key(session_id, call_id, "charge_card", arguments),
        session_id=session_id,
        tool="charge_card",
        call_id=call_id,
        arguments_digest=arguments_digest(arguments),
        owner=owner,
        started_at=1_700_000_000.0,
        seal_key=seal_key,
    )
