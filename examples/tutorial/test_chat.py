"""Tests of the tutorial's app (docs/tutorial.md): what a user gets when a save fails.

    python -m pytest -q test_chat.py

Each test runs in a directory of its own (``chat.db`` and the journal are made there), offline,
whichever journal the app itself is configured with.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agents import SQLiteSession
from chat import chat

from agents_reconcile.testing import Fault


@pytest.fixture(autouse=True)
def in_a_directory_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # The journal file of this directory, never the app's own: a test's failed saves are
    # not for the app's operators.
    monkeypatch.setattr("chat.JOURNAL", None)


def roles(user: str) -> list[str]:
    """The roles of what ``user``'s conversation holds, read from the store itself."""
    items = asyncio.run(SQLiteSession(user, "chat.db").get_items())
    return [str(item.get("role")) for item in items]


def test_an_answer_whose_save_was_rejected_is_saved_once_with_the_next_message() -> None:
    """The store rejected the answer: the next message saves it first, once."""
    assert asyncio.run(chat("alice", "my order is 42", fail_save=Fault.REJECT)) == 1
    assert roles("alice") == ["user"]
    assert asyncio.run(chat("alice", "did you get that?")) == 0
    assert roles("alice") == ["user", "assistant", "user", "assistant"]


def test_an_answer_saved_before_its_reply_was_lost_is_not_saved_twice() -> None:
    """The store wrote the answer and the reply was lost: it is kept, never written again."""
    assert asyncio.run(chat("alice", "my order is 42", fail_save=Fault.LOST_ACK)) == 1
    assert asyncio.run(chat("alice", "did you get that?")) == 0
    assert roles("alice") == ["user", "assistant", "user", "assistant"]


def test_a_conversation_another_writer_changed_waits_for_an_operator() -> None:
    """Someone else wrote to the conversation after the failed save: the next message is
    refused, and nothing is written, until an operator resolves it."""
    assert asyncio.run(chat("bob", "ship to Main St 1", fail_save=Fault.CONCURRENT_WRITER)) == 1
    before = roles("bob")
    assert asyncio.run(chat("bob", "are you there?")) == 1
    assert roles("bob") == before
