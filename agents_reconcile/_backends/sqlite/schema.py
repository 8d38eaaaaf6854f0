"""The SQLite journal's schema half: the version its file holds, checking and migrating it, and
refusing a file opened for inspection that holds no journal this release reads. The steps
themselves, and reading a file without leaving a trace, are in ``files``.

Kept apart from ``SQLiteJournal`` for length; it works on the journal's own path and settings.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from ...errors import JournalCorrupt, JournalUnavailable
from .files import _VERSIONS, SCHEMA, SCHEMA_VERSION, _access_problem, _inspect, _translate

__all__ = ["SQLiteSchemaSteps"]


class SQLiteSchemaSteps:
    """The schema half of ``SQLiteJournal``, which provides what is declared here."""

    path: Path
    read_only: bool
    _busy_timeout: float

    def _check_read_only(self, conn: sqlite3.Connection) -> None:
        """An inspected file must be a journal this release reads."""
        found = _VERSIONS.version(conn, str(self.path))
        if found is None:
            raise JournalCorrupt(f"{self.path} is not an agents-reconcile journal")
        if found > SCHEMA_VERSION:
            SCHEMA.refuse(str(self.path), found)

    async def schema_version(self) -> int | None:
        """The schema version recorded in the file (None without one); writes nothing."""
        return await asyncio.to_thread(_VERSIONS.read_file, self.path)

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current)."""
        if self.read_only:
            raise JournalUnavailable(f"journal {self.path} is open read-only")
        try:
            return await asyncio.to_thread(_VERSIONS.migrate_file, self.path, self._busy_timeout)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    async def check(self) -> str | None:
        """None when the file holds this release's schema; else what is missing or newer,
        what stops this user reading it, or what the file holds instead of a journal.
        Creates and writes nothing, and leaves no file beside the journal (``_reader``)."""
        try:
            if not self.path.is_file():
                return f"{self.path}: no journal file (migrate creates it)"
        except OSError as exc:  # a directory on the way this user may not search
            return _access_problem(self.path, writing=False) or f"{self.path}: {exc}"
        return await asyncio.to_thread(_inspect, self.path)
