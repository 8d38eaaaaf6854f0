"""The tutorial's app before agents-reconcile (docs/tutorial.md): one message per run.

    python plain_chat.py USER MESSAGE

Offline a scripted model answers; with OPENAI_API_KEY set, gpt-4.1-mini does.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agents import Agent, Model, Runner, SQLiteSession, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message


def model_for(user: str, text: str) -> str | Model:
    """gpt-4.1-mini with an API key; offline, a stand-in that answers this message."""
    if os.environ.get("OPENAI_API_KEY"):
        return "gpt-4.1-mini"
    set_tracing_disabled(True)
    return ScriptedModel([[assistant_message(f"{user}, you said: {text}")]])


async def chat(user: str, text: str) -> int:
    session = SQLiteSession(user, "chat.db")  # the conversation, one per user
    agent = Agent(name="assistant", instructions="Be brief.", model=model_for(user, text))
    result = await Runner.run(agent, text, session=session)
    print(f"assistant: {result.final_output}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(chat(sys.argv[1], sys.argv[2])))
