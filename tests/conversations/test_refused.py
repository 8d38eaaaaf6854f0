"""A write the Conversations service refuses outright (an HTTP 4xx that proves nothing was
stored, such as an item naming a deleted file) is a known outcome: on the real runner against
the local server it is recorded as a decision and raised as ``WriteRefused``, nothing is
pending, and the next run goes on without the refused items, as the bare session does. A
failure that proves nothing (a 5xx, a timeout, a passing refusal) still leaves the write
pending, and it is reconciled as before."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from agents_reconcile import Action, Outcome, Reason, WriteRefused
from agents_reconcile._core.refusals import REFUSED_OUTRIGHT, refused_outright

from ..support.conversations_server import ConversationsServer
from ..support.runner_support import run
from .support import answering, connect, history, labels, wrap, writes

PATHS = pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
GONE = "file-0f1e2d3c4b5a"
NOT_FOUND = f"File '{GONE}' not found."


def naming_the_deleted_file(text: str) -> dict[str, Any]:
    """A user message asking about a file that no longer exists."""
    return {
        "role": "user",
        "content": [
            {"type": "input_text", "text": text},
            {"type": "input_file", "file_id": GONE},
        ],
    }


def refuse_the_deleted_file(server: ConversationsServer, position: int) -> None:
    """From now on the server refuses every request naming the deleted file, with a 400 whose
    parameter points at the item in the request (``position``) and stores nothing of it."""
    server.arm(
        kind="create_items",
        fault="reject",
        status=400,
        times=None,
        holding=GONE,
        message=NOT_FOUND,
        code="file_not_found",
        param=f"items[{position}].content[1].file_id",
    )


@PATHS
async def test_an_input_the_service_refuses_outright_is_recorded_and_the_next_run_goes_on(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """The run's input names a deleted file: the run raises ``WriteRefused`` naming the item
    and the service's answer, before any model call, with nothing pending and the decision
    recorded; the next run goes on from the history without it."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("hello", "unused")
    refuse_the_deleted_file(server, 0)

    with pytest.raises(WriteRefused) as raised:
        await run(agent, [naming_the_deleted_file("what is in it?")], session, streamed=streamed)
    refused = raised.value
    assert (refused.status, refused.code, refused.service_message) == (
        400,
        "file_not_found",
        NOT_FOUND,
    )
    assert (refused.refused, refused.item, refused.landed, refused.dropped) == (range(1), 0, 0, 1)
    assert NOT_FOUND in str(refused) and "item 0" in str(refused)
    assert isinstance(refused.__cause__, openai.BadRequestError)
    # Drop-in: code that catches the service's own error around a run still catches it.
    assert isinstance(refused, openai.BadRequestError)
    assert refused.status_code == 400
    assert not model.calls
    assert await session.pending() == []
    (decision,) = await session.decisions()
    assert decision.intent_id == refused.intent_id
    assert (decision.outcome, decision.reason, decision.action) == (
        Outcome.UNCHANGED,
        Reason.WRITE_REFUSED,
        Action.DROPPED,
    )
    assert decision.evidence["status"] == 400
    assert GONE not in repr(decision.evidence)

    await run(agent, "hello", session, streamed=streamed)
    assert labels(server.stored(session.session_id)) == ["user:hello", "assistant:hello"]
    assert labels(list(model.calls[0].input)) == ["user:hello"]
    assert await session.pending() == []


@PATHS
async def test_a_refused_second_request_keeps_the_first_and_drops_the_rest(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """Item 25 of a 45-item input names a deleted file: the first request (items 0 to 19) is
    stored and stays, the second is refused, the third is never sent; the next run goes on
    from the 20 items."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("go on")
    batch = history(45)
    batch[25] = naming_the_deleted_file("message 25")
    refuse_the_deleted_file(server, 5)

    with pytest.raises(WriteRefused) as raised:
        await run(agent, batch, session, streamed=streamed)
    refused = raised.value
    assert (refused.refused, refused.item, refused.landed, refused.dropped) == (
        range(20, 40),
        25,
        20,
        25,
    )
    assert writes(server) == [20, 20]
    assert await session.pending() == []
    (decision,) = await session.decisions()
    assert (decision.outcome, decision.reason) == (Outcome.PARTIAL, Reason.WRITE_REFUSED)
    assert decision.evidence["refused"] == [20, 40]

    await run(agent, "and now?", session, streamed=streamed)
    assert labels(list(model.calls[0].input)) == [*labels(batch[:20]), "user:and now?"]
    assert labels(server.stored(session.session_id)) == [
        *labels(batch[:20]),
        "user:and now?",
        "assistant:go on",
    ]


@PATHS
async def test_a_completion_the_service_refuses_outright_is_recorded_and_the_run_after_goes_on(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """The first request of the 45-item input is stored with its answer lost; the next run's
    completion of the batch is refused (item 25 names a deleted file): it raises
    ``WriteRefused``, the intent is settled with the 20 items that landed, and the run after
    it goes on."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("go on")
    batch = history(45)
    batch[25] = naming_the_deleted_file("message 25")
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await run(agent, batch, session, streamed=streamed)
    (pending,) = await session.pending()
    refuse_the_deleted_file(server, 5)

    with pytest.raises(WriteRefused) as raised:
        await run(agent, batch, session, streamed=streamed)
    assert raised.value.intent_id == pending.intent_id
    assert (raised.value.landed, raised.value.item) == (20, 25)
    assert await session.pending() == []
    (decision,) = await session.decisions()
    assert (decision.outcome, decision.reason, decision.action) == (
        Outcome.PARTIAL,
        Reason.WRITE_REFUSED,
        Action.DROPPED,
    )
    assert not model.calls

    await run(agent, "and now?", session, streamed=streamed)
    assert labels(server.stored(session.session_id)) == [
        *labels(batch[:20]),
        "user:and now?",
        "assistant:go on",
    ]


async def test_where_payloads_are_sealed_the_refusal_does_not_quote_the_service(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """With a payload key, the error says the status, code, parameter and positions but not the
    service's message (it may quote an item), and does not chain the service's exception."""
    session = wrap(client, tmp_path, payload_key=b"k" * 32)
    await session.get_items()
    refuse_the_deleted_file(server, 0)

    with pytest.raises(WriteRefused) as raised:
        await session.add_items([naming_the_deleted_file("what is in it?")])
    refused = raised.value
    assert refused.service_message is None
    assert GONE not in str(refused) and "HTTP 400 file_not_found" in str(refused)
    assert refused.__cause__ is None and refused.__suppress_context__
    assert await session.pending() == []


@pytest.mark.parametrize("status", [401, 408, 409, 429, 500, 503])
async def test_a_refusal_that_proves_nothing_leaves_the_write_pending_and_it_is_replayed(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, status: int
) -> None:
    """Credentials refused, a timeout, a conflict, too many requests, a server error: the
    service's own exception reaches the caller, the intent stays pending, and the next run
    sends the input once."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, _ = answering("hello")
    server.arm(kind="create_items", fault="reject", status=status)

    with pytest.raises(openai.APIStatusError) as raised:
        await run(agent, "hi", session, streamed=False)
    assert raised.value.status_code == status
    assert len(await session.pending()) == 1

    await run(agent, "hi", session, streamed=False)
    (decision,) = await session.decisions()
    assert (decision.outcome, decision.action) == (Outcome.UNCHANGED, Action.REPLAYED)
    assert labels(server.stored(session.session_id)) == ["user:hi", "assistant:hello"]


@PATHS
async def test_a_write_whose_answer_timed_out_stays_pending_and_is_found(
    server: ConversationsServer, tmp_path: Path, streamed: bool
) -> None:
    """The service stores the input after the client gave up waiting: the timeout proves
    nothing, the intent stays pending, and the next run finds the input stored, never sending
    it again."""
    impatient = connect(server, timeout=0.5)
    try:
        session = wrap(impatient, tmp_path)
        await session.get_items()
        agent, _ = answering("hello")
        server.arm(kind="create_items", fault="delay", seconds=1.0)

        with pytest.raises(openai.APITimeoutError):
            await run(agent, "hi", session, streamed=streamed)
        assert len(await session.pending()) == 1
        for _ in range(100):
            if server.stored(session.session_id):
                break
            await asyncio.sleep(0.05)

        await run(agent, "hi", session, streamed=streamed)
        (decision,) = await session.decisions()
        assert decision.outcome is Outcome.COMMITTED
        assert labels(server.stored(session.session_id)) == ["user:hi", "assistant:hello"]
    finally:
        await impatient.close()


def test_the_statuses_that_end_a_write_are_those_that_prove_it_would_be_refused_again() -> None:
    """400, 404, 410, 413, 415 and 422 end a write; credentials, passing refusals and server
    errors never do."""
    assert sorted(REFUSED_OUTRIGHT) == [400, 404, 410, 413, 415, 422]
    for status in (401, 403, 408, 409, 425, 429, 500, 502, 503, 504):
        assert not refused_outright(status)


@pytest.mark.filterwarnings("ignore::agents_reconcile.UngatedRunWarning")
async def test_a_saved_state_still_carrying_a_refused_write_is_refused_when_resumed(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """A run's state saved while the write was pending still carries it after the store refused
    its completion outright: resuming that state is denied (``write_refused``) rather than
    going on from a batch the store never took, while the session itself goes on."""
    from agents.run_context import RunContextWrapper

    from agents_reconcile import ContinuationDenied

    session = wrap(client, tmp_path)
    await session.get_items()
    batch = history(45)
    batch[25] = naming_the_deleted_file("message 25")
    live: dict[str, Any] = {}
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await session.add_items(batch, wrapper=RunContextWrapper(live))
    saved = copy.deepcopy(live)
    assert saved["agents_reconcile"]["pending"]
    refuse_the_deleted_file(server, 5)

    with pytest.raises(WriteRefused):
        await session.reconcile(live)
    assert not live["agents_reconcile"]["pending"]
    with pytest.raises(ContinuationDenied) as denied:
        await session.get_items(wrapper=RunContextWrapper(saved))
    assert denied.value.decision.reason is Reason.WRITE_REFUSED
    assert denied.value.decision.evidence["landed"] == 20
    assert len(await session.get_items()) == 20


async def test_an_operators_replay_the_service_refuses_outright_is_recorded_as_refused(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """An operator replays a pending write (``on_unchanged="fail"`` left it to them) and the
    service refuses it outright: ``WriteRefused``, the intent settled as refused with the
    operator's name in its evidence, nothing pending."""
    session = wrap(client, tmp_path, on_unchanged="fail")
    await session.get_items()
    server.arm(kind="create_items", fault="reject", status=500)
    with pytest.raises(openai.InternalServerError):
        await session.add_items([naming_the_deleted_file("what is in it?")])
    (pending,) = await session.pending()
    refuse_the_deleted_file(server, 0)

    with pytest.raises(WriteRefused) as raised:
        await session.resolve(pending.intent_id, "replay", reason="send it", actor="ops")
    assert raised.value.intent_id == pending.intent_id
    assert await session.pending() == []
    decision = (await session.decisions())[0]
    assert (decision.reason, decision.action) == (Reason.WRITE_REFUSED, Action.DROPPED)
    assert decision.evidence["actor"] == "ops"
    assert server.stored(session.session_id) == []
