"""Opening the store an intent was written to, from the kind of store its record names and an
address the operator gives: the SDK's SQLite, Redis and SQLAlchemy sessions, and this
package's revisioned stores. Stores that need more than an address (an encrypting wrapper's
key, a custom session) are resolved from code with ``ReconcilingSession.resolve``."""

from __future__ import annotations

from typing import Any

from ..backends.redaction import redacted
from ..backends.registry import BACKENDS, backend_for
from ..backends.sqlite import path_of
from ..errors import ConfigurationError

__all__ = ["store_for"]


def store_for(kind: str, address: str, session_id: str, *, namespace: str | None = None) -> Any:
    """The store of ``kind`` (a recorded backend kind: module and class) for ``session_id``
    at ``address``; nothing is created there (tables, schemas) that is not there already."""
    name = kind.rsplit(".", 1)[-1]
    for backend in BACKENDS:
        if backend.store is not None and backend.store.replace(":", ".") == kind:
            if backend_for(address, what="store") is not backend:
                raise ConfigurationError(
                    f"the intent was written to a {backend.name} store; "
                    f"{redacted(address)} is not one"
                )
            return backend.open_store(session_id, address, namespace=namespace, migrate=False)
    if name == "SQLiteSession" and kind.startswith("agents."):
        from agents import SQLiteSession

        return SQLiteSession(session_id, _existing(address))
    if name == "AsyncSQLiteSession":
        from agents.extensions.memory import AsyncSQLiteSession

        return AsyncSQLiteSession(session_id, _existing(address))
    if name == "AdvancedSQLiteSession":
        from agents.extensions.memory import AdvancedSQLiteSession

        return AdvancedSQLiteSession(
            session_id=session_id, db_path=_existing(address), create_tables=False
        )
    if name == "RedisSession" and kind.startswith("agents."):
        from agents.extensions.memory import RedisSession

        if namespace is not None:
            return RedisSession.from_url(session_id, url=address, key_prefix=namespace)
        return RedisSession.from_url(session_id, url=address)
    if name == "SQLAlchemySession":
        from agents.extensions.memory import SQLAlchemySession

        return SQLAlchemySession.from_url(session_id, url=address, create_tables=False)
    raise ConfigurationError(
        f"a store of kind {kind} cannot be opened from an address here; resolve its intents "
        "from code (ReconcilingSession.resolve) with the session the application builds"
    )


def _existing(address: str) -> str:
    path = path_of(address)
    if not path.exists():
        raise ConfigurationError(f"no database file at {path}")
    return str(path)
