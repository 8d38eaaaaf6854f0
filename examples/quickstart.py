"""Quick start: ``agents_reconcile.install()`` once, then any session wrapped in
``ReconcilingSession`` is passed as ``session=`` alone.

Run it with::

    python examples/quickstart.py

Offline by default: a scripted model stands in for the real one, so no key and no network
are needed. With ``OPENAI_API_KEY`` set, the same two turns go to ``gpt-4.1-mini`` instead.

The conversation is stored in ``chat.db`` (an ``SQLiteSession``) and the intent journal in
``agents-reconcile.db``, both in a temporary directory that is removed at the end. Without
``journal=``, the journal would be ``agents-reconcile.db`` in the working directory.

Nothing fails in this run, so nothing is reconciled: the wrapper records each write's intent
and clears it once the write is acknowledged. ``crash_and_resume.py`` and
``streaming_resume.py`` show what happens when a write does fail.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message

import agents_reconcile
from agents_reconcile import ReconcileConfig, ReconcilingSession

INSTRUCTIONS = "You are a concise assistant. Answer in one short sentence."
TURNS = ("Hi! My name is Ada.", "What is my name?")


def build_agent(offline: bool) -> Agent[Any]:
    if not offline:
        return Agent(name="assistant", instructions=INSTRUCTIONS, model="gpt-4.1-mini")
    # Offline there is nobody to send traces to.
    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            [assistant_message("Nice to meet you, Ada!")],
            [assistant_message("Your name is Ada.")],
        ]
    )
    return Agent(name="assistant", instructions=INSTRUCTIONS, model=model)


async def converse(directory: Path, offline: bool) -> int:
    # Once per process: every run given a ReconcilingSession gets the gate, which checks for
    # unsettled writes before every model call (run_config=session.run_config() and
    # hooks=session.hooks() on each run do the same by hand).
    agents_reconcile.install()
    agent = build_agent(offline)
    session = ReconcilingSession(
        SQLiteSession("user-42", directory / "chat.db"),
        config=ReconcileConfig(journal=directory / "agents-reconcile.db"),
    )
    try:
        # The first turn runs to completion; the second streams. Both go through the gate.
        first = await Runner.run(agent, TURNS[0], session=session)
        print(f"user:      {TURNS[0]}")
        print(f"assistant: {first.final_output}")

        stream = Runner.run_streamed(agent, TURNS[1], session=session)
        async for _event in stream.stream_events():
            pass
        print(f"user:      {TURNS[1]}")
        print(f"assistant: {stream.final_output}")

        history = await session.get_items()
        pending = await session.pending()
        decisions = await session.decisions()
    finally:
        session.inner.close()
        await session.journal.close()

    print(
        f"\nstored history: {len(history)} items; pending intents: {len(pending)}; "
        f"reconciliation decisions: {len(decisions)}"
    )
    problems = []
    if len(history) != 4:
        problems.append(
            f"expected 4 stored items (2 turns x user + assistant), found {len(history)}"
        )
    if pending:
        problems.append(f"{len(pending)} intent(s) left pending after acknowledged writes")
    model = agent.model
    if isinstance(model, ScriptedModel) and model.last_call is not None:
        # The model's second input is the stored history plus the new question.
        seen = model.last_call.input
        if not isinstance(seen, list) or len(seen) != 3:
            problems.append("the second turn did not see the first one")
    for problem in problems:
        print(f"CHECK FAILED: {problem}")
    if not problems:
        print("OK: every write was acknowledged, so nothing needed reconciling.")
    return 1 if problems else 0


def main() -> int:
    offline = not os.environ.get("OPENAI_API_KEY")
    print("Running offline with a scripted model." if offline else "Using gpt-4.1-mini.")
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-quickstart-") as tmp:
        return asyncio.run(converse(Path(tmp), offline))


if __name__ == "__main__":
    sys.exit(main())
