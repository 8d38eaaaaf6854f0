"""The SQLite journal's retention component (``JournalRetention``), and the floor its write
counts read from.

The floor is the ``write_floor`` row: the highest count pruned. Every statement that reads a
session's count reads the floor where the session has none (``files.FLOOR``), and every
statement that raises a count (``statements.add_write``, and the opening that moves a live
row's count itself) starts an absent one at floor + 1 and stamps ``counted_at`` on the
journal's clock. A trigger on ``live`` raises the floor in the very statement that deletes a
count, so no count goes without the floor knowing it.

``prune`` sweeps each table in its key order (decisions and set-aside entries by ``seq``,
effects by rowid, counts by session and backend), from a cursor this object keeps in memory,
in chunks. A chunk is read first, with no lock held; its due rows are then deleted in one write
transaction, each by its key by a statement that checks its rule again (a count only while it
is still the one read, still idle and its session has no unresolved intent; a decision only
while its intent is not unresolved; a receipt only while its session has no unresolved
intent), so what a writer did between the read and the delete is kept. Nothing scans a
table beyond the rows a chunk examines. Every statement runs on the journal's file
(``files.JournalFile``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from ..._core.retention import Kept, Pruned, Retention
from ..journal import require_limit
from ..sweeps import Swept, pruned_of
from .files import JournalFile

__all__ = ["SQLiteRetention"]

_CHUNK: Final = 500
"""Rows examined per read (and deleted per write transaction) while pruning."""
_FINISHED: Final[tuple[Any, ...]] = ()
"""The cursor of a kind whose limited sweep reached the end of its table this round."""


def _size(*text: str, blobs: tuple[str, ...] = ("record",)) -> str:
    """The bytes the ``text`` and ``blobs`` columns hold as stored (text in UTF-8; a blob's
    length is read without reading the blob)."""
    sizes = [f"length(CAST({column} AS BLOB))" for column in text]
    return " + ".join(sizes + [f"length({column})" for column in blobs])


@dataclass(frozen=True)
class _Kind:
    """One kind of row ``prune`` removes: its table, the key it is swept and deleted by, and
    its rule (an SQL condition on the row, its one parameter the cutoff)."""

    name: str
    """The ``Pruned`` field that counts it."""
    kept: Kept
    """The retention span that keeps it."""
    table: str
    key: tuple[str, ...]
    due: str
    size: str
    same: tuple[str, ...] = ()
    """Columns that must still hold what was read for the row to go (a count: its value)."""

    def examine_sql(self, from_cursor: bool) -> str:
        key = ", ".join(self.key)
        where = f" WHERE ({key}) > ({', '.join('?' * len(self.key))})" if from_cursor else ""
        columns = ", ".join((*self.key, *self.same))
        return (
            f"SELECT {columns}, ({self.due}), {self.size} FROM {self.table}{where}"
            f" ORDER BY {key} LIMIT ?"
        )

    @property
    def delete_sql(self) -> str:
        match = " AND ".join(f"{column} = ?" for column in (*self.key, *self.same))
        return f"DELETE FROM {self.table} WHERE {match} AND {self.due} RETURNING {self.size}"


_KINDS: Final = (
    _Kind(
        "decisions",
        "decisions",
        "decisions",
        ("seq",),
        "decided_at < ? AND NOT EXISTS (SELECT 1 FROM unresolved AS i"
        " WHERE i.intent_id = decisions.intent_id)",
        _size("intent_id", "session_id", "backend", "outcome", "reason", "action"),
    ),
    _Kind(
        "set_aside",
        "decisions",
        "set_aside",
        ("seq",),
        "set_aside_at < ?",
        _size("intent_id", "session_id", blobs=("meta", "record")),
    ),
    _Kind(
        "receipts",
        "receipts",
        "effects",
        ("rowid",),
        # A receipt of a session with an unresolved intent stays: that intent's batch may hold
        # the output it vouches for (checked before the intent is accepted or replayed).
        "state = 'done' AND updated_at < ? AND NOT EXISTS (SELECT 1 FROM unresolved AS i"
        " WHERE i.session_id = effects.session_id)",
        _size("key", "session_id", "state", "owner"),
    ),
    _Kind(
        "write_counts",
        "idle_sessions",
        "live",
        ("session_id", "backend"),
        # An idle count with no live intent and none recorded beside it.
        "counted_at < ? AND intent_id IS NULL AND NOT EXISTS (SELECT 1 FROM intents AS i"
        " WHERE i.session_id = live.session_id AND i.backend = live.backend)",
        _size("session_id", "backend", blobs=()),
        same=("write_count",),
    ),
)


def _examine(
    conn: sqlite3.Connection,
    *,
    kind: _Kind,
    after: tuple[Any, ...] | None,
    cutoff: float,
    most: int,
) -> list[tuple[Any, ...]]:
    """Up to ``most`` rows of ``kind`` after ``after`` (from the first when None), in key
    order: each its key (and ``same`` columns), whether it is due, and its size."""
    start = () if after is None else after
    rows: list[tuple[Any, ...]] = conn.execute(
        kind.examine_sql(after is not None), (cutoff, *start, most)
    ).fetchall()
    return rows


def _remove(
    conn: sqlite3.Connection, *, kind: _Kind, due: Sequence[tuple[Any, ...]], cutoff: float
) -> tuple[int, int]:
    """Delete the rows ``due`` names, each only while its rule still holds, in one write
    transaction; (rows removed, their bytes)."""
    identity, sql = len(kind.key) + len(kind.same), kind.delete_sql
    removed = size = 0
    conn.execute("BEGIN IMMEDIATE")
    for row in due:
        gone = conn.execute(sql, (*row[:identity], cutoff)).fetchone()
        if gone is not None:
            removed, size = removed + 1, size + int(gone[0])
    conn.execute("COMMIT")
    return removed, size


class SQLiteRetention:
    """``JournalRetention`` on a journal's file."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file
        self._prune_cursors: dict[str, tuple[Any, ...]] = {}
        """Where the limited sweep of each kind goes on from: the key of the last row
        examined, or ``_FINISHED`` once it reached the end of its table in the current round
        (an absent kind starts from its first row)."""

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        """``JournalRetention.prune``. Without a ``limit`` every table is swept whole. With one,
        the calls sweep the tables in rounds: each call goes on from where the previous one
        stopped, a kind whose sweep reached the end of its table waits for the others, and
        the call that ends the round answers ``done`` (the next starts a new round). A dry
        run reads from the same place and moves nothing."""
        if limit is not None:
            require_limit(limit)
        await self._file.refuse_older()
        now = time.time()
        found: dict[str, Swept] = {}
        for kind in _KINDS:
            span = retention.seconds(kind.kept)
            if span is not None:
                found[kind.name] = await self._sweep(kind, now - span, limit, dry_run)
        pruned = pruned_of(found)
        if pruned.done and not dry_run:
            self._prune_cursors.clear()
        return pruned

    async def _sweep(self, kind: _Kind, cutoff: float, limit: int | None, dry_run: bool) -> Swept:
        """Examine at most ``limit`` rows of ``kind`` (all of them when None), a chunk at a
        time, and remove (or, ``dry_run``, count) those due."""
        after = None if limit is None else self._prune_cursors.get(kind.name)
        if after == _FINISHED:
            return Swept()
        left = limit
        removed = size = 0
        while True:
            most = _CHUNK if left is None else min(_CHUNK, left)
            rows = await self._file.run(
                partial(_examine, kind=kind, after=after, cutoff=cutoff, most=most)
            )
            due = [row for row in rows if row[-2]]
            if dry_run:
                removed, size = removed + len(due), size + sum(int(row[-1]) for row in due)
            elif due:
                gone, freed = await self._file.run(
                    partial(_remove, kind=kind, due=due, cutoff=cutoff)
                )
                removed, size = removed + gone, size + freed
            # Let the event loop run between two steps: a sweep must not hold it for long.
            await asyncio.sleep(0)
            ended = len(rows) < most
            after = None if ended else tuple(rows[-1][: len(kind.key)])
            if left is not None:
                left -= len(rows)
            if ended or left == 0:
                break
        if not dry_run and limit is not None:
            self._prune_cursors[kind.name] = _FINISHED if after is None else after
        return Swept(removed, size, done=after is None)
