"""Records to feed journals in tests: well-formed intents and payload-free decisions."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agents_reconcile.effects.records import Effect, arguments_digest, effect_key
from agents_reconcile.faultproxy import FaultProxy
from agents_reconcile.fingerprint import digest_items
from agents_reconcile.ownership import Owner
from agents_reconcile.records import (
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
)

BACKEND = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/data/chat.db")
STRANGER = Owner(host="elsewhere#0badc0de", pid=4242, started="987654")
SETTLING = (Action.SETTLED, Action.REPLAYED, Action.DROPPED)


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


def make_decision(
    intent: PendingWrite,
    *,
    action: Action = Action.SETTLED,
    outcome: Outcome | None = None,
    reason: Reason | None = None,
    decided_at: float = 1_700_000_100.0,
) -> Decision:
    """A payload-free decision about ``intent``; outcome and reason follow the action."""
    settling = action in SETTLING
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


async def proxy_to(url: str) -> tuple[FaultProxy, str]:
    """A started ``FaultProxy`` in front of the server at ``url``, and ``url`` through it."""
    parts = urlsplit(url)
    proxy = await FaultProxy(parts.hostname or "127.0.0.1", parts.port or 0).start()
    credentials, at, _ = parts.netloc.rpartition("@")
    proxied = urlunsplit(parts._replace(netloc=f"{credentials}{at}127.0.0.1:{proxy.port}"))
    return proxy, proxied
