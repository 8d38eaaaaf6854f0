"""An ``OpenAIConversationsSession`` wrapped, on the real runner against the local Conversations
server: a write that stopped part-way is completed request by request, once, before any model
call; what cannot be vouched for is denied; the SDK sees a Conversations session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import RunState, function_tool
from agents.agent import Agent
from agents.exceptions import UserError
from agents.memory import OpenAIConversationsSession
from agents.testing import ScriptedModel, assistant_message, function_call
from openai import AsyncOpenAI

from agents_reconcile import ContinuationDenied, Outcome, Reason, ReconcilingSession

from ..support.conversations_server import ConversationsServer
from ..support.runner_support import run
from .support import answering, history, label, labels, wrap, writes

PATHS = pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
BATCH = history(45)


async def failing(
    agent: Agent[Any], start: Any, session: ReconcilingSession, streamed: bool
) -> Any:
    """Run once, expecting the session's write to fail; return what it raised."""
    with pytest.raises(openai.APIError) as raised:
        await run(agent, start, session, streamed=streamed)
    return raised.value


async def test_the_wrapper_is_a_conversations_session_to_the_sdk(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """``ReconcilingSession`` around a Conversations session is an instance of both: the SDK's
    checks of its type see what they see unwrapped. Its id is the conversation's, which a
    session without one creates on first use; the backend names the service it talks to."""
    session = wrap(client, tmp_path)
    assert isinstance(session, OpenAIConversationsSession)
    assert isinstance(session, ReconcilingSession)
    with pytest.raises(ValueError, match="not yet available"):
        _ = session.session_id
    assert await session.pending() == []
    assert server.conversation_ids() == []  # nothing asked of it created a conversation

    assert await session.get_items() == []
    assert server.conversation_ids() == [session.session_id]
    assert session.backend_identity.namespace == f"{server.base_url}/"
    assert session.inner.session_id == session.session_id


@PATHS
async def test_a_45_item_input_whose_first_answer_was_lost_is_completed_before_any_model_call(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """The first request (20 items) is stored and its answer lost: the run fails before any
    model call, nothing more is sent. The next run reads the conversation back, finds the
    first request whole, sends the other 25 once, in order, and only then calls the model,
    which sees all 45 once."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("done")
    server.arm(kind="create_items", fault="commit_then_drop")

    await failing(agent, BATCH, session, streamed)
    assert not model.calls
    assert writes(server) == [20]

    await run(agent, BATCH, session, streamed=streamed)
    assert writes(server) == [20, 20, 5, 1]
    stored = server.stored(session.session_id)
    assert labels(stored) == [*labels(BATCH), "assistant:done"]
    assert len(model.calls) == 1
    assert labels(list(model.calls[0].input)) == labels(BATCH)
    (decision,) = await session.decisions()
    assert (decision.outcome, decision.reason) == (Outcome.PARTIAL, Reason.CHUNKS_LANDED)
    assert decision.evidence["landed"] == 20


@PATHS
async def test_a_45_item_batch_failing_at_its_second_request_after_the_first_lost_its_answer(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """The first request is stored with its answer lost, and the second request the session
    sends is refused: that is the completion the next run attempts, which fails before any
    model call. The run after it completes the batch once, in order, and then calls the model,
    which sees every item once."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("done")
    server.arm(kind="create_items", fault="commit_then_drop", nth=1)
    server.arm(kind="create_items", fault="reject", nth=2)

    await failing(agent, BATCH, session, streamed)
    assert writes(server) == [20]
    with pytest.raises(openai.InternalServerError):
        await run(agent, BATCH, session, streamed=streamed)
    assert not model.calls
    assert writes(server) == [20, 20]
    assert len(server.stored(session.session_id)) == 20

    await run(agent, BATCH, session, streamed=streamed)
    assert labels(server.stored(session.session_id)) == [*labels(BATCH), "assistant:done"]
    assert len(model.calls) == 1
    assert labels(list(model.calls[0].input)) == labels(BATCH)


@PATHS
@pytest.mark.parametrize("request_number", [1, 2, 3])
@pytest.mark.parametrize("fault", ["reject", "commit_then_drop"])
async def test_a_write_stopped_at_any_request_ends_with_every_item_once_in_order(
    server: ConversationsServer,
    client: AsyncOpenAI,
    tmp_path: Path,
    streamed: bool,
    request_number: int,
    fault: str,
) -> None:
    """Request k of the 45-item write (20, 20, 5) is refused, or stored with its answer lost:
    the requests before it are whole in the conversation, and the next run completes the
    batch from where it stopped (or finds it whole), never sending an item twice."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("done")
    server.arm(kind="create_items", fault=fault, nth=request_number)  # type: ignore[arg-type]

    await failing(agent, BATCH, session, streamed)
    assert not model.calls
    landed = min(45, 20 * (request_number - (fault == "reject")))
    assert len(server.stored(session.session_id)) == landed

    await run(agent, BATCH, session, streamed=streamed)
    assert labels(server.stored(session.session_id)) == [*labels(BATCH), "assistant:done"]
    assert labels(list(model.calls[0].input)) == labels(BATCH)
    (decision,) = await session.decisions()
    expected = {0: Outcome.UNCHANGED, 45: Outcome.COMMITTED}.get(landed, Outcome.PARTIAL)
    assert decision.outcome is expected
    if expected is Outcome.PARTIAL:
        assert decision.evidence["landed"] == landed


@PATHS
async def test_another_writer_between_requests_denies_before_any_model_call(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """After the first request landed with its answer lost, someone else adds an item to the
    conversation: the rest of the batch would land after it. Nobody can vouch for that
    history, so the next run is denied before the model is called and nothing is written."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("done")
    server.arm(kind="create_items", fault="commit_then_drop")
    await failing(agent, BATCH, session, streamed)

    other = OpenAIConversationsSession(conversation_id=session.session_id, openai_client=client)
    await other.add_items([{"role": "user", "content": "from another writer"}])
    before = server.stored(session.session_id)

    with pytest.raises(ContinuationDenied) as denied:
        await run(agent, BATCH, session, streamed=streamed)
    assert denied.value.decision.reason is Reason.HISTORY_CHANGED
    assert not model.calls
    assert server.stored(session.session_id) == before


async def test_a_short_write_whose_answer_is_lost_is_stored_once_where_the_sdk_stores_it_twice(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """A 5-item write whose answer is lost: the SDK's own session lets the client retry it
    (stored twice, and the call returns normally). Wrapped, the client's retries are off for
    writes: the call fails, and the next use finds the write committed."""
    bare = OpenAIConversationsSession(openai_client=client)
    await bare.get_items()
    server.arm(kind="create_items", fault="commit_then_drop")
    await bare.add_items(history(5))
    assert len(server.stored(bare.session_id)) == 10

    session = wrap(client, tmp_path)
    await session.get_items()
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await session.add_items(history(5))
    (decision,) = await session.reconcile()
    assert decision.outcome is Outcome.COMMITTED
    assert labels(await session.get_items()) == labels(history(5))


async def test_a_caller_cancelled_mid_request_sends_no_further_request(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """Cancellation reaches a write between requests: the request under way ends as the
    server ends it (here: stored), no request follows it, and the next use completes the
    batch from there."""
    session = wrap(client, tmp_path)
    await session.get_items()
    server.arm(kind="create_items", fault="delay", seconds=0.5)
    writing = asyncio.ensure_future(session.add_items(list(BATCH)))
    for _ in range(500):
        if server.count("create_items") >= 1:
            break
        await asyncio.sleep(0.01)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    await asyncio.sleep(1.0)
    assert writes(server) == [20]
    assert len(server.stored(session.session_id)) == 20

    (decision,) = await session.reconcile()
    assert decision.outcome is Outcome.PARTIAL
    assert labels(await session.get_items()) == labels(BATCH)
    assert writes(server) == [20, 20, 5]


async def test_clear_session_deletes_the_conversation_and_the_next_use_makes_another(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """As the SDK's session does: clearing deletes the conversation, and the next use creates
    a new one, whose writes the wrapper keys by the new id."""
    session = wrap(client, tmp_path)
    await session.add_items(history(3))
    first = session.session_id
    await session.clear_session()
    with pytest.raises(ValueError, match="not yet available"):
        _ = session.session_id
    assert first not in server.conversation_ids()

    await session.add_items(history(2))
    assert session.session_id != first
    assert labels(server.stored(session.session_id)) == labels(history(2))
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await session.add_items([{"role": "user", "content": "late"}])
    (pending,) = await session.pending()
    assert pending.session_id == session.session_id


async def test_pop_item_removes_the_newest_item_after_settling(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """A pop settles what is pending first (the write is found, not sent again), then removes
    the newest item by its server id."""
    session = wrap(client, tmp_path)
    await session.add_items(history(2))
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await session.add_items([{"role": "user", "content": "third"}])
    popped = await session.pop_item()
    assert popped is not None and label(popped) == "user:third"
    assert labels(server.stored(session.session_id)) == labels(history(2))
    assert [d.outcome for d in await session.decisions()] == [Outcome.COMMITTED]


@pytest.mark.parametrize("fault", ["reject", "commit_then_drop"])
async def test_a_resumed_approval_whose_save_fails_stores_the_output_once_and_runs_the_tool_once(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, fault: str
) -> None:
    """A run stops for a tool's approval; resumed from ``RunState.to_string()``, the tool runs
    and its save fails. Retried, the wrapper settles its write first (the output stored once:
    found, or sent once). The SDK's own record of the failed save then refuses to
    go on from that state, as it does unwrapped: it compares the items as sent with the items
    as the service gives them back, which differ. The tool never runs again, and a fresh run goes on
    from the history."""
    charges: list[int] = []

    @function_tool(needs_approval=True)
    def charge_card(amount: int) -> str:
        """Charge the customer's card (needs a person's approval)."""
        charges.append(amount)
        return f"charged {amount}"

    model = ScriptedModel(
        [
            [function_call("charge_card", {"amount": 5}, call_id="c1")],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="assistant", model=model, tools=[charge_card])
    session = wrap(client, tmp_path)
    first = await run(agent, "hi", session, streamed=False, context={})
    state = first.to_state()
    state.approve(first.interruptions[0])
    resumed = await RunState.from_string(agent, state.to_string())

    server.arm(kind="create_items", fault=fault)  # type: ignore[arg-type]
    with pytest.raises(openai.APIError):
        await run(agent, resumed, session, streamed=False)
    assert charges == [5]

    with pytest.raises(UserError, match="Cannot reconcile the pending Session write"):
        await run(agent, resumed, session, streamed=True)
    assert labels(server.stored(session.session_id)) == ["user:hi", "call:c1", "output:c1"]
    assert charges == [5]
    assert len(model.calls) == 1

    await run(agent, "go on", session, streamed=False)
    assert labels(list(model.calls[-1].input)) == ["user:hi", "call:c1", "output:c1", "user:go on"]
    assert charges == [5]


@PATHS
async def test_a_run_with_the_gates_hooks_on_a_conversation_made_on_first_use_ends_once(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """With ``hooks=session.hooks()`` on a conversation created by the run itself, the run
    ends normally; when its final output's save loses its answer, the state it leaves is
    refused when resumed (``RunFinished``), the answer stored once."""
    from agents_reconcile import RunFinished

    session = wrap(client, tmp_path)
    agent, _ = answering("first")
    await run(agent, "hi", session, streamed=streamed, hooks=session.hooks())
    assert labels(server.stored(session.session_id)) == ["user:hi", "assistant:first"]

    agent, _ = answering("done")
    server.arm(kind="create_items", fault="commit_then_drop", nth=2)
    with pytest.raises(openai.APIError) as raised:
        await run(agent, "again", session, streamed=True, context={}, hooks=session.hooks())
    state_text = raised.value.streamed_result.to_state().to_string()  # type: ignore[attr-defined]
    agent, model = answering("a second answer")
    state = await RunState.from_string(agent, state_text)
    state._terminal_unrecoverable = False  # as an SDK without its own check resumes it
    with pytest.raises(RunFinished):
        await run(agent, state, session, streamed=streamed, hooks=session.hooks())
    assert model.calls == ()
    stored = labels(server.stored(session.session_id))
    assert stored == ["user:hi", "assistant:first", "user:again", "assistant:done"]
