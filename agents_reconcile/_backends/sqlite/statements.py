"""The SQL the SQLite journal and its components share: reading and counting a session's
writes, recording a decision, whether an intent is settled (and by which decision), and the
``AND column = ?`` filter of its listings. Each takes the connection it runs on.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Final

from ..._core.records import Decision
from .files import FLOOR

__all__ = [
    "SETTLING_ACTIONS",
    "add_write",
    "insert_decision",
    "matching",
    "read_count",
    "settled",
    "settled_by",
]

SETTLING_ACTIONS: Final = ("settled", "replayed", "dropped")
_WRITE_COUNT_SQL: Final = (
    "SELECT coalesce((SELECT write_count FROM session_writes WHERE session_id = ?"
    f" AND backend = ?), {FLOOR})"
)
_COUNT_WRITE_SQL: Final = (
    "INSERT INTO session_writes (session_id, backend, write_count, counted_at)"
    f" VALUES (?, ?, {FLOOR} + 1, ?) ON CONFLICT (session_id, backend) DO UPDATE"
    " SET write_count = write_count + 1, counted_at = excluded.counted_at RETURNING write_count"
)


def read_count(conn: sqlite3.Connection, key: tuple[str, str]) -> int:
    """The count of ``key`` (session id, backend), the floor when it has none."""
    (write_count,) = conn.execute(_WRITE_COUNT_SQL, key).fetchone()
    return int(write_count)


def add_write(conn: sqlite3.Connection, key: tuple[str, str]) -> int:
    """Count one more write of ``key`` (above the floor when it has no count), stamped now."""
    (write_count,) = conn.execute(_COUNT_WRITE_SQL, (*key, time.time())).fetchone()
    return int(write_count)


def matching(args: list[object], **columns: object) -> str:
    """`` AND column = ?`` for each column given a value (None: any), its value added to
    ``args``."""
    wanted = {column: value for column, value in columns.items() if value is not None}
    args.extend(wanted.values())
    return "".join(f" AND {column} = ?" for column in wanted)


def settled(conn: sqlite3.Connection, intent_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM decisions WHERE intent_id = ? AND action IN (?, ?, ?) LIMIT 1",
        (intent_id, *SETTLING_ACTIONS),
    ).fetchone()
    return row is not None


def settled_by(conn: sqlite3.Connection, decision: Decision) -> bool:
    """Whether ``decision`` itself, byte for byte, is what settled its intent."""
    row = conn.execute(
        "SELECT 1 FROM decisions WHERE intent_id = ? AND action IN (?, ?, ?) AND record = ?"
        " LIMIT 1",
        (decision.intent_id, *SETTLING_ACTIONS, decision.encode()),
    ).fetchone()
    return row is not None


def insert_decision(conn: sqlite3.Connection, decision: Decision) -> None:
    conn.execute(
        "INSERT INTO decisions (intent_id, session_id, backend, outcome, reason, action,"
        " decided_at, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            decision.intent_id,
            decision.session_id,
            str(decision.backend),
            decision.outcome.value,
            decision.reason.value,
            decision.action.value,
            decision.decided_at,
            decision.encode(),
        ),
    )
