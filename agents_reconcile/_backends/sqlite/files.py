"""The SQLite journal's file (``JournalFile``): where it is, the one connection this process
keeps to it, its schema steps (checked, migrated, refused when newer), how a command reads it
without leaving a trace (``_reader``), what it holds when it holds no journal (``_inspect``),
and what SQLite's errors mean for it (``_translate``). The journal and each of its components
run their statements through it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from ...errors import JournalCorrupt, JournalUnavailable
from ..schema import Schema
from .backend import SQLiteLink, SQLiteSchema, enable_wal

__all__ = ["FLOOR", "SCHEMA", "SCHEMA_VERSION", "JournalFile"]

_T = TypeVar("_T")
SCHEMA: Final = Schema(
    "journal",
    ("0001_initial", "0002_pruning", "0003_sealing", "0004_live_rows"),
    JournalCorrupt,
    package="agents_reconcile._backends.sqlite",
    folder="journal_schema",
)
"""The journal's schema steps, oldest first: files ``journal_schema/<step>.sql``; the
position is the version."""
SCHEMA_VERSION: Final = SCHEMA.version
_VERSIONS: Final = SQLiteSchema(SCHEMA, "journal_schema")
FLOOR: Final = "coalesce((SELECT write_count FROM write_floor WHERE id = 0), 0)"
"""The journal's floor (the highest write count pruned), as an SQL expression: what a session
without a count reads."""


class JournalFile:
    """One journal file and this process's connection to it (``link``): opened on first use,
    in WAL mode with the schema migrated, or, ``read_only``, as a reader that never creates,
    migrates or writes the file. ``synchronous`` is the commit's durability (``NORMAL``
    survives the process being killed; ``FULL`` power loss too)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float,
        synchronous: str,
        read_only: bool,
    ) -> None:
        self.path = Path(path).expanduser().resolve()
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.synchronous = synchronous.upper()
        self.link = SQLiteLink(
            self.open,
            busy_timeout=busy_timeout,
            translate=lambda exc: _translate(exc, self.path),
        )

    async def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` on the connection (``SQLiteLink.run``: on the event loop while
        the file is free, in a thread while another process holds its lock)."""
        return await self.link.run(operation)

    def close(self) -> None:
        """Close the connection; a later operation opens a new one."""
        self.link.close()

    def open(self) -> sqlite3.Connection:
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
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            if self.read_only:
                self._check_read_only(conn)
            else:
                # WAL lets readers run beside the one writer; NORMAL commits reach the OS
                # before returning, which is what surviving SIGKILL needs.
                enable_wal(conn, self.busy_timeout)
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
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
        if found < _LIVE_ROWS:
            _older_views(conn, found)

    async def schema_version(self) -> int | None:
        """The schema version recorded in the file (None without one); writes nothing."""
        return await asyncio.to_thread(_VERSIONS.read_file, self.path)

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current)."""
        if self.read_only:
            raise JournalUnavailable(f"journal {self.path} is open read-only")
        try:
            return await asyncio.to_thread(_VERSIONS.migrate_file, self.path, self.busy_timeout)
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

    async def refuse_older(self) -> None:
        """A file opened read-only that an earlier release wrote lacks what counts, pruning
        and the sealing mark read (it is never migrated): refused, saying what ``migrate``
        adds. Does nothing on a file opened to write (migrated when opened)."""
        if not self.read_only:
            return
        where = str(self.path)
        found = await self.run(lambda conn: _VERSIONS.version(conn, where))
        if found is not None and found < SCHEMA.version:
            SCHEMA.refuse(where, found)


def _translate(exc: sqlite3.Error, path: Path) -> Exception:
    text = str(exc).lower()
    if "readonly database" in text or "unable to open database file" in text:
        denied = _access_problem(path, writing=True)
        if denied is not None:
            return JournalUnavailable(f"{denied} (SQLite: {exc})")
    if "no such table" in text or "no such column" in text:
        return JournalCorrupt(f"{path} is not an agents-reconcile journal ({exc})")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return JournalCorrupt(f"journal {path} is damaged or is not a journal: {exc}")
    return JournalUnavailable(f"journal {path} cannot be used: {exc}")


# -- reading a journal without a trace -----------------------------------------------------------
#
# A journal is in WAL mode, and SQLite reads a WAL-mode file through two files beside it:
# ``-wal`` (commits not yet copied into the file) and ``-shm`` (the index of ``-wal``, shared
# memory every connection maps). A connection creates both when they are missing, and the last
# connection to close deletes them, after copying ``-wal`` into the file, only if it may write
# the file. So ``mode=ro`` alone, the obvious way to read, leaves both behind whenever it finds
# them missing, owned by whoever ran the command (a ``-shm`` the application's user may not
# write can stop the application using its journal), and in a directory this user may not
# write it cannot read at all.
#
# Deleting them afterwards is not safe: another process may have opened them in between, and
# a process holding an unlinked ``-shm`` while another makes a new one is two wal-indexes for
# one file, which loses commits. Only SQLite knows when it is the last user (it holds the
# file's exclusive lock while it deletes them), so ``_reading_mode`` leaves their lifetime to
# SQLite, and picks, from what is there before the read:
#
# - ``-wal`` is there: a connection is open (or one ended without removing it: a crash, a
#   reader that could not): ``mode=ro`` joins it through the side files there, creating none.
# - The file system is read-only: no process can change the file, so ``immutable=1`` (no locks,
#   no side files) reads exactly what is stored.
# - The file is not in WAL mode (an older or foreign file): a ``mode=ro`` reader creates nothing.
# - This user owns the file, or is root (SQLite then gives the side files the file's owner),
#   and may write it and its directory: ``mode=rw`` with ``PRAGMA query_only``. SQLite refuses
#   every statement that would write, and the connection takes part in SQLite's locking as any
#   other: the side files it needs are the ones the application would make, and the last
#   connection to close, this one or the application's, removes them. (With ``-wal`` absent no
#   commit is waiting to be copied, so closing changes no byte of the file, unless a writer
#   arrives meanwhile and leaves its commits to this close to copy, as its own close would.)
# - Otherwise the read is refused with what stops it: ``immutable=1`` is not safe there (a
#   writer may start while the file is read, and copy pages into it under the reader, which
#   takes no lock), and ``mode=ro`` would leave another user's side files beside the journal.


def _reader(path: Path) -> sqlite3.Connection:
    """A connection that reads the journal file ``path``, writes nothing and leaves no file
    beside it once closed (``_reading_mode``); ``JournalUnavailable`` saying what stops it."""
    mode = _reading_mode(path)
    try:
        conn = sqlite3.connect(
            f"{path.as_uri()}?{mode}",
            uri=True,
            timeout=0,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise _translate(exc, path) from exc
    if mode == "mode=rw":
        try:
            conn.execute("PRAGMA query_only=ON")
        except BaseException:
            conn.close()
            raise
    return conn


def _reading_mode(path: Path) -> str:
    """How to open ``path`` to read it without leaving a trace (the URI's parameters)."""
    denied = _access_problem(path, writing=False)
    if denied is not None:
        raise JournalUnavailable(denied)
    if path.with_name(f"{path.name}-wal").exists():
        return "mode=ro"
    if _on_read_only_file_system(path):
        return "immutable=1"
    if not _in_wal_mode(path):
        return "mode=ro"
    stat = path.stat()
    euid = os.geteuid() if hasattr(os, "geteuid") else stat.st_uid
    if euid in (0, stat.st_uid) and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
        return "mode=rw"
    if not os.access(path.parent, os.W_OK):
        which = f"the directory {path.parent} is read-only to this user (permission denied)"
        then = "which SQLite cannot create there"
    else:
        if not os.access(path, os.W_OK):
            which = f"the journal file {path} is read-only to this user (permission denied)"
        else:
            which = f"the journal file {path} belongs to {_owner(stat.st_uid)}"
        then = (
            "which would stay there owned by this user, where the application may be unable "
            "to open them"
        )
    who = "root" if stat.st_uid == 0 else f"{_owner(stat.st_uid)} (the journal's owner) or root"
    raise JournalUnavailable(
        f"{which}: reading the journal, which is in WAL mode, needs {path.name}-wal and "
        f"{path.name}-shm beside it, {then}; run the command as {who}, or on a copy of the file"
    )


def _access_problem(path: Path, *, writing: bool) -> str | None:
    """What stops this user reading (and, ``writing``, writing) the journal file ``path``,
    naming the file or the directory at fault; None when nothing does (as for root, except on
    a read-only file system)."""
    directory = path.parent
    if not os.access(directory, os.X_OK):
        return (
            f"permission denied: this user may not look into {directory}, which holds the "
            f"journal {path.name}"
        )
    if not os.access(path, os.F_OK):
        return None  # nothing there: said by whoever looks for it
    if not os.access(path, os.R_OK):
        return f"permission denied: this user may not read the journal file {path}{_mode(path)}"
    if not writing:
        return None
    if _on_read_only_file_system(path):
        return f"the journal file {path} is on a read-only file system"
    if not os.access(path, os.W_OK):
        return f"the journal file {path} is read-only to this user (permission denied){_mode(path)}"
    if not os.access(directory, os.W_OK):
        return (
            f"the directory {directory} is read-only to this user (permission denied): "
            f"SQLite writes the journal through {path.name}-wal and {path.name}-shm, beside it"
        )
    return None


def _on_read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _in_wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL mode (its read and write versions are 2)."""
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError:
        return True  # unknown: taken as WAL mode, the more careful case
    return header[:16] == _SQLITE_HEADER and header[18:20] == b"\x02\x02"


def _owner(uid: int) -> str:
    """``user NAME`` (``user UID`` when it has no name here)."""
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name}"
    except (ImportError, KeyError):
        return f"user {uid}"


def _mode(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return ""
    return f" (owned by {_owner(stat.st_uid)}, mode {stat.st_mode & 0o777:04o})"


_SQLITE_HEADER: Final = b"SQLite format 3\x00"
_SESSION_TABLES: Final = ("agent_sessions", "agent_messages")
"""The tables of the SDK's ``SQLiteSession`` (and of the sessions built on it)."""
_STORE_TABLE: Final = "revisioned_schema"
"""The version table of this package's revisioned SQLite store."""


def _inspect(path: Path) -> str | None:
    """``check`` of the file at ``path``: None when it holds this release's journal schema."""
    try:
        conn = _reader(path)
    except JournalUnavailable as exc:
        return str(exc)
    try:
        found = _VERSIONS.version(conn, str(path))
        if found is None:
            return _not_a_journal(conn, path)
        return SCHEMA.problem(str(path), found)
    except JournalCorrupt as exc:
        return str(exc)
    except sqlite3.DatabaseError as exc:
        if not _is_sqlite(path):
            return f"{path} is not an SQLite database, so not a journal"
        return str(_translate(exc, path))
    finally:
        conn.close()


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(16) == _SQLITE_HEADER
    except OSError:
        return False


_LIVE_ROWS: Final = 4
"""The schema version that keeps each session's count and live intent in one row."""


def _older_views(conn: sqlite3.Connection, version: int) -> None:
    """On a reader of a file an earlier release wrote (never migrated by a reader): the names
    this release reads (``unresolved``, ``live``) as views over that file's tables, in the
    connection's own temporary schema, so its intents are listed as they are. The file is
    not written."""
    counted_at = "counted_at" if version >= 2 else "0.0 AS counted_at"
    conn.execute("PRAGMA query_only=OFF")
    try:
        conn.execute(
            "CREATE TEMP VIEW IF NOT EXISTS unresolved AS SELECT intent_id, session_id, backend,"
            " state, owner, created_at, updated_at, record, fence FROM main.intents"
        )
        conn.execute(
            "CREATE TEMP VIEW IF NOT EXISTS live AS SELECT session_id, backend, write_count,"
            f" {counted_at}, NULL AS intent_id, NULL AS state, NULL AS owner,"
            " NULL AS created_at, NULL AS updated_at, NULL AS fence, NULL AS record"
            " FROM main.session_writes"
        )
    finally:
        conn.execute("PRAGMA query_only=ON")


def _not_a_journal(conn: sqlite3.Connection, path: Path) -> str:
    """What a file without a journal schema holds instead: nothing (migrate makes it a
    journal), or tables that say it is something else (migrating it would put a journal in
    the wrong place)."""
    from ..opening import DEFAULT_JOURNAL_PATH

    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%'"
        " ESCAPE '^' ORDER BY name"
    ).fetchall()
    tables = [str(name) for (name,) in rows]
    if not tables or _VERSIONS.table in tables or "intents" in tables:
        return SCHEMA.problem(str(path), None) or ""
    which = (
        "(the journal is the file given to ReconcileConfig(journal=...), by default "
        f"{DEFAULT_JOURNAL_PATH})"
    )
    if set(_SESSION_TABLES) <= set(tables):
        return (
            f"{path} holds {' and '.join(_SESSION_TABLES)} tables: it looks like a session "
            f"store, not a journal {which}"
        )
    if _STORE_TABLE in tables:
        return (
            f"{path} holds a {_STORE_TABLE} table: it looks like a revisioned store, not a "
            f"journal {which}"
        )
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    return f"{path} holds tables {shown} and no journal schema: it is not a journal {which}"
