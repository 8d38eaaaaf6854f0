"""A worker process that appends to a Conversations session through the wrapper, for the tests
that kill it mid-write.

    python -m tests.support.conversations_worker BASE_URL CONVERSATION_ID JOURNAL COUNT

It says ``started`` on a line of its own, then appends COUNT user messages in one call, then
says ``appended``; a test kills it (SIGKILL) while a request is under way.
"""

from __future__ import annotations

import asyncio
import sys

from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI

from agents_reconcile import ReconcileConfig, ReconcilingSession


def items(count: int) -> list[dict[str, str]]:
    """The items the worker appends (the tests' ``history(count)``)."""
    return [{"role": "user", "content": f"message {n}"} for n in range(count)]


async def main(base_url: str, conversation_id: str, journal: str, count: int) -> None:
    client = AsyncOpenAI(base_url=base_url, api_key="test-key", timeout=30.0)
    inner = OpenAIConversationsSession(conversation_id=conversation_id, openai_client=client)
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    await session.get_items()
    print("started", flush=True)
    await session.add_items(items(count))
    print("appended", flush=True)


if __name__ == "__main__":
    base, conversation, path, number = sys.argv[1:5]
    asyncio.run(main(base, conversation, path, int(number)))
