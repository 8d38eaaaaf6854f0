"""The SDK sessions the suites run over, each opened on real files under a test directory."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ENCRYPTION_KEY = "agents-reconcile-test-key-0123456789abcdef"


@dataclass(frozen=True)
class Backend:
    """How to open (and close) one kind of session on files in ``directory``."""

    name: str
    opener: Callable[[str, Path], Awaitable[Any]]

    async def open(self, session_id: str, directory: Path) -> Any:
        return await self.opener(session_id, directory)


async def close(session: Any) -> None:
    """Release what a session holds (connections, engines, worker threads)."""
    store = getattr(session, "underlying_session", session)
    closer = getattr(store, "close", None)
    if callable(closer):
        result = closer()
        if hasattr(result, "__await__"):
            await result
    engine = getattr(store, "_engine", None)
    if engine is not None:
        await engine.dispose()


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


BACKENDS = [
    Backend("sqlite", _sqlite),
    Backend("async_sqlite", _async_sqlite),
    Backend("advanced_sqlite", _advanced_sqlite),
    Backend("encrypted_sqlite", _encrypted_sqlite),
    Backend("sqlalchemy_sqlite", _sqlalchemy_sqlite),
]

BACKEND_PARAMS = [pytest.param(backend, id=backend.name) for backend in BACKENDS]
