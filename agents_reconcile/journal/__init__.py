"""Intent journals: the durable record of pending writes and of the decisions that settled them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from ..errors import ConfigurationError
from .base import IntentJournal, IntentState, JournalEntry, Opened
from .memory import InvariantViolation, MemoryJournal
from .sqlite import SQLiteJournal

__all__ = [
    "DEFAULT_JOURNAL_PATH",
    "IntentJournal",
    "IntentState",
    "InvariantViolation",
    "JournalEntry",
    "MemoryJournal",
    "Opened",
    "SQLiteJournal",
    "journal_path",
    "open_journal",
]

DEFAULT_JOURNAL_PATH: Final = "agents-reconcile.db"
"""The embedded journal's file name, in the working directory, when none is configured."""

_shared: dict[Path, SQLiteJournal] = {}


def open_journal(spec: IntentJournal | str | os.PathLike[str] | None) -> IntentJournal:
    """Resolve a journal address: an ``IntentJournal``, a path, or a URL.

    Paths and ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` URLs open the
    embedded journal; one ``SQLiteJournal`` is shared per file within a process.
    """
    path = journal_path(spec)
    if path is not None:
        return _sqlite(path)
    if not isinstance(spec, str):
        if isinstance(spec, IntentJournal):
            return spec
        raise ConfigurationError(f"journal must be an IntentJournal, a path or a URL, not {spec!r}")
    scheme = urlsplit(spec).scheme.lower()
    if scheme == "memory":
        return MemoryJournal()
    if scheme in ("redis", "rediss", "unix"):
        from .redis import RedisJournal

        return RedisJournal.from_url(spec)
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresJournal

        return PostgresJournal.from_url(spec)
    # The URL itself may hold credentials: name only its scheme.
    raise ConfigurationError(f"unknown journal URL scheme {scheme!r}")


def journal_path(spec: object) -> Path | None:
    """The SQLite file a journal address names, or None for other kinds of journal."""
    if spec is None:
        return Path(DEFAULT_JOURNAL_PATH)
    if isinstance(spec, os.PathLike):
        return Path(spec)
    if not isinstance(spec, str):
        return None
    if "://" not in spec:
        return Path(spec)
    if urlsplit(spec).scheme.lower() != "sqlite":
        return None
    path = spec.split("://", 1)[1]
    if not path.startswith("/") or path == "/":
        raise ConfigurationError("an sqlite journal URL needs a path: sqlite:///relative.db")
    return Path(path[1:])


def _sqlite(path: Path) -> SQLiteJournal:
    key = path.expanduser().resolve()
    journal = _shared.get(key)
    if journal is None:
        journal = _shared[key] = SQLiteJournal(key)
    return journal
