"""``RevisionedSQLiteSession``: a revisioned SDK session in one SQLite file.

Every write is one transaction: it checks the head (for ``append_if``), stores the items,
records the write (revision, write id, writer, kind, count) and moves the head. Items are kept
as the SDK's ``SQLiteSession`` keeps them, as JSON text, one row each; ``get_items(limit)``
reads only the newest ``limit`` rows through the primary key.

The file has a versioned schema (``revisioned_schema``); a newer one is refused. Operations run
on the event loop while the file is free (WAL, ``synchronous=NORMAL``: commits survive a
killed process) and move to a worker thread to wait when another connection holds the lock;
``synchronous="FULL"`` (survives power loss, an fsync per commit) always runs in a thread.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from ..._core.revision import WriteRecord
from ...errors import RevisionConflict, SchemaMismatch
from ..schema import Schema
from ..store_items import ANONYMOUS, decode_item, encode_item, new_write_id, valid_limit
from .backend import SQLiteLink, SQLiteSchema, enable_wal, path_of

__all__ = ["SCHEMA_VERSION", "RevisionedSQLiteSession"]

SCHEMA: Final = Schema(
    "revisioned store",
    ("0001_initial",),
    SchemaMismatch,
    package="agents_reconcile._backends.sqlite",
    folder="store_schema",
)
"""The store's schema steps, oldest first: files ``store_schema/<step>.sql``."""
SCHEMA_VERSION: Final = SCHEMA.version
_VERSIONS: Final = SQLiteSchema(SCHEMA, "revisioned_schema")
_T = TypeVar("_T")


class RevisionedSQLiteSession:
    """A full SDK ``Session`` (usable with ``Runner.run`` directly) that is also a
    ``RevisionedStore``: ``ReconcilingSession`` then judges its writes exactly."""

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        busy_timeout: float = 5.0,
        migrate: bool = True,
    ) -> None:
        if synchronous.upper() not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self.session_id = session_id
        self.session_settings: Any = None
        self.path = Path(db_path).expanduser().resolve()
        self.db_path = self.path
        self._synchronous = synchronous.upper()
        self._busy_timeout = busy_timeout
        self._migrate_on_open = migrate
        # FULL commits fsync: they wait in a thread, never on the event loop.
        self._link = SQLiteLink(
            self._open, busy_timeout=busy_timeout, on_loop=self._synchronous == "NORMAL"
        )

    @classmethod
    def from_address(
        cls,
        session_id: str,
        address: str,
        *,
        namespace: str | None = None,
        migrate: bool = True,
    ) -> RevisionedSQLiteSession:
        """A store on the file ``address`` names (a path or an ``sqlite:`` URL);
        ``namespace`` is not used (the file is one)."""
        return cls(session_id, path_of(address), migrate=migrate)

    def __repr__(self) -> str:
        return f"RevisionedSQLiteSession({self.session_id!r}, {str(self.path)!r})"

    # -- connection ----------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            str(self.path), timeout=0, isolation_level=None, check_same_thread=False
        )
        try:
            # The timeout first: switching to WAL takes the file's lock, which another process
            # opening the file at the same moment may hold.
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
            enable_wal(conn, self._busy_timeout)
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            self._prepare(conn)
            conn.execute("PRAGMA busy_timeout=0")
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        _VERSIONS.ensure(conn, str(self.path), migrate=self._migrate_on_open)

    async def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        return await self._link.run(operation)

    async def close(self) -> None:
        self._link.close()

    async def schema_version(self) -> int | None:
        """The schema version recorded in the file (None without one); writes nothing."""
        return await asyncio.to_thread(_VERSIONS.read_file, self.path)

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current)."""
        return await asyncio.to_thread(_VERSIONS.migrate_file, self.path, self._busy_timeout)

    async def check(self) -> str | None:
        """None when the file has this release's schema; else what is wrong. Writes nothing."""
        try:
            found = await self.schema_version()
        except SchemaMismatch as exc:
            return str(exc)
        return SCHEMA.problem(str(self.path), found)

    # -- writes --------------------------------------------------------------------------

    def _position(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """The session's head revision and next item position, inside a transaction."""
        found = conn.execute(
            "SELECT revision, next_seq FROM revisioned_sessions WHERE session_id = ?",
            (self.session_id,),
        ).fetchone()
        return (found[0], found[1]) if found else (0, 0)

    def _record(
        self,
        conn: sqlite3.Connection,
        *,
        revision: int,
        next_seq: int,
        kind: str,
        count: int,
        write_id: str,
        writer: str,
    ) -> int:
        """Record a write made on top of ``revision`` and move the head past it."""
        new = revision + 1
        try:
            conn.execute(
                "INSERT INTO revisioned_writes (session_id, revision, write_id, writer, kind, "
                "count, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.session_id, new, write_id, writer, kind, count, time.time()),
            )
        except sqlite3.IntegrityError as exc:
            raise RevisionConflict(
                f"write {write_id} is already recorded for session {self.session_id!r}",
                expected=revision,
                actual=revision,
            ) from exc
        conn.execute(
            "INSERT INTO revisioned_sessions (session_id, revision, next_seq) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET revision = excluded.revision, "
            "next_seq = excluded.next_seq",
            (self.session_id, new, next_seq),
        )
        return new

    def _append(
        self,
        conn: sqlite3.Connection,
        rows: list[bytes],
        *,
        expected: int | None,
        write_id: str,
        writer: str,
    ) -> int:
        conn.execute("BEGIN IMMEDIATE")
        revision, next_seq = self._position(conn)
        if expected is not None and revision != expected:
            raise RevisionConflict(
                f"session {self.session_id!r} is at revision {revision}, not {expected}",
                expected=expected,
                actual=revision,
            )
        conn.executemany(
            "INSERT INTO revisioned_items (session_id, seq, revision, item) VALUES (?, ?, ?, ?)",
            [
                (self.session_id, next_seq + i, revision + 1, row.decode())
                for i, row in enumerate(rows)
            ],
        )
        new = self._record(
            conn,
            revision=revision,
            next_seq=next_seq + len(rows),
            kind="append",
            count=len(rows),
            write_id=write_id,
            writer=writer,
        )
        conn.execute("COMMIT")
        return new

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        rows = [encode_item(item, index) for index, item in enumerate(items)]
        return await self._run(
            lambda conn: self._append(
                conn, rows, expected=expected, write_id=write_id, writer=writer
            )
        )

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        rows = [encode_item(item, index) for index, item in enumerate(items)]
        write_id = new_write_id()
        await self._run(
            lambda conn: self._append(
                conn, rows, expected=None, write_id=write_id, writer=ANONYMOUS
            )
        )

    async def pop_item(self) -> Any | None:
        write_id = new_write_id()

        def pop(conn: sqlite3.Connection) -> Any | None:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT seq, item FROM revisioned_items WHERE session_id = ? "
                "ORDER BY seq DESC LIMIT 1",
                (self.session_id,),
            ).fetchone()
            if row is None:
                conn.execute("ROLLBACK")
                return None
            conn.execute(
                "DELETE FROM revisioned_items WHERE session_id = ? AND seq = ?",
                (self.session_id, row[0]),
            )
            self._record_removal(conn, "pop", 1, write_id)
            conn.execute("COMMIT")
            return decode_item(row[1])

        return await self._run(pop)

    async def clear_session(self) -> None:
        write_id = new_write_id()

        def clear(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            removed = conn.execute(
                "DELETE FROM revisioned_items WHERE session_id = ?", (self.session_id,)
            ).rowcount
            self._record_removal(conn, "clear", removed, write_id)
            conn.execute("COMMIT")

        await self._run(clear)

    def _record_removal(
        self, conn: sqlite3.Connection, kind: str, count: int, write_id: str
    ) -> None:
        revision, next_seq = self._position(conn)
        self._record(
            conn,
            revision=revision,
            next_seq=next_seq,
            kind=kind,
            count=count,
            write_id=write_id,
            writer=ANONYMOUS,
        )

    # -- reads ---------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        limit = valid_limit(limit)

        def read(conn: sqlite3.Connection) -> list[Any]:
            if limit is None:
                rows = conn.execute(
                    "SELECT item FROM revisioned_items WHERE session_id = ? ORDER BY seq",
                    (self.session_id,),
                ).fetchall()
                return [decode_item(row[0]) for row in rows]
            rows = conn.execute(
                "SELECT item FROM revisioned_items WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (self.session_id, limit),
            ).fetchall()
            return [decode_item(row[0]) for row in reversed(rows)]

        return await self._run(read)

    async def head(self) -> int:
        row = await self._run(
            lambda conn: conn.execute(
                "SELECT revision FROM revisioned_sessions WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
        )
        return int(row[0]) if row else 0

    async def find_write(self, write_id: str) -> WriteRecord | None:
        row = await self._run(
            lambda conn: conn.execute(
                "SELECT revision, write_id, writer, kind, count, at FROM revisioned_writes "
                "WHERE session_id = ? AND write_id = ?",
                (self.session_id, write_id),
            ).fetchone()
        )
        return None if row is None else WriteRecord(*row)

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT revision, write_id, writer, kind, count, at FROM revisioned_writes "
                "WHERE session_id = ? AND revision > ? ORDER BY revision LIMIT ?",
                (self.session_id, revision, limit),
            ).fetchall()
        )
        return [WriteRecord(*row) for row in rows]


# Its public name: the identity a journal records for this store (``BackendIdentity.kind``)
# does not change when the file that defines it moves.
RevisionedSQLiteSession.__module__ = "agents_reconcile"
