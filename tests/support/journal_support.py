"""Records to feed journals in tests (the conformance suite's own builders: well-formed intents,
payload-free decisions, effects), and a fault proxy in front of a server."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from agents_reconcile._core.records import Action
from agents_reconcile.conformance._records import (
    BACKEND,
    OTHER_BACKEND,
    STRANGER,
    make_decision,
    make_effect,
    make_intent,
)
from agents_reconcile.testing import FaultProxy

__all__ = [
    "BACKEND",
    "OTHER_BACKEND",
    "SETTLING",
    "STRANGER",
    "make_decision",
    "make_effect",
    "make_intent",
    "proxy_to",
]

SETTLING = (Action.SETTLED, Action.REPLAYED, Action.DROPPED)


async def proxy_to(url: str) -> tuple[FaultProxy, str]:
    """A started ``FaultProxy`` in front of the server at ``url``, and ``url`` through it."""
    parts = urlsplit(url)
    proxy = await FaultProxy(parts.hostname or "127.0.0.1", parts.port or 0).start()
    credentials, at, _ = parts.netloc.rpartition("@")
    proxied = urlunsplit(parts._replace(netloc=f"{credentials}{at}127.0.0.1:{proxy.port}"))
    return proxy, proxied
