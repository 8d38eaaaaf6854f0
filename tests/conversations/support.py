"""What the Conversations tests share: a server per test, strict clients, a wrapped session
on a conversation of its own, and the items of a long history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent
from agents.memory import OpenAIConversationsSession
from agents.testing import ScriptedModel, assistant_message
from openai import AsyncOpenAI

from agents_reconcile import ReconcileConfig, ReconcilingSession

from ..support.conversations_server import ConversationsServer


def item(n: int) -> dict[str, Any]:
    """The ``n``-th input item of a long history: user messages with string content, each
    telling its place."""
    return {"role": "user", "content": f"message {n}"}


def history(count: int) -> list[Any]:
    return [item(n) for n in range(count)]


def label(stored: Any) -> str:
    """What tells an item apart, whichever form it is in (as sent, or as the service gives it
    back)."""
    if stored.get("type") == "function_call":
        return f"call:{stored['call_id']}"
    if stored.get("type") == "function_call_output":
        return f"output:{stored['call_id']}"
    if stored.get("type") == "reasoning":
        return f"reasoning:{stored['summary'][0]['text']}"
    content = stored["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    return f"{stored['role']}:{text}"


def labels(items: list[Any]) -> list[str]:
    return [label(one) for one in items]


def writes(server: ConversationsServer) -> list[int]:
    """The item counts of the item-create requests, in order."""
    return [
        request.items
        for request in server.requests
        if request.method == "POST" and request.path.endswith("/items")
    ]


def connect(server: ConversationsServer, **options: Any) -> AsyncOpenAI:
    """A client of ``server`` with the ``openai`` default of two retries, validating every
    response against the ``openai`` types."""
    options.setdefault("max_retries", 2)
    options.setdefault("timeout", 5.0)
    return AsyncOpenAI(
        base_url=server.base_url, api_key="test-key", _strict_response_validation=True, **options
    )


def wrap(
    client: AsyncOpenAI, directory: Path, conversation_id: str | None = None, **config: Any
) -> ReconcilingSession:
    """A wrapped Conversations session (its conversation created on first use, unless given),
    with its journal in ``directory``."""
    inner = OpenAIConversationsSession(conversation_id=conversation_id, openai_client=client)
    return ReconcilingSession(
        inner, config=ReconcileConfig(journal=directory / "journal.db", **config)
    )


def answering(*texts: str) -> tuple[Agent[Any], ScriptedModel]:
    """An agent whose model answers each call with the next of ``texts``."""
    model = ScriptedModel([[assistant_message(text)] for text in texts])
    return Agent(name="assistant", model=model), model
