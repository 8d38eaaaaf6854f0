"""The SQLite journal's schema half: opening its file (the connection's settings, the schema
migrated on first use), the version the file holds, checking and migrating it, and refusing a
file opened for inspection that holds no journal this release reads. The steps themselves,
and reading a file without leaving a trace, are in ``files``.

Kept apart from ``SQLiteJournal`` for length; it works on the journal's own path and settings.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from ...errors import JournalCorrupt, JournalUnavailable
from .backend import enable_wal
from .files import (
    _VERSIONS,
    SCHEMA,
    SCHEMA_VERSION,
    _access_problem,
    _inspect,
    _reader,
    _translate,
)

__all__ = ["SQLiteSchemaSteps"]


class SQLiteSchemaSteps:
    """The schema half of ``SQLiteJournal``, which provides what is declared here."""

    path: Path
    read_only: bool
    _busy_timeout: float
    _synchronous: str

    def _open(self) -> sqlite3.Connection:
        """The journal's connection (the link's ``connect``): a reader that leaves no trace
        when ``read_only``, else a connection in WAL mode with the schema migrated."""
        if self.read_only:
            try:
                there = self.path.is_file()
            except OSError:
                there = True  # a directory this user may not search: _reader says so
            if not there:
                raise JournalUnavailable(f"no journal file at {self.path}")
            # Inspecting a journal never creates, migrates or writes it, even when the path
            # is mistyped or a live process is using it, and leaves no file beside it.
            conn = _reader(self.path)
        else:
            try:
                conn = sqlite3.connect(
                    str(self.path), timeout=0, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
        try:
            # The timeout first: switching to WAL takes the file's lock, which another process
            # opening the journal at the same moment may hold.
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
            if self.read_only:
                self._check_read_only(conn)
            else:
                # WAL lets readers run beside the one writer; NORMAL commits reach the OS
                # before returning, which is what surviving SIGKILL needs.
                enable_wal(conn, self._busy_timeout)
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
                # Pending batches hold conversation content: overwrite it when a row goes.
                conn.execute("PRAGMA secure_delete=ON")
                _VERSIONS.ensure(conn, str(self.path), migrate=True)
                conn.execute("PRAGMA busy_timeout=0")
        except BaseException:
            conn.close()
            raise
        return conn

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
