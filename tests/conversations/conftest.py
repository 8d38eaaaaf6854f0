"""Fixtures of the Conversations tests: a local Conversations server per test, and a client
of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from openai import AsyncOpenAI

from ..support.conversations_server import ConversationsServer
from .support import connect


@pytest.fixture
def server() -> Iterator[ConversationsServer]:
    with ConversationsServer() as running:
        yield running


@pytest.fixture
async def client(server: ConversationsServer) -> AsyncIterator[AsyncOpenAI]:
    connected = connect(server)
    yield connected
    await connected.close()
