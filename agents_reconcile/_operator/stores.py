"""Opening stores for an operator's commands. ``store_for``: the store an intent was written to,
from the kind of store its record names and an address (the SDK's SQLite, Redis and SQLAlchemy
sessions, and this package's revisioned stores). ``read_history`` and ``open_by_address``: a
session's store from its address alone, for the damage check (a path or ``sqlite:///`` file is
the SDK's ``SQLiteSession`` or a revisioned store, as its tables say; ``redis://`` and
``postgresql://`` the revisioned stores; a SQLAlchemy URL naming its driver the SDK's
``SQLAlchemySession``). Reading never writes. Stores that need more than an address (an
encrypting wrapper's key, a custom session) are handled from code."""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
from pathlib import Path
from typing import Any, Final

from .._backends.addresses import KNOWN_SCHEMES, with_user
from .._backends.redaction import redacted
from .._backends.registry import Backend, backend_for, backends_storing, scheme_of
from .._backends.sqlite.backend import path_of
from .._backends.store_items import decode_item
from .._core.records import BackendIdentity
from ..errors import ConfigurationError, SchemaMismatch
from .diagnosis import cluster_node, store_explained

__all__ = [
    "close_store",
    "open_by_address",
    "read_history",
    "recorded_store",
    "store_for",
    "usable_store",
]

SDK_SQLITE: Final = "sdk_sqlite"
REVISIONED_SQLITE: Final = "revisioned_sqlite"


def store_for(kind: str, address: str, session_id: str, *, namespace: str | None = None) -> Any:
    """The store of ``kind`` (a recorded backend kind: what ``derive_identity`` records for
    the store's class) for ``session_id`` at ``address``; nothing is created there (tables,
    schemas) that is not there already."""
    name = kind.rsplit(".", 1)[-1]
    storing = backends_storing(kind)
    if storing:
        serving = backend_for(address, what="store")
        if serving not in storing:
            kinds = " or ".join(backend.name for backend in storing)
            raise ConfigurationError(
                f"the intent was written to a {kinds} store; {redacted(address)} is not one"
            )
        if not serving.durable:
            raise ConfigurationError(
                f"the intent was written to a store in memory ({kind}), which lives in its "
                "own process: resolve its intents from code (ReconcilingSession.resolve) in "
                "that process"
            )
        return serving.open_store(session_id, address, namespace=namespace, migrate=False)
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
        return open_by_address(address, session_id, "sqlalchemy", namespace)
    raise ConfigurationError(
        f"a store of kind {kind} cannot be opened from an address here; resolve its intents "
        "from code (ReconcilingSession.resolve) with the session the application builds"
    )


_DEFAULT_TABLES: Final = ("sessions_table=agent_sessions;messages_table=agent_messages", "")
_SDK_FILE_KINDS: Final = (
    "agents.memory.sqlite_session.SQLiteSession",
    "agents.extensions.memory.async_sqlite_session.AsyncSQLiteSession",
    "agents.extensions.memory.advanced_sqlite_session.AdvancedSQLiteSession",
)


def recorded_store(backend: BackendIdentity) -> tuple[str, str | None] | None:
    """The store address (and key prefix or schema) an intent's backend identity names, where
    it can hold one: an SQLite file that is there, or a revisioned Redis or PostgreSQL store
    (its address without credentials, with the user it connects as where the record names
    one). None where it cannot (a store in memory, a store recorded without its address);
    then the operator gives ``--store``."""
    kind, namespace = backend.kind, backend.namespace
    first, _, rest = namespace.partition(";")
    storing = {found.name for found in _storing(kind)}
    if kind in _SDK_FILE_KINDS or "sqlite" in storing:
        # Only the SDK's own tables: a session opened on other names would create them.
        path = Path(first)
        if rest not in _DEFAULT_TABLES or not path.is_absolute() or not _holds_history(path):
            return None
        return str(path), None
    if storing & {"redis", "redis-cluster"}:
        where, _, prefix = namespace.partition(" prefix=")
        if _served_by(where) not in storing:
            return None
        return with_user(where, backend.user), prefix or None
    if "postgres" in storing:
        _, _, schema = namespace.partition(";schema=")
        if _served_by(first) != "postgres":
            return None
        return with_user(first, backend.user), schema or None
    return None


def _storing(kind: str) -> tuple[Backend, ...]:
    """The backends whose store records ``kind``; none when its driver is not installed here
    (then the record cannot name an address this process opens)."""
    try:
        return backends_storing(kind)
    except ConfigurationError:
        return ()


def _served_by(address: str) -> str | None:
    """The name of the backend serving ``address``'s scheme (None for an unknown one)."""
    try:
        return backend_for(address, what="store").name
    except ConfigurationError:
        return None


def _holds_history(path: Path) -> bool:
    """Whether ``path`` is a file holding the SDK's session tables (or a revisioned store's),
    read without a lock or a file beside it: a session opened on a file without them would
    create them."""
    try:
        if not path.is_file():
            return False
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    except (OSError, sqlite3.Error):
        return False
    try:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return {"agent_sessions", "agent_messages"} <= names or "revisioned_items" in names


def _existing(address: str) -> str:
    path = path_of(address)
    if not path.exists():
        raise ConfigurationError(f"no database file at {path}")
    return str(path)


async def read_history(
    store: str, session_id: str, namespace: str | None
) -> tuple[str, list[Any], int]:
    """The session's layout, its items, and how many of its rows do not decode (read-only)."""
    if scheme_of(store) == "sqlite":
        return await asyncio.to_thread(_read_sqlite, path_of(store), session_id)
    layout = _layout(store)
    session = open_by_address(store, session_id, layout, namespace)
    try:
        await usable_store(session, store)
        return layout, list(await session.get_items()), 0
    finally:
        await close_store(session)


async def usable_store(session: Any, address: str) -> None:
    """Refuse, saying why and what to give instead, a revisioned store an operator's command
    cannot read at ``address``: one node of a Redis Cluster given as a plain ``redis://``
    address (``ConfigurationError`` naming the ``redis+cluster://`` address), or a place
    holding no store of this release (``SchemaMismatch`` naming the namespaces that hold one,
    for a forgotten or misspelled ``--store-namespace``; ``diagnosis.store_explained``).
    Other sessions (the SDK's, which keep no schema version) are left to their first read."""
    if not callable(getattr(session, "check", None)) or not callable(
        getattr(session, "schema_version", None)
    ):
        return
    try:
        problem = await session.check()
    except Exception as exc:
        # One node of a cluster redirects the read of the version to another.
        await _refuse_a_node(address, exc)
        raise
    if problem is None:
        return
    await _refuse_a_node(address)
    said = await store_explained(session, address, problem)
    raise SchemaMismatch(problem if said == problem else f"{redacted(address)}: {said}")


async def _refuse_a_node(address: str, cause: BaseException | None = None) -> None:
    """``ConfigurationError`` when ``address`` is a plain address of one node of a Redis
    Cluster (asked only once a read there failed or found nothing)."""
    node = await cluster_node(address, "revisioned store", "--store-namespace")
    if node is not None:
        raise ConfigurationError(f"{redacted(address)}: {node}") from cause


def _layout(store: str) -> str:
    scheme = scheme_of(store)
    if "+" in scheme and scheme not in KNOWN_SCHEMES:  # a SQLAlchemy URL: dialect+driver
        return "sqlalchemy"
    backend = backend_for(store, what="store")
    if not backend.durable or backend.store is None:
        raise ConfigurationError(f"{scheme}: no stored sessions to check at such an address")
    return f"revisioned_{backend.name}" if backend.name != "sqlite" else REVISIONED_SQLITE


def _read_sqlite(path: Path, session_id: str) -> tuple[str, list[Any], int]:
    if not path.is_file():
        raise ConfigurationError(f"no session store file at {path}")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "message_structure" in tables:
            # AdvancedSQLiteSession: its history is a branch of these rows, not all of them.
            raise ConfigurationError(f"{path} is an AdvancedSQLiteSession file, not checked here")
        found: list[tuple[str, list[Any], int]] = []
        if "revisioned_items" in tables:
            rows = conn.execute(
                "SELECT item FROM revisioned_items WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            found.append((REVISIONED_SQLITE, [decode_item(row[0]) for row in rows], 0))
        if "agent_messages" in tables:
            rows = conn.execute(
                "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
            items: list[Any] = []
            for (data,) in rows:
                # As SQLiteSession.get_items reads them: a row that does not decode is skipped.
                try:
                    items.append(json.loads(data))
                except (json.JSONDecodeError, TypeError):
                    continue
            found.append((SDK_SQLITE, items, len(rows) - len(items)))
    finally:
        conn.close()
    if not found:
        raise ConfigurationError(f"{path} holds no SDK or revisioned session tables")
    holding = [entry for entry in found if entry[1] or entry[2]]
    if len(holding) > 1:
        raise ConfigurationError(f"{path} holds session {session_id!r} in two layouts")
    return (holding or found)[0]


def open_by_address(store: str, session_id: str, layout: str, namespace: str | None) -> Any:
    """A session object on the store, for reading a server store or for writing the repair."""
    if layout == SDK_SQLITE:
        from agents import SQLiteSession

        return SQLiteSession(session_id, path_of(store))
    if layout == REVISIONED_SQLITE:
        from .._backends.sqlite.store import RevisionedSQLiteSession

        return RevisionedSQLiteSession(session_id, path_of(store), migrate=False)
    if layout == "sqlalchemy":
        from agents.extensions.memory import SQLAlchemySession
        from sqlalchemy.engine import make_url

        url = make_url(store)
        # Connecting to a missing SQLite file would create it.
        if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_file():
            raise ConfigurationError(f"no session store file at {url.database!r}")
        return SQLAlchemySession.from_url(session_id, url=store)
    backend = backend_for(store, what="store")
    return backend.open_store(session_id, store, namespace=namespace, migrate=False)


async def close_store(session: Any) -> None:
    closer = getattr(session, "close", None)
    if callable(closer):
        result = closer()
        if inspect.isawaitable(result):
            await result
    engine = getattr(type(session), "engine", None)
    if isinstance(engine, property):
        await session.engine.dispose()
