"""What the service returns only when asked (``include=``) or writes out as ``null`` never makes
a correct history look changed: on the real runner against the local Conversations server,
batches holding an input image, an output text's log probabilities, a reasoning item's
encrypted content and optional fields the service gives back ``null`` are completed wherever
their write stopped, a write that never landed after such items is sent again, and a real
foreign write is still denied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from agents.agent import Agent
from agents.memory import OpenAIConversationsSession
from agents.testing import ScriptedModel
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_text import Logprob
from openai.types.responses.response_reasoning_item import Summary

from agents_reconcile import ContinuationDenied, Outcome, Reason

from ..support.conversations_server import ConversationsServer
from ..support.runner_support import run
from .support import labels, wrap

PATHS = pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="  # noqa: E501
LOGPROBS = [{"token": "ok", "bytes": [111, 107], "logprob": -0.25, "top_logprobs": []}]


def rich(n: int) -> dict[str, Any]:
    """The ``n``-th input item of a history holding what the service withholds or writes as
    ``null``: an image by URL, log probabilities, encrypted reasoning, a file by id (its URL
    and name come back ``null``), and plain messages between them."""
    match n % 9:
        case 2:
            return {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": f"message {n}"},
                    {"type": "input_image", "image_url": IMAGE, "detail": "low"},
                ],
            }
        case 4:
            return {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": f"message {n}",
                        "annotations": [],
                        "logprobs": LOGPROBS,
                    }
                ],
            }
        case 6:
            return {
                "type": "reasoning",
                "id": f"rs_{n}",
                "summary": [{"type": "summary_text", "text": f"message {n}"}],
                "encrypted_content": f"gAAAAA-sealed-thought-{n}",
            }
        case 8:
            return {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": f"message {n}"},
                    {"type": "input_file", "file_id": f"file-{n}"},
                ],
            }
        case _:
            return {"role": "user", "content": f"message {n}"}


BATCH = [rich(n) for n in range(45)]


def answering(*texts: str) -> tuple[Agent[Any], ScriptedModel]:
    """An agent whose model answers each call with encrypted reasoning, then the next of
    ``texts`` with its log probabilities."""
    steps = [
        [
            ResponseReasoningItem(
                id=f"rs_model_{n}",
                type="reasoning",
                summary=[Summary(type="summary_text", text=f"thinking {n}")],
                encrypted_content=f"gAAAAA-model-thought-{n}",
            ),
            ResponseOutputMessage(
                id=f"msg_model_{n}",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        type="output_text",
                        text=text,
                        annotations=[],
                        logprobs=[Logprob.model_validate(one) for one in LOGPROBS],
                    )
                ],
            ),
        ]
        for n, text in enumerate(texts)
    ]
    model = ScriptedModel(steps)
    return Agent(name="assistant", model=model), model


async def test_reads_give_the_withheld_fields_back_empty_and_the_optional_ones_null(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path
) -> None:
    """The local server behaves as the service: the items are stored whole, and a read without
    ``include`` has the image URL and the encrypted content ``null`` and the log probabilities
    empty, with the optional fields nobody set ``null``."""
    bare = OpenAIConversationsSession(openai_client=client)
    await bare.add_items(BATCH[:9])
    stored = server.stored(bare.session_id)
    assert stored[2]["content"][1]["image_url"] == IMAGE
    assert stored[4]["content"][0]["logprobs"] == LOGPROBS
    assert stored[6]["encrypted_content"] == "gAAAAA-sealed-thought-6"

    read: list[Any] = await bare.get_items()
    assert read[2]["content"][1] == {
        "type": "input_image",
        "detail": "low",
        "image_url": None,
        "file_id": None,
    }
    assert read[4]["content"][0]["logprobs"] == []
    assert (read[6]["encrypted_content"], read[6]["content"]) == (None, None)
    assert read[8]["content"][1] == {
        "type": "input_file",
        "file_id": "file-8",
        "file_url": None,
        "filename": None,
    }


@PATHS
@pytest.mark.parametrize("request_number", [1, 2, 3])
@pytest.mark.parametrize("fault", ["reject", "commit_then_drop"])
async def test_a_batch_with_withheld_fields_stopped_at_any_request_is_completed_not_denied(
    server: ConversationsServer,
    client: AsyncOpenAI,
    tmp_path: Path,
    streamed: bool,
    request_number: int,
    fault: str,
) -> None:
    """Request k of the 45-item write is refused (a 500) or stored with its answer lost: the
    next run finds what landed and completes the batch once, in order, then calls the model,
    whose answer (encrypted reasoning, log probabilities) is stored; the run after that goes
    on from it."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("done", "again")
    server.arm(kind="create_items", fault=fault, nth=request_number)  # type: ignore[arg-type]

    with pytest.raises(openai.APIError):
        await run(agent, BATCH, session, streamed=streamed)
    assert not model.calls
    landed = min(45, 20 * (request_number - (fault == "reject")))
    assert len(server.stored(session.session_id)) == landed

    await run(agent, BATCH, session, streamed=streamed)
    stored = server.stored(session.session_id)
    assert labels(stored) == [*labels(BATCH), "reasoning:thinking 0", "assistant:done"]
    (decision,) = await session.decisions()
    expected = {0: Outcome.UNCHANGED, 45: Outcome.COMMITTED}.get(landed, Outcome.PARTIAL)
    assert decision.outcome is expected

    await run(agent, "go on", session, streamed=streamed)
    assert labels(server.stored(session.session_id))[-3:] == [
        "user:go on",
        "reasoning:thinking 1",
        "assistant:again",
    ]
    assert await session.pending() == []


@PATHS
async def test_another_writer_between_requests_is_still_denied(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """After the first request of the batch landed with its answer lost, someone else adds an
    item: the next run is denied (``history_changed``) before the model is called, and nothing
    is written."""
    session = wrap(client, tmp_path)
    await session.get_items()
    agent, model = answering("done")
    server.arm(kind="create_items", fault="commit_then_drop")
    with pytest.raises(openai.APIConnectionError):
        await run(agent, BATCH, session, streamed=streamed)

    other = OpenAIConversationsSession(conversation_id=session.session_id, openai_client=client)
    await other.add_items([rich(2)])
    before = server.stored(session.session_id)

    with pytest.raises(ContinuationDenied) as denied:
        await run(agent, BATCH, session, streamed=streamed)
    assert denied.value.decision.reason is Reason.HISTORY_CHANGED
    assert not model.calls
    assert server.stored(session.session_id) == before


@PATHS
async def test_a_write_that_never_landed_after_withheld_fields_is_sent_again(
    server: ConversationsServer, client: AsyncOpenAI, tmp_path: Path, streamed: bool
) -> None:
    """A run stores an input with every kind of withheld field, then the save of the model's
    answer is refused (nothing stored). The next run finds the history as the input left it,
    sends the answer once, and goes on."""
    session = wrap(client, tmp_path)
    agent, model = answering("first", "second")
    server.arm(kind="create_items", fault="reject", nth=2)

    with pytest.raises(openai.InternalServerError):
        await run(agent, BATCH[:9], session, streamed=streamed)
    assert len(model.calls) == 1
    assert labels(server.stored(session.session_id)) == labels(BATCH[:9])

    await run(agent, "next", session, streamed=streamed)
    (decision,) = await session.decisions()
    assert (decision.outcome, decision.reason) == (Outcome.UNCHANGED, Reason.BATCH_ABSENT)
    assert labels(server.stored(session.session_id)) == [
        *labels(BATCH[:9]),
        "reasoning:thinking 0",
        "assistant:first",
        "user:next",
        "reasoning:thinking 1",
        "assistant:second",
    ]
    assert len(model.calls) == 2
