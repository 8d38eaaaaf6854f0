"""What the service adds to the items it gives back never makes a write look missing or
changed (one test per field the view leaves out), and what it is not known to add does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from agents_reconcile import ContinuationDenied, Outcome, Reason
from agents_reconcile._core.conversation_items import IGNORED_FIELDS

from ..support.conversations_server import ConversationsServer
from .support import labels, wrap, writes

SENT: list[Any] = [
    {"role": "user", "content": "what is on my card?"},
    {"type": "function_call", "call_id": "c1", "name": "balance", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "12.50"},
    {"role": "assistant", "content": "You have 12.50 left."},
]
SERVER_VALUES: dict[str, Any] = {
    "id": "item_same_for_every_item",
    "status": "in_progress",
    "provider_data": {"region": "eu", "response_id": "resp_1"},
}


async def lost_answer(
    server: ConversationsServer, client: AsyncOpenAI, directory: Path
) -> tuple[Any, list[Any]]:
    """A wrapped session whose write of ``SENT`` was stored with its answer lost."""
    session = wrap(client, directory)
    await session.get_items()
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await session.add_items(list(SENT))
    return session, server.stored(session.session_id)


async def test_the_rewrites_the_service_always_makes_are_not_a_changed_history(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """Server ids, ``status``, ``type: message`` and string content as text parts (with their
    empty ``annotations``): the write is found whole, not sent again."""
    session, stored = await lost_answer(server, client, tmp_path)
    assert all("id" in item and "status" in item for item in stored)
    assert stored[3]["content"] == [
        {"type": "output_text", "text": "You have 12.50 left.", "annotations": []}
    ]
    (decision,) = await session.reconcile()
    assert decision.outcome is Outcome.COMMITTED
    assert writes(server) == [4]


@pytest.mark.parametrize("field", IGNORED_FIELDS)
async def test_a_field_the_view_leaves_out_never_causes_a_denial(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, field: str
) -> None:
    """The service returns every item with ``field`` set its own way: the write whose answer
    was lost is still found whole."""
    server.extra_fields = {field: SERVER_VALUES[field]}
    session, _ = await lost_answer(server, client, tmp_path)
    given_back = await session.inner.get_items()
    assert all(item[field] == SERVER_VALUES[field] for item in given_back)
    (decision,) = await session.reconcile()
    assert decision.outcome is Outcome.COMMITTED
    assert labels(await session.get_items()) == labels(SENT)


async def test_a_field_the_view_does_not_know_denies_and_writes_nothing(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """An item comes back with a field nobody said the service adds: the write can be
    vouched for neither as stored nor as missing, so it is denied, and nothing is sent."""
    server.extra_fields = {"moderation": {"flagged": False}}
    session, stored = await lost_answer(server, client, tmp_path)
    with pytest.raises(ContinuationDenied) as denied:
        await session.reconcile()
    assert denied.value.decision.reason is Reason.HISTORY_CHANGED
    assert server.stored(session.session_id) == stored
    assert writes(server) == [4]


async def test_a_repair_of_a_conversation_says_it_cannot_rewrite_it_and_writes_nothing(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """A conversation holding a function call whose output is missing needs the call removed:
    the check finds it, and the repair is refused (a conversation cannot be rewritten in
    place), with nothing written and the conversation's id unchanged."""
    from agents.memory import OpenAIConversationsSession

    from agents_reconcile._operator.check import RepairRefused, repair_session

    session = OpenAIConversationsSession(openai_client=client)
    await session.add_items([SENT[0], SENT[1], SENT[3]])  # the call's output is missing
    conversation = session.session_id
    before = server.stored(conversation)
    with pytest.raises(RepairRefused, match="cannot be rewritten in place"):
        await repair_session(session, journal=str(tmp_path / "journal.db"), actor="ops")
    assert server.stored(conversation) == before
    assert session.session_id == conversation
    assert server.conversation_ids() == [conversation]
