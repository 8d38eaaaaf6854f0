"""The SQL the SQLite journal and its components share: reading and counting a session's
writes, taking an unresolved intent out (from its session's live row, or from those recorded
beside it), recording a decision, whether an intent is settled (and by which decision), and
the ``AND column = ?`` filter of its listings. Each takes the connection it runs on.

A session's live row (table ``live``) holds its write count and the intent it has in flight;
``intents`` holds the intents recorded beside it; the view ``unresolved`` reads both.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Final

from ..._core.records import Decision
from ..rows import checked_decision, each
from .files import FLOOR

__all__ = [
    "SETTLING_ACTIONS",
    "add_write",
    "clear_live",
    "insert_decision",
    "matching",
    "newest_by_intent",
    "read_count",
    "read_newest",
    "remove_intent",
    "settled",
    "settled_by",
]

SETTLING_ACTIONS: Final = ("settled", "replayed", "dropped")
_CHUNK: Final = 500
"""Ids per statement: well under SQLite's limit on bound parameters."""
_WRITE_COUNT_SQL: Final = (
    f"SELECT coalesce((SELECT write_count FROM live WHERE session_id = ? AND backend = ?), {FLOOR})"
)
_COUNT_WRITE_SQL: Final = (
    "INSERT INTO live (session_id, backend, write_count, counted_at)"
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


def clear_live(
    conn: sqlite3.Connection, intent_id: str, *, only_if: str = "", args: Sequence[object] = ()
) -> bool:
    """Take ``intent_id`` out of its session's live row where ``only_if`` holds, counting the
    write in the same statement (atomic on its own); whether it was there."""
    cleared = conn.execute(
        _CLEAR_LIVE_SQL + only_if + " RETURNING 1", (time.time(), intent_id, *args)
    ).fetchone()
    return cleared is not None


def remove_intent(
    conn: sqlite3.Connection, intent_id: str, *, only_if: str = "", args: Sequence[object] = ()
) -> bool:
    """Inside a write transaction: take ``intent_id`` out of the unresolved intents and count
    the write of its session, only where ``only_if`` (``AND ...`` on the intent's columns,
    ``args`` its parameters) holds; whether it was there. A live intent leaves its session's
    row (the count moves in the same statement), one recorded beside it is deleted."""
    if clear_live(conn, intent_id, only_if=only_if, args=args):
        return True
    gone = conn.execute(
        "DELETE FROM intents WHERE intent_id = ?" + only_if + " RETURNING session_id, backend",
        (intent_id, *args),
    ).fetchone()
    if gone is None:
        return False
    add_write(conn, (gone[0], gone[1]))
    return True


_CLEAR_LIVE_SQL: Final = (
    "UPDATE live SET intent_id = NULL, state = NULL, owner = NULL, created_at = NULL,"
    " updated_at = NULL, fence = NULL, record = NULL, write_count = write_count + 1,"
    " counted_at = ? WHERE intent_id = ?"
)


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


def read_newest(
    conn: sqlite3.Connection, intent_ids: Sequence[str]
) -> list[tuple[str, str, bytes]]:
    """The newest decision's row (intent id, session id, record) of each of ``intent_ids``
    that has one, through ``decisions_by_intent``, a chunk of ids per statement."""
    rows: list[tuple[str, str, bytes]] = []
    for start in range(0, len(intent_ids), _CHUNK):
        chunk = intent_ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        rows += conn.execute(
            "SELECT intent_id, session_id, record FROM decisions WHERE seq IN"
            " (SELECT max(seq) FROM decisions"
            f" WHERE intent_id IN ({marks}) GROUP BY intent_id)",
            list(chunk),
        ).fetchall()
    return rows


def newest_by_intent(rows: Sequence[tuple[str, str, bytes]]) -> dict[str, Decision]:
    """Decisions' rows (intent id, session id, record), each checked, by intent id (a row that
    fails its checks is reported under ``collecting_damage`` and left out)."""
    found = each(rows, lambda row: checked_decision(*row), lambda row: ("decision", row[0], row[1]))
    return {decision.intent_id: decision for decision in found}
