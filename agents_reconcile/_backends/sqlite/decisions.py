"""The SQLite journal's statements on its decisions that its halves share: recording a
decision, whether an intent is settled (and by which decision), and the ``AND column = ?``
filter of its listings.

Kept apart from ``SQLiteJournal`` for length.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from ..._core.records import Decision

__all__ = ["SETTLING_ACTIONS", "insert_decision", "matching", "settled", "settled_by"]

SETTLING_ACTIONS: Final = ("settled", "replayed", "dropped")


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
