"""What the SQLite journal and the SQLite store share: one connection, and versioned schemas.

One SQLite connection per process, used from the event loop while the file is free. An
operation runs on the event loop with no busy wait; when another connection holds the file's
lock it moves to a worker thread and waits there (up to ``busy_timeout``), so the loop is never
blocked on a lock. A connection never crosses a fork: the child opens its own.

A schema's steps are SQL files shipped with the package; the versions applied are rows of a
version table (``version``, ``applied_at``) in the same file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ...errors import ConfigurationError
from ..addresses import sqlite_file
from ..schema import Schema, SchemaState

__all__ = ["Busy", "SQLiteLink", "SQLiteSchema", "enable_wal", "is_busy", "path_of"]

_T = TypeVar("_T")


def path_of(address: str) -> Path:
    """The file an SQLite address names: a plain path, ``sqlite:///relative.db`` or
    ``sqlite:////absolute.db`` (``addresses.sqlite_file``); an address that names no file,
    or not as written, is refused naming it."""
    try:
        return sqlite_file(address)
    except ConfigurationError as exc:
        raise ConfigurationError(f"SQLite address {address!r}: {exc}") from None


class Busy(Exception):
    """The file is locked by another connection: retry off the event loop."""


def is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode (it stays so), waiting up to ``timeout`` for other processes.

    Switching needs the file to itself, and SQLite may answer "locked" at once instead of
    calling the busy handler while another connection opens the same new file; a file that
    is in WAL mode already needs no switch at all."""
    (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() == "wal":
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


class SQLiteLink:
    """``connect()`` opens (and prepares) a connection; ``translate`` turns SQLite errors into
    the owner's own (None: they pass as they are); ``on_loop=False`` always uses a thread."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        busy_timeout: float,
        translate: Callable[[sqlite3.Error], Exception] | None = None,
        on_loop: bool = True,
    ) -> None:
        self._connect = connect
        self._busy_ms = int(busy_timeout * 1000)
        self._translate = translate
        self._on_loop = on_loop
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        conn = self._connect()
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _error(self, exc: sqlite3.Error) -> Exception:
        return exc if self._translate is None else self._translate(exc)

    def sync(self, operation: Callable[[sqlite3.Connection], _T], *, patient: bool = False) -> _T:
        """Run ``operation`` now; impatient, raise ``Busy`` rather than wait for a lock."""
        if not self._lock.acquire(blocking=patient):
            raise Busy
        try:
            try:
                conn = self._connection()
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            if patient:
                conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
            try:
                return operation(conn)
            except sqlite3.OperationalError as exc:
                if not patient and is_busy(exc):
                    raise Busy from exc
                raise self._error(exc) from exc
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if patient:
                    conn.execute("PRAGMA busy_timeout=0")
        finally:
            self._lock.release()

    async def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        # Opening (and migrating) may wait on another process's lock: never on the event loop.
        if self._on_loop and self._conn is not None and self._pid == os.getpid():
            try:
                return self.sync(operation)
            except Busy:
                pass
        return await asyncio.to_thread(self.sync, operation, patient=True)

    def close(self) -> None:
        """Close the connection; a later operation opens a new one."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class SQLiteSchema:
    """``schema`` (the model) in an SQLite file, its versions recorded in ``table``."""

    def __init__(self, schema: Schema, table: str) -> None:
        self.schema, self.table = schema, table

    def version(self, conn: sqlite3.Connection, where: str) -> int | None:
        """The highest version recorded (None without the table or a row); refuses one
        that is not a number."""
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table,)
        ).fetchone()
        if not exists:
            return None
        row = conn.execute(f"SELECT max(version) FROM {self.table}").fetchone()
        found = row[0] if row else None
        if found is not None and not isinstance(found, int):
            raise self.schema.unreadable(where, found)
        return found

    def ensure(self, conn: sqlite3.Connection, where: str, *, migrate: bool) -> None:
        """Make sure the file holds this release's schema: apply what is missing when
        ``migrate``, else refuse; a newer one is always refused."""
        found = self.version(conn, where)
        state = self.schema.state(found)
        if state is SchemaState.CURRENT:
            return
        if state is SchemaState.NEWER or not migrate:
            self.schema.refuse(where, found)
        self.apply(conn, where)

    def apply(self, conn: sqlite3.Connection, where: str) -> list[str]:
        """Apply the missing steps in one write transaction; return what was applied."""
        # IMMEDIATE: two processes creating the schema at once must not both apply a step;
        # the second re-reads the version under the lock and finds it done.
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = self.version(conn, where)
            if self.schema.state(found) is SchemaState.NEWER:
                self.schema.refuse(where, found)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                " version INTEGER NOT NULL, applied_at REAL NOT NULL)"
            )
            applied: list[str] = []
            current = found or 0
            for number, step in enumerate(self.schema.missing(current), start=current + 1):
                for statement in self.schema.statements(step):
                    conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {self.table} (version, applied_at) VALUES (?, ?)",
                    (number, time.time()),
                )
                applied.append(self.schema.applied(number))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return applied

    def read_file(self, path: Path) -> int | None:
        """The version recorded in the file at ``path``, read without creating or changing
        it (None when there is no file or no schema)."""
        if not path.is_file():
            return None
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            return self.version(conn, str(path))
        except sqlite3.DatabaseError as exc:
            raise self.schema.error(f"{path} is damaged or is not a database: {exc}") from exc
        finally:
            conn.close()

    def migrate_file(self, path: Path, busy_timeout: float) -> list[str]:
        """Create or upgrade the schema in the file at ``path`` (created if missing)."""
        conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None)
        try:
            enable_wal(conn, busy_timeout)
            return self.apply(conn, str(path))
        except sqlite3.DatabaseError as exc:
            raise self.schema.error(f"{path} is damaged or is not a database: {exc}") from exc
        finally:
            conn.close()
