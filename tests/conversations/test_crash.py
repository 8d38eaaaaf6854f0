"""The crash matrix of a Conversations write: the writing process is killed (SIGKILL) while
each request of a 45-item write is under way, and the server stores that request or refuses
it. Another process then finds the intent of the dead writer, reads the conversation back,
and completes the batch from the last whole request: every item once, in order."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI

from agents_reconcile import Outcome

from ..support.conversations_server import ConversationsServer
from .support import history, labels, wrap, writes

REPO = Path(__file__).resolve().parents[2]


def start_worker(
    server: ConversationsServer, conversation: str, journal: Path
) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.conversations_worker",
            server.base_url,
            conversation,
            str(journal),
            "45",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "started"
    return worker


# What is on the server when the writer dies: 0, 20, 40 or all 45 items. Killed during the
# second request, it holds 20 (refused) or 40 (stored), as during the first (stored) or the
# third (refused): those two cells are exhaustive.
@pytest.mark.parametrize("request_number", [1, pytest.param(2, marks=pytest.mark.exhaustive), 3])
@pytest.mark.parametrize("stored", [True, False], ids=["request_stored", "request_refused"])
async def test_a_writer_killed_during_any_request_leaves_a_batch_completed_once(
    server: ConversationsServer,
    client: AsyncOpenAI,
    tmp_path: Path,
    request_number: int,
    stored: bool,
) -> None:
    bare = OpenAIConversationsSession(openai_client=client)
    await bare.get_items()
    conversation = bare.session_id
    journal = tmp_path / "journal.db"
    server.arm(kind="create_items", fault="delay", nth=request_number, seconds=0.6)
    if not stored:
        server.arm(kind="create_items", fault="reject", nth=request_number)
    worker = start_worker(server, conversation, journal)
    for _ in range(2000):
        if len(writes(server)) >= request_number:
            break
        await asyncio.sleep(0.01)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    assert worker.returncode == -signal.SIGKILL
    await asyncio.sleep(0.8)  # the server ends the request it was in
    landed = 20 * (request_number - (not stored))
    assert len(server.stored(conversation)) == min(landed, 45)
    assert writes(server) == [20, 20, 5][:request_number]

    session = wrap(client, tmp_path, conversation_id=conversation)
    (decision,) = await session.reconcile()
    expected = {0: Outcome.UNCHANGED, 45: Outcome.COMMITTED}.get(min(landed, 45), Outcome.PARTIAL)
    assert decision.outcome is expected
    assert labels(server.stored(conversation)) == labels(history(45))
