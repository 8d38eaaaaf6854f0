"""The fake Conversations API (``tests.support.conversations_server``) under the real ``openai``
client and the SDK's own ``OpenAIConversationsSession``: chunked writes, pagination, popping
and clearing, the items the server rewrites, each armed fault, and the entry point that serves
from a process of its own."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI, OpenAI
from openai.types.conversations import Message
from openai.types.responses import (
    ResponseFunctionToolCallItem,
    ResponseFunctionToolCallOutputItem,
    ResponseInputItemParam,
)
from pydantic import TypeAdapter

from ..support.conversations_server import ConversationsServer
from ..support.sdk import chunking_sdk

REPO = Path(__file__).resolve().parents[2]
INPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)
PREFIXES = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_"}


def item(n: int) -> dict[str, Any]:
    """The ``n``-th item of a history: user and assistant messages with string content, and a
    function call with its output, in turn."""
    match n % 4:
        case 0:
            return {"role": "user", "content": f"question {n}"}
        case 1:
            return {"type": "function_call", "call_id": f"call_{n}", "name": "f", "arguments": "{}"}
        case 2:
            return {"type": "function_call_output", "call_id": f"call_{n - 1}", "output": f"{n}"}
        case _:
            return {"role": "assistant", "content": f"answer {n}"}


def history(count: int) -> list[Any]:
    return [item(n) for n in range(count)]


def label(stored: Any) -> str:
    """What tells an item of ``history`` apart, whichever form it is in."""
    if stored.get("type") == "function_call":
        return str(stored["call_id"])
    if stored.get("type") == "function_call_output":
        return f"output {stored['output']}"
    content = stored["content"]
    return str(content if isinstance(content, str) else content[0]["text"])


def writes(server: ConversationsServer) -> list[int]:
    """The item counts of the item-create requests, in order."""
    return [
        request.items
        for request in server.requests
        if request.method == "POST" and request.path.endswith("/items")
    ]


def listings(server: ConversationsServer) -> list[str]:
    """The targets of the item-list requests, in order."""
    return [
        request.path
        for request in server.requests
        if request.method == "GET" and request.path.split("?")[0].endswith("/items")
    ]


@pytest.fixture
def server() -> Iterator[ConversationsServer]:
    with ConversationsServer() as running:
        yield running


def connect(server: ConversationsServer, **options: Any) -> AsyncOpenAI:
    """A client of ``server`` that validates every response against the ``openai`` types
    (by default it builds them without checking)."""
    options.setdefault("max_retries", 2)
    options.setdefault("timeout", 5.0)
    return AsyncOpenAI(
        base_url=server.base_url,
        api_key="test-key",
        _strict_response_validation=True,
        **options,
    )


@pytest.fixture
async def client(server: ConversationsServer) -> AsyncIterator[AsyncOpenAI]:
    """A strict client with the ``openai`` default of two retries made explicit."""
    connected = connect(server)
    yield connected
    await connected.close()


async def started(client: AsyncOpenAI) -> OpenAIConversationsSession:
    """A session whose conversation exists already (so requests counted next are its own)."""
    session = OpenAIConversationsSession(openai_client=client)
    await session.get_items()
    return session


@chunking_sdk
async def test_a_45_item_add_is_sent_as_20_20_and_5_and_reads_back_in_order(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    sent = history(45)

    await session.add_items(sent)

    assert writes(server) == [20, 20, 5]
    everything: list[Any] = await session.get_items()
    assert [label(got) for got in everything] == [label(one) for one in sent]
    last = await session.get_items(limit=7)
    assert last == everything[-7:]
    assert len({got["id"] for got in everything}) == 45
    for got in everything:
        assert got["status"] == "completed"
        assert got["id"].startswith(PREFIXES[got["type"]])
    question, call, output, answer = everything[:4]
    assert question == {
        "id": question["id"],
        "type": "message",
        "role": "user",
        "status": "completed",
        "content": [{"type": "input_text", "text": "question 0"}],
    }
    # Log probabilities are returned only when asked for: an empty list otherwise.
    assert answer["content"] == [
        {"type": "output_text", "text": "answer 3", "annotations": [], "logprobs": []}
    ]
    assert (call["call_id"], call["name"], call["arguments"]) == ("call_1", "f", "{}")
    assert (output["call_id"], output["output"]) == ("call_1", "2")
    stored = server.stored(session.session_id)
    assert [got for got in everything if got.get("role") != "assistant"] == [
        one for one in stored if one.get("role") != "assistant"
    ]


async def test_items_read_back_parse_as_the_client_types_and_can_be_sent_again(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(8))

    listed = [got async for got in client.conversations.items.list(session.session_id, order="asc")]
    kinds = [type(got) for got in listed[:4]]
    assert kinds == [
        Message,
        ResponseFunctionToolCallItem,
        ResponseFunctionToolCallOutputItem,
        Message,
    ]
    # What the session returns is what it would send again: valid input items, which a second
    # conversation stores as the same history.
    dumped: list[Any] = await session.get_items()
    for got in dumped:
        INPUT_ITEM.validate_python(got)
    again = await started(client)
    await again.add_items(dumped)
    copied: list[Any] = await again.get_items()
    assert [label(got) for got in copied] == [label(got) for got in dumped]
    assert {got["id"] for got in copied}.isdisjoint(got["id"] for got in dumped)


@chunking_sdk
async def test_listing_follows_the_after_cursor_through_every_page(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(45))
    before = len(listings(server))

    pages = client.conversations.items.list(session.session_id, order="asc", limit=10)
    ascending = [label(got.model_dump(exclude_unset=True)) async for got in pages]
    descending = [
        label(got.model_dump(exclude_unset=True))
        async for got in client.conversations.items.list(session.session_id, limit=10)
    ]

    assert ascending == [label(one) for one in history(45)]
    assert descending == ascending[::-1]
    asked = listings(server)[before:]
    assert len(asked) == 10
    assert "after=" not in asked[0]
    assert all("after=" in target and "limit=10" in target for target in asked[1:5])
    stored = server.stored(session.session_id)
    assert f"after={stored[9]['id']}" in asked[1]
    # The session reads everything in pages of the default size (20).
    before = len(listings(server))
    assert len(await session.get_items()) == 45
    assert len(listings(server)) - before == 3


async def test_pop_item_removes_and_returns_the_last_item(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(4))
    last = server.stored(session.session_id)[-1]

    popped: Any = await session.pop_item()

    assert popped is not None and popped["id"] == last["id"]
    assert label(popped) == "answer 3"
    assert [label(got) for got in server.stored(session.session_id)] == [
        label(one) for one in history(3)
    ]
    assert server.requests[-1].method == "DELETE"


async def test_clear_session_deletes_the_conversation_and_the_next_use_gets_a_new_id(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(3))
    first = session.session_id

    await session.clear_session()

    assert first not in server.conversation_ids()
    with pytest.raises(openai.NotFoundError) as raised:
        await client.conversations.retrieve(first)
    assert raised.value.status_code == 404
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == (
        "invalid_request_error"
    )
    assert await session.get_items() == []
    assert session.session_id != first
    assert server.conversation_ids() == [session.session_id]


@chunking_sdk
async def test_a_rejected_second_chunk_keeps_the_first_and_stores_nothing_else(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    fault = server.arm(kind="create_items", nth=2, fault="reject", status=500)

    with pytest.raises(openai.InternalServerError):
        await session.add_items(history(45))

    # The session turns retries off for a write of several requests: nothing was retried.
    assert writes(server) == [20, 20]
    assert fault.fired == 1
    assert [label(got) for got in server.stored(session.session_id)] == [
        label(one) for one in history(20)
    ]


@chunking_sdk
async def test_a_lost_acknowledgement_of_the_first_chunk_stores_it_once_and_raises(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    server.arm(kind="create_items", nth=1, fault="commit_then_drop")

    with pytest.raises(openai.APIConnectionError):
        await session.add_items(history(45))

    assert writes(server) == [20]
    assert [label(got) for got in server.stored(session.session_id)] == [
        label(one) for one in history(20)
    ]


async def test_a_lost_acknowledgement_of_a_single_request_is_retried_and_stored_twice(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    # The hazard the SDK documents: one request keeps the client's retries, and the retry of a
    # write whose reply was lost writes it again. The call itself succeeds.
    assert client.max_retries == 2
    session = await started(client)
    server.arm(kind="create_items", nth=1, fault="commit_then_drop")

    await session.add_items(history(5))

    assert writes(server) == [5, 5]
    assert [label(got) for got in server.stored(session.session_id)] == [
        label(one) for one in history(5) * 2
    ]


async def test_a_rejected_single_request_is_retried_by_the_client_and_stored_once(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    server.arm(kind="create_items", fault="reject", status=503, times=2, retry_after=0.01)

    await session.add_items(history(5))

    assert writes(server) == [5, 5, 5]
    assert len(server.stored(session.session_id)) == 5


async def test_faults_count_requests_of_their_kind_from_arming(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(2))
    await session.add_items(history(2))
    fault = server.arm(kind="create_items", nth=2, fault="reject", status=400, times=None)

    await session.add_items(history(1))
    for _ in range(2):
        with pytest.raises(openai.BadRequestError):
            await session.add_items(history(1))

    assert server.count("create_items") == 5
    assert fault.fired == 2
    server.clear_faults()
    await session.add_items(history(1))
    assert len(server.stored(session.session_id)) == 6


async def test_extra_fields_appear_on_every_item_read_back_but_are_not_stored(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(4))
    server.extra_fields = {"created_by": "user_fake", "x_added_later": {"n": 1}}

    read_back: list[Any] = await session.get_items()
    for got in read_back:
        assert got["created_by"] == "user_fake"
        assert got["x_added_later"] == {"n": 1}
    retrieved = await client.conversations.items.retrieve(
        server.stored(session.session_id)[0]["id"], conversation_id=session.session_id
    )
    assert retrieved.model_dump(exclude_unset=True)["x_added_later"] == {"n": 1}
    assert all("x_added_later" not in stored for stored in server.stored(session.session_id))
    # The client checks what it gets, so the items above are valid for its types.
    server.extra_fields = {"status": "unheard_of"}
    with pytest.raises(openai.APIResponseValidationError):
        await session.get_items()


async def test_a_delay_holds_the_request_then_answers_it(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    session = await started(client)
    await session.add_items(history(3))
    server.arm(kind="list_items", fault="delay", seconds=0.3)

    began = time.monotonic()
    assert len(await session.get_items()) == 3
    assert time.monotonic() - began >= 0.3

    # A client that gives up sooner times out; the delayed request still happens.
    server.arm(kind="create_items", fault="delay", seconds=0.5)
    impatient = connect(server, max_retries=0, timeout=0.1)
    try:
        with pytest.raises(openai.APITimeoutError):
            await OpenAIConversationsSession(
                conversation_id=session.session_id, openai_client=impatient
            ).add_items(history(1))
    finally:
        await impatient.close()
    for _ in range(100):
        if len(server.stored(session.session_id)) == 4:
            break
        await asyncio.sleep(0.02)
    assert len(server.stored(session.session_id)) == 4


async def test_the_server_answers_the_other_endpoints_and_refuses_what_the_api_refuses(
    server: ConversationsServer, client: AsyncOpenAI
) -> None:
    created = await client.conversations.create(items=history(2), metadata={"topic": "tests"})
    assert created.object == "conversation" and created.metadata == {"topic": "tests"}
    assert (await client.conversations.retrieve(created.id)).id == created.id
    stored = server.stored(created.id)
    assert [label(got) for got in stored] == ["question 0", "call_1"]

    one = await client.conversations.items.retrieve(stored[1]["id"], conversation_id=created.id)
    assert isinstance(one, ResponseFunctionToolCallItem) and one.call_id == "call_1"
    after = await client.conversations.items.delete(stored[0]["id"], conversation_id=created.id)
    assert after.id == created.id
    with pytest.raises(openai.NotFoundError):
        await client.conversations.items.retrieve(stored[0]["id"], conversation_id=created.id)

    with pytest.raises(openai.BadRequestError) as raised:
        await client.conversations.items.create(created.id, items=history(21))
    assert isinstance(raised.value.body, dict) and raised.value.body["param"] == "items"
    with pytest.raises(openai.BadRequestError):
        await client.conversations.create(items=history(21))
    assert [label(got) for got in server.stored(created.id)] == ["call_1"]
    assert server.conversation_ids() == [created.id]

    with pytest.raises(openai.NotFoundError):
        await client.conversations.items.create("conv_missing", items=history(1))
    deleted = await client.conversations.delete(created.id)
    assert (deleted.object, deleted.deleted) == ("conversation.deleted", True)
    assert server.conversation_ids() == []


def test_the_entry_point_prints_its_url_serves_and_stops_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.conversations_server", "--max-seconds", "30"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        assert process.stdout is not None
        # A selector, not select(): a long run may hold descriptors past select()'s limit.
        with selectors.DefaultSelector() as waiting:
            waiting.register(process.stdout, selectors.EVENT_READ)
            assert waiting.select(timeout=10), "the server printed nothing"
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")

        with OpenAI(
            base_url=base_url,
            api_key="test-key",
            max_retries=0,
            timeout=5,
            _strict_response_validation=True,
        ) as client:
            created = client.conversations.create(items=history(1))
            listed = client.conversations.items.list(created.id)
            assert [label(got.model_dump()) for got in listed] == ["question 0"]

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)


def test_the_entry_point_stops_by_itself_after_max_seconds() -> None:
    began = time.monotonic()
    finished = subprocess.run(
        [sys.executable, "-m", "tests.support.conversations_server", "--max-seconds", "0.3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert finished.returncode == 0
    assert finished.stdout.startswith("http://127.0.0.1:")
    assert time.monotonic() - began < 5
