"""The tutorial's app with agents-reconcile (docs/tutorial.md): one message per run.

    python chat.py USER MESSAGE [--fail-save reject|lost_ack|concurrent_writer]

Each user's conversation is an SDK ``SQLiteSession`` in ``chat.db``, wrapped in a
``ReconcilingSession`` whose journal is ``JOURNAL`` (by default ``agents-reconcile.db`` beside
it). ``--fail-save``
makes the save of this message's answer fail the way the named fault says, as a store in
trouble would. Offline a scripted model answers; with OPENAI_API_KEY set, gpt-4.1-mini does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import time

from agents import Agent, Model, Runner, Session, SQLiteSession, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message

import agents_reconcile
from agents_reconcile import ContinuationDenied, IntentJournal, ReconcileConfig, ReconcilingSession
from agents_reconcile.testing import Fault, FaultInjectingSession

# --8<-- [start:wrap]
agents_reconcile.install()  # once, at startup: every run given a ReconcilingSession is gated

# Where each save's intent is kept: None is the file agents-reconcile.db in the working
# directory; workers on several hosts share one on a server ("redis://...", ...).
JOURNAL: IntentJournal | str | None = None


def open_session(user: str, store: Session | None = None) -> ReconcilingSession:
    """The user's conversation (its store given, or theirs in chat.db), each save of it
    journaled before it starts."""
    config = ReconcileConfig(journal=JOURNAL)
    return ReconcilingSession(store or SQLiteSession(user, "chat.db"), config=config)


# --8<-- [end:wrap]


def model_for(user: str, text: str) -> str | Model:
    """gpt-4.1-mini with an API key; offline, a stand-in that answers this message."""
    if os.environ.get("OPENAI_API_KEY"):
        return "gpt-4.1-mini"
    set_tracing_disabled(True)
    return ScriptedModel([[assistant_message(f"{user}, you said: {text}")]])


# --8<-- [start:fail]
ANSWER_SAVE = 2  # a run saves the user's message first (call 1), then the answer (call 2)


def failing_store(user: str, fault: Fault) -> FaultInjectingSession:
    """The user's store, with the save of the next answer failing as ``fault`` says."""
    store = FaultInjectingSession(SQLiteSession(user, "chat.db"))
    store.plan(fault, at=ANSWER_SAVE)
    return store


# --8<-- [end:fail]


# --8<-- [start:chat]
async def chat(user: str, text: str, fail_save: Fault | None = None) -> int:
    """Answer one message of ``user``'s; 0 when it is answered and saved, 1 when not."""
    store = failing_store(user, fail_save) if fail_save else None
    session = open_session(user, store)
    agent = Agent(name="assistant", instructions="Be brief.", model=model_for(user, text))
    started = time.time()
    try:
        result = await Runner.run(agent, text, session=session)
    except ContinuationDenied as denied:  # nothing was written, the model was not called
        decision = denied.decision
        print(f"paused: {decision.outcome.value} ({decision.reason.value}); an operator decides")
        return 1
    except (OSError, sqlite3.Error) as exc:  # the store's own error: the save failed
        print(f"not saved: {exc}")
        return 1
    for decision in reversed(await session.decisions(limit=10)):
        if decision.decided_at >= started:  # what this run settled before it went on
            print(f"earlier save: {decision.outcome.value} -> {decision.action.value}")
    print(f"assistant: {result.final_output}")
    roles = [item.get("role", item.get("type")) for item in await session.get_items()]
    print(f"history: {', '.join(str(role) for role in roles)}")
    return 0


# --8<-- [end:chat]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("user")
    parser.add_argument("message")
    parser.add_argument("--fail-save", type=Fault, choices=list(Fault), metavar="FAULT")
    args = parser.parse_args()
    return asyncio.run(chat(args.user, args.message, args.fail_save))


if __name__ == "__main__":
    sys.exit(main())
