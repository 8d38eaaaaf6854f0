"""The SDK's file-backed sessions the self-test runs over, each opened on files in a directory.

Some need the SDK's optional extras (``aiosqlite``, ``sqlalchemy``, ``cryptography``); a store
whose driver is missing reports itself unavailable instead of failing the whole run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._backends.registry import BACKENDS, Backend, backend_named

__all__ = [
    "CONVERSATIONS_ENV",
    "POSTGRES_ENV",
    "REDIS_ENV",
    "STORES",
    "Store",
    "close_store",
    "store_named",
]

ENCRYPTION_KEY: Final = "agents-reconcile-selftest-key-0123456789"


@dataclass(frozen=True)
class Store:
    """How to open one kind of SDK session on files in a directory."""

    name: str
    opener: Callable[[str, Path], Awaitable[Any]]
    needs: tuple[str, ...] = ()
    """Modules the store's driver needs; the store is skipped when one is missing."""
    revisioned: bool = False
    """Judged by its record of writes (``agents_reconcile._core.revision``), not by fingerprints."""
    server: str | None = None
    """The environment variable holding the server's URL, for stores on a server."""

    def available(self) -> bool:
        if self.server is not None and not os.environ.get(self.server):
            return False
        return all(importlib.util.find_spec(module) is not None for module in self.needs)

    async def open(self, session_id: str, directory: Path) -> Any:
        return await self.opener(session_id, directory)


async def close_store(session: Any, *, drop: bool = False) -> None:
    """Release what a session holds (connections, engines, worker threads); with ``drop``,
    also delete a server store's data (the scenario is over)."""
    if drop and callable(getattr(session, "drop", None)):
        await session.drop()
    store = getattr(session, "underlying_session", session)
    closer = getattr(store, "close", None)
    if callable(closer):
        result = closer()
        if hasattr(result, "__await__"):
            await result
    engine = getattr(store, "_engine", None)
    if engine is not None:
        await engine.dispose()
    client = getattr(store, "_openai_client", None)
    if client is not None:
        # A Conversations session: its client's connections, closed on this loop.
        await client.close()


async def _sqlite(session_id: str, directory: Path) -> Any:
    from agents import SQLiteSession

    return SQLiteSession(session_id, directory / "chat.db")


async def _async_sqlite(session_id: str, directory: Path) -> Any:
    from agents.extensions.memory import AsyncSQLiteSession

    return AsyncSQLiteSession(session_id, directory / "chat-async.db")


async def _advanced_sqlite(session_id: str, directory: Path) -> Any:
    from agents.extensions.memory import AdvancedSQLiteSession

    return AdvancedSQLiteSession(
        session_id=session_id, db_path=directory / "chat-advanced.db", create_tables=True
    )


async def _encrypted_sqlite(session_id: str, directory: Path) -> Any:
    from agents import SQLiteSession
    from agents.extensions.memory import EncryptedSession

    return EncryptedSession(
        session_id=session_id,
        underlying_session=SQLiteSession(session_id, directory / "chat-encrypted.db"),
        encryption_key=ENCRYPTION_KEY,
        ttl=3600,
    )


async def _sqlalchemy_sqlite(session_id: str, directory: Path) -> Any:
    from agents.extensions.memory import SQLAlchemySession

    return SQLAlchemySession.from_url(
        session_id,
        url=f"sqlite+aiosqlite:///{directory / 'chat-sqlalchemy.db'}",
        create_tables=True,
    )


def _namespace(directory: Path) -> str:
    # One namespace per scenario directory, so scenarios never see each other's data.
    return "st" + hashlib.blake2b(str(directory).encode(), digest_size=8).hexdigest()


def _revisioned(backend: Backend) -> Store:
    """The revisioned store of a registered backend, on a file in the scenario's directory
    or in a namespace of its own on the server ``backend.environment("SELFTEST")`` names."""
    server = backend.environment("SELFTEST") if backend.server else None

    async def opener(session_id: str, directory: Path) -> Any:
        if server is None:
            address = backend.address_in(directory, "chat-revisioned")
        else:
            address = os.environ[server]
        return backend.open_store(session_id, address, namespace=_namespace(directory))

    return Store(
        f"revisioned_{backend.name}", opener, backend.drivers, revisioned=True, server=server
    )


CONVERSATIONS_ENV: Final = "AGENTS_RECONCILE_SELFTEST_CONVERSATIONS_URL"
"""The base URL of a Conversations API the ``conversations`` store runs on (``.../v1``): a
server a test starts, never a paid service by accident (it is only ever read from here)."""
_CONVERSATION_FILE: Final = "conversation-id"


async def _conversations(session_id: str, directory: Path) -> Any:
    """An ``OpenAIConversationsSession`` on the conversation of the scenario's directory
    (created by its first process, found by the next), its client's item writes injectable
    with faults (``FaultInjectingConversationsClient``)."""
    from agents.memory import OpenAIConversationsSession
    from openai import AsyncOpenAI

    from ..testing import FaultInjectingConversationsClient

    client = AsyncOpenAI(
        base_url=os.environ[CONVERSATIONS_ENV], api_key="selftest", timeout=30.0, max_retries=2
    )
    known = directory / _CONVERSATION_FILE
    if known.exists():
        conversation = known.read_text().strip()
    else:
        conversation = (await client.conversations.create(items=[])).id
        temporary = known.with_suffix(".tmp")
        temporary.write_text(conversation)
        os.replace(temporary, known)
    faulty: Any = FaultInjectingConversationsClient(client)
    return OpenAIConversationsSession(conversation_id=conversation, openai_client=faulty)


REDIS_ENV: Final = backend_named("redis").environment("SELFTEST")
POSTGRES_ENV: Final = backend_named("postgres").environment("SELFTEST")

STORES: Final = (
    Store("sqlite", _sqlite),
    Store("async_sqlite", _async_sqlite, ("aiosqlite",)),
    Store("advanced_sqlite", _advanced_sqlite),
    Store("encrypted_sqlite", _encrypted_sqlite, ("cryptography",)),
    Store("sqlalchemy_sqlite", _sqlalchemy_sqlite, ("sqlalchemy", "aiosqlite")),
    Store("conversations", _conversations, server=CONVERSATIONS_ENV),
    # Every registered revisioned store whose data outlives a killed process.
    *(_revisioned(backend) for backend in BACKENDS if backend.store and backend.durable),
)


def store_named(name: str) -> Store:
    for store in STORES:
        if store.name == name:
            return store
    known = ", ".join(store.name for store in STORES)
    raise ValueError(f"unknown store {name!r}; known: {known}")
