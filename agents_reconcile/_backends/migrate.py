"""Schema management for journals and revisioned stores: ``agents-reconcile migrate``.

Every journal and store keeps a schema version (SQL tables, or a Redis version key). A target
is named by its address, and the backend registry says which backend serves it:

- a journal: an SQLite path or ``sqlite:///...`` URL, ``redis://...``, ``postgresql://...``;
- a revisioned store: the same forms (an SQLite path is the store's database file).

``migrate`` applies what is missing; ``check`` runs no DDL and writes nothing, and reports
what is missing or newer. Addresses are shown without credentials.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final, Protocol

from ..errors import ConfigurationError, JournalError
from .redaction import redacted
from .registry import backend_for
from .schema import Versioned

__all__ = ["Target", "open_target", "safe_address"]

_JOURNAL_TABLES: Final = frozenset(
    {
        "intents",
        "decisions",
        "session_writes",
        "write_floor",
        "effects",
        "set_aside",
        "journal_schema",
    }
)


class Migratable(Versioned, Protocol):
    """A journal or store opened for ``migrate``: its schema methods, and ``close``."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Target:
    kind: str
    """``journal`` or ``store``."""
    address: str
    namespace: str | None = None

    def __str__(self) -> str:
        where = f" ({self.namespace})" if self.namespace else ""
        return f"{self.kind} {safe_address(self.address)}{where}"


def safe_address(address: str) -> str:
    """``address`` without a password."""
    return redacted(address)


def open_target(target: Target) -> Migratable:
    """The journal or store object a target names (opened lazily; nothing touched yet)."""
    if target.kind not in ("journal", "store"):
        raise ConfigurationError(f"cannot migrate {target.kind} at {safe_address(target.address)}")
    backend = backend_for(target.address, what=target.kind)
    if target.kind == "journal":
        journal: Migratable = backend.open_journal(target.address, namespace=target.namespace)
        return journal
    store: Migratable = backend.open_store(
        "", target.address, namespace=target.namespace, migrate=False
    )
    return store


async def run(targets: list[Target], *, check: bool) -> list[tuple[Target, bool, str]]:
    """Migrate (or check) each target: (target, current afterwards, what was done or found)."""
    results = []
    for target in targets:
        handle = open_target(target)
        try:
            if check:
                problem = await handle.check()
                results.append((target, problem is None, problem or "current"))
            else:
                _refuse_other_tables(target)
                steps = await handle.migrate()
                results.append(
                    (target, True, "applied: " + ", ".join(steps) if steps else "already current")
                )
        finally:
            await handle.close()
    return results


def _refuse_other_tables(target: Target) -> None:
    """A journal is never migrated into a file that holds something else (the chat store, a
    revisioned store): its tables would be added to that database. Refused, naming them."""
    from .opening import journal_path

    path = journal_path(target.address) if target.kind == "journal" else None
    if path is None or not path.is_file():
        return
    from .sqlite.files import _reader

    try:
        # As a read-only command reads a journal: WAL included, nothing left beside it.
        conn = _reader(path)
        try:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"
            ).fetchall()
        finally:
            conn.close()
    except (sqlite3.Error, JournalError) as exc:
        raise ConfigurationError(
            f"{path} cannot be read to check what it holds ({exc}); nothing was migrated"
        ) from exc
    tables = {str(name) for (name,) in rows}
    # A revisioned store may share its file with the journal, by design (``journal_place``).
    others = sorted(t for t in tables - _JOURNAL_TABLES if not t.startswith("revisioned_"))
    if others and "intents" not in tables:
        what = (
            "a session store"
            if {"agent_sessions", "agent_messages"} & tables
            else "something other than a journal"
        )
        raise ConfigurationError(
            f"{path} holds the tables {', '.join(others)}: it looks like {what}; a journal "
            "migrated there would add its tables to that database. Give the journal a file "
            "of its own"
        )
