"""One SQLite connection per process, used from the event loop while the file is free.

The embedded journal and the revisioned SQLite store share this. An operation runs on the
event loop with no busy wait; when another connection holds the file's lock it moves to a worker
thread and waits there (up to ``busy_timeout``), so the loop is never blocked on a lock. A
connection never crosses a fork: the child opens its own.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Busy", "SQLiteLink", "enable_wal", "is_busy"]

_T = TypeVar("_T")


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
