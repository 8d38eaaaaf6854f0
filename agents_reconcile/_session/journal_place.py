"""Where a journal may live: never in the SQLite file an application's chat store keeps its
history in (``refuse_journal_in_store``, called when a wrapper is made)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

from .._backends.addresses import sqlite_file
from .._backends.journal import IntentJournal
from .._backends.opening import DEFAULT_JOURNAL_PATH
from .._backends.registry import backend_for
from .._backends.sqlite.journal import SQLiteJournal
from .._core.identity import session_layers
from ..errors import ConfigurationError

__all__ = ["refuse_journal_in_store"]


def refuse_journal_in_store(
    journal: IntentJournal | str | os.PathLike[str] | None, store: object
) -> None:
    """Refuse a journal that would live in the SQLite file holding ``store``'s history.

    ``journal`` is a configuration's journal (None: the default file), ``store`` the session a
    wrapper is given: it and every session it wraps (an ``EncryptedSession``'s underlying one)
    are looked at. The SDK's SQLite stores (``SQLiteSession``, ``AdvancedSQLiteSession``,
    ``AsyncSQLiteSession``: ``db_path``; ``SQLAlchemySession`` on an SQLite engine: its URL's
    database) belong to the application, and a journal there would add its tables to the
    application's chat database. This package's own revisioned stores keep their tables apart
    from the journal's, and share a file with it by design: they are not refused. Files are
    compared as ``Path.resolve`` resolves them (and, when both exist, as the same inode)."""
    mine = _journal_file(journal)
    if mine is None:
        return
    for layer in session_layers(store):
        if type(layer).__module__ == "agents_reconcile":  # this package's revisioned stores
            continue
        for theirs in _store_files(layer):
            if _same_file(str(mine), str(theirs), os.getcwd()):
                kind = type(layer).__name__
                raise ConfigurationError(
                    f"journal {str(mine)!r} is the file in which the {kind} keeps the "
                    "application's chat history: the journal's tables would be added to that "
                    "database. Give the journal a file of its own (ReconcileConfig(journal=...))"
                )


def _journal_file(journal: object) -> Path | None:
    if journal is None:
        return Path(DEFAULT_JOURNAL_PATH)
    if isinstance(journal, SQLiteJournal):
        return journal.path
    if isinstance(journal, os.PathLike):
        text = os.fspath(journal)
        return Path(text) if isinstance(text, str) else None
    if isinstance(journal, str) and backend_for(journal, what="journal").name == "sqlite":
        return sqlite_file(journal)
    return None


def _store_files(store: object) -> Iterator[Path]:
    db_path = getattr(store, "db_path", None)
    if isinstance(db_path, str | os.PathLike):
        text = os.fspath(db_path)
        if isinstance(text, str) and text not in ("", ":memory:"):
            yield Path(text)
    url = getattr(getattr(store, "_engine", None), "url", None)
    backend = getattr(url, "get_backend_name", None)
    database = getattr(url, "database", None)
    if (
        callable(backend)
        and backend() == "sqlite"
        and isinstance(database, str)
        and database not in ("", ":memory:")
        and not database.startswith("file:")
    ):
        yield Path(database)


@functools.lru_cache(maxsize=256)
def _same_file(one: str, other: str, cwd: str) -> bool:
    """Whether two paths (relative to ``cwd``) name one file. Remembered per pair: a web app
    builds a wrapper per request, and resolving both paths each time was a fifth of that."""
    first, second = (Path(cwd, path).expanduser().resolve() for path in (one, other))
    if first == second:
        return True
    try:
        return first.samefile(second)
    except OSError:
        return False
