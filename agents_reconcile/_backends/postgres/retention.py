"""The PostgreSQL journal's retention component (``JournalRetention``): the rule of
``_core/retention.py``, by sweeps that add nothing to an append's work.

Counts and the floor. Every statement that raises a session's count stamps its row's
``counted_at`` with the journal's clock (the server's). A session without a row reads as the
journal's floor (``write_floor``, one row: the highest count pruned), and a statement that
makes a session's row makes it at the floor (plus the write it counts) with the floor read
``FOR SHARE`` (``statements.made_at_floor``), so no row is made below a floor raised meanwhile.
There is no index on ``counted_at``: every append updates its session's row, and an index on
a column it changes would cost each of those updates an index entry (no HOT update). Idle
counts are found by sweeping the primary key instead.

The sweep. ``prune`` sweeps each table in its key order (decisions and set-aside entries by
``seq``, effects by ``key``, counts by session and backend), from a cursor this object keeps
in memory, a chunk at a time. A chunk is read in one statement, which says of each row
whether it is due; the due rows are then deleted by statements that check the rule again on
each row, in the step that deletes:

* counts: one statement takes the floor's row ``FOR UPDATE`` first (every statement that
  takes both takes them in this order), then the counts' rows ``FOR UPDATE``, then deletes
  each count that still holds the value read, is still idle and whose session has no
  unresolved intent, and raises the floor to the highest count deleted. A locking read and a
  DELETE evaluate their WHERE on the newest version of a row, and every intent recorded or
  removed counts a write of its session under that row's lock: a count still at the value
  read shows that no intent came or went since the chunk was read (whose snapshot showed
  none), whatever this statement's own snapshot shows.
* decisions: a transaction takes the floor's row ``FOR UPDATE`` and the rows of the
  decisions' sessions ``FOR SHARE`` (an intent is recorded only under its session's row
  lock, or while making that row under the floor's), then deletes, in a snapshot taken once
  they are held, the decisions still older than the retention whose intent is not
  unresolved, of a session whose row it holds or that has none.
* set-aside entries and receipts: one DELETE each, checking the age again (and that the
  effect is done and its session has no unresolved intent, whose batch may hold the output
  the receipt vouches for; an intent committed while that very statement runs is not seen
  by it, which only a receipt older than the retention when its output is saved could meet).

A pruner never waits for a writer, and no writer waits for a pruner longer than one of its
statements: the floor is taken ``NOWAIT`` (taken by a statement making a session's row, the
chunk is tried again a moment later, then left for the next call, which is then not
``done``), and a session's row that a writer holds is passed over (``SKIP LOCKED``: it is
not idle; a decision of its session waits for the next pass). The decisions' transaction,
the one that holds the floor between statements, ends the pruner's connection if it stalls
there (``idle_in_transaction_session_timeout``), which gives the floor back. Every statement
runs on the journal's database (``database.JournalDatabase``).
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..._core.retention import Kept, Pruned, Retention
from ..journal import require_limit
from ..sweeps import Swept, pruned_of
from .statements import _NOW

if TYPE_CHECKING:
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PostgresRetention", "row_known"]


_CHUNK: Final = 500
"""Rows examined per read (and deleted per statement) while pruning."""
_FINISHED: Final[tuple[Any, ...]] = ("finished",)
"""The cursor of a kind whose limited sweep reached the end of its table this round."""
_TRIES: Final = 3
"""Attempts at a chunk's removal while the floor is taken, a moment apart."""
_PAUSE: Final = 0.01
_STALL_LIMIT_MS: Final = 5000
"""How long the decisions' transaction may stand idle (a pruner stalled while holding the
floor) before the server ends its connection, in milliseconds."""
_LOCK_NOT_AVAILABLE: Final = "55P03"
_CUTOFF: Final = f"{_NOW} - $1::float8"
"""The time before which a row is due: the journal's clock now, less the retention ($1)."""


def _size(*columns: str) -> str:
    """The bytes ``columns`` of the row ``r`` hold as stored (text as UTF-8, bytea as is)."""
    return " + ".join(f"octet_length(r.{column})" for column in columns)


@dataclass(frozen=True)
class _Kind:
    """One kind of row ``prune`` removes: its table (aliased ``r``), the key it is swept and
    deleted by, and its rule (an SQL condition on ``r``, with the retention as ``$1``)."""

    name: str
    """The ``Pruned`` field that counts it."""
    kept: Kept
    """The retention span that keeps it."""
    table: str
    key: tuple[tuple[str, str], ...]
    """The key's columns, each with its SQL type."""
    due: str
    size: str
    same: tuple[tuple[str, str], ...] = ()
    """Columns that must still hold what was read for the row to go (a count: its value)."""
    rows: str = "true"
    """Which rows of the table are of this kind (an SQL condition on ``r``)."""
    raises_floor: bool = False
    """Deleted under the rows' locks, raising the floor to the highest (a count)."""
    locks_sessions: bool = False
    """Deleted under the locks of the rows' sessions (a decision)."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a due row is deleted by: its key, then ``same``."""
        return tuple(column for column, _ in (*self.key, *self.same))


_KINDS: Final = (
    _Kind(
        "decisions",
        "decisions",
        "decisions",
        (("seq", "bigint"),),
        f"r.decided_at < {_CUTOFF} AND NOT EXISTS (SELECT 1 FROM {{s}}.intents AS i"
        " WHERE i.intent_id = r.intent_id)",
        _size("intent_id", "session_id", "backend", "outcome", "reason", "action", "record"),
        locks_sessions=True,
    ),
    _Kind(
        "set_aside",
        "decisions",
        "set_aside",
        (("seq", "bigint"),),
        f"r.set_aside_at < {_CUTOFF}",
        _size("intent_id", "session_id", "meta", "record"),
    ),
    _Kind(
        "receipts",
        "receipts",
        "effects",
        (("key", "text"),),
        # A receipt of a session with an unresolved intent stays: that intent's batch may hold
        # the output it vouches for (checked before the intent is accepted or replayed).
        f"r.state = 'done' AND r.updated_at < {_CUTOFF} AND NOT EXISTS (SELECT 1 FROM"
        " {s}.intents AS i WHERE i.session_id = r.session_id)",
        _size("key", "session_id", "state", "owner", "record"),
    ),
    _Kind(
        "write_counts",
        "idle_sessions",
        "slots",
        (("session_id", "text"), ("backend", "text")),
        # A session's slot 0 without a live intent, and nothing recorded beside it.
        f"r.counted_at < {_CUTOFF} AND r.intent_id IS NULL AND NOT EXISTS (SELECT 1 FROM"
        " {s}.slots AS i WHERE i.session_id = r.session_id AND i.backend = r.backend"
        " AND i.slot > 0)",
        _size("session_id", "backend"),
        same=(("write_count", "bigint"),),
        raises_floor=True,
        rows="r.slot = 0",
    ),
)


@dataclass(frozen=True)
class _Statements:
    """The pruning statements of one schema (its quoted name)."""

    schema: str

    def examine(self, kind: _Kind, from_cursor: bool) -> str:
        """Parameters: the retention, the cursor's values (when ``from_cursor``), the limit.
        Rows: the columns a row is deleted by, whether it is due, its size, and for a
        decision its session and backend."""
        key = ", ".join(f"r.{column}" for column, _ in kind.key)
        after = f" WHERE {kind.rows}"
        if from_cursor:
            values = ", ".join(f"${n}" for n in range(2, len(kind.key) + 2))
            after += f" AND ({key}) > ({values})"
        sessions = ", r.session_id AS of_session, r.backend AS of_backend"
        return (
            f"SELECT {', '.join(f'r.{column}' for column in kind.columns)},"
            f" ({kind.due.format(s=self.schema)}) AS due, {kind.size} AS size"
            f"{sessions if kind.locks_sessions else ''}"
            f" FROM {self.schema}.{kind.table} AS r{after}"
            f" ORDER BY {key} LIMIT ${len(kind.key) + 2 if from_cursor else 2}"
        )

    def remove(self, kind: _Kind) -> str:
        """Parameters: the retention, then one array per column a row is deleted by (for a
        decision, then the sessions and backends whose rows are held). Rows: the size of each
        row deleted."""
        s = self.schema
        columns = [*kind.key, *kind.same]
        arrays = ", ".join(f"${n}::{kind_type}[]" for n, (_, kind_type) in enumerate(columns, 2))
        names = ", ".join(column for column, _ in columns)
        match = " AND ".join(f"r.{column} = c.{column}" for column, _ in columns)
        match += f" AND {kind.rows}"
        due = f"{match} AND {kind.due.format(s=s)}"
        if kind.locks_sessions:
            held = len(columns) + 2
            # Of a session whose row this transaction holds, or that has none (none can be
            # made while the floor is held).
            due += (
                f" AND ((r.session_id, r.backend) IN (SELECT * FROM unnest(${held}::text[],"
                f" ${held + 1}::text[])) OR NOT EXISTS (SELECT 1 FROM {s}.slots AS w"
                " WHERE w.session_id = r.session_id AND w.backend = r.backend AND w.slot = 0))"
            )
        if not kind.raises_floor:
            return (
                f"DELETE FROM {s}.{kind.table} AS r USING unnest({arrays}) AS c({names})"
                f" WHERE {due} RETURNING {kind.size} AS size"
            )
        # The floor's lock first (a one-time filter, evaluated before any row is read), then
        # the counts' rows, then the counts deleted and the floor raised to the highest of
        # them, in one statement.
        return (
            f"WITH floor AS MATERIALIZED (SELECT write_count FROM {s}.write_floor WHERE id = 0"
            " FOR UPDATE NOWAIT),"
            f" held AS MATERIALIZED (SELECT r.session_id, r.backend FROM {s}.{kind.table} AS r,"
            f" unnest({arrays}) AS c({names}) WHERE {match} AND EXISTS (SELECT 1 FROM floor)"
            " FOR UPDATE OF r SKIP LOCKED),"
            f" gone AS (DELETE FROM {s}.{kind.table} AS r USING held AS h,"
            f" unnest({arrays}) AS c({names}) WHERE r.session_id = h.session_id"
            f" AND r.backend = h.backend AND {due} RETURNING r.write_count, {kind.size} AS size),"
            f" raised AS (UPDATE {s}.write_floor SET write_count = greatest(write_count,"
            " (SELECT max(write_count) FROM gone)) WHERE id = 0 AND EXISTS (SELECT 1 FROM gone))"
            " SELECT size FROM gone"
        )

    @property
    def lock_sessions(self) -> str:
        """Bounds how long this transaction may stand idle ($3, milliseconds), takes the
        floor's row ``FOR UPDATE``, then those of the rows of the sessions ($1) and backends
        ($2) that no writer holds ``FOR SHARE``; returns their sessions and backends."""
        s = self.schema
        return (
            "WITH bounded AS MATERIALIZED (SELECT set_config("
            "'idle_in_transaction_session_timeout', $3::text, true)),"
            f" floor AS MATERIALIZED (SELECT 1 FROM {s}.write_floor WHERE id = 0"
            " AND EXISTS (SELECT 1 FROM bounded) FOR UPDATE NOWAIT)"
            f" SELECT w.session_id, w.backend FROM {s}.slots AS w,"
            " unnest($1::text[], $2::text[]) AS c(session_id, backend)"
            " WHERE w.session_id = c.session_id AND w.backend = c.backend AND w.slot = 0"
            " AND EXISTS (SELECT 1 FROM floor) FOR SHARE OF w SKIP LOCKED"
        )


@functools.cache
def _statements(schema: str) -> _Statements:
    return _Statements(schema)


# -- sessions whose count rows this process made or met -------------------------------------------

_ROWS: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()
_REMEMBERED: Final = 65536


def row_known(key: tuple[str, str, str, str], *, made: bool = False) -> bool:
    """Whether this process made or met, lately, the count row of ``key`` (the journal's
    location and schema, a session, a backend); ``made``: remember that it did. A hint only:
    a statement that takes the row to be there finds it missing when it was pruned since,
    and the row is then made on the locked path (``lock_session``)."""
    if key in _ROWS:
        _ROWS.move_to_end(key)
        return True
    if made:
        _ROWS[key] = None
        while len(_ROWS) > _REMEMBERED:
            _ROWS.popitem(last=False)
    return False


async def _examine(
    conn: Connection,
    kind: _Kind,
    after: tuple[Any, ...] | None,
    span: float,
    most: int,
    schema: str,
) -> list[Any]:
    """Up to ``most`` rows of ``kind`` after ``after`` (from the first when None), in key
    order, as ``_Statements.examine`` reads them."""
    sql = _statements(schema).examine(kind, after is not None)
    rows: list[Any] = await conn.fetch(sql, span, *(after or ()), most)
    return rows


async def _remove(
    conn: Connection, kind: _Kind, due: Sequence[Any], span: float, schema: str
) -> tuple[int, int] | None:
    """Delete the rows ``due`` names, each only while its rule still holds; (rows removed,
    their bytes), or None when the floor was taken (nothing was removed)."""
    statements = _statements(schema)
    arrays = [[row[column] for row in due] for column in kind.columns]
    try:
        if kind.locks_sessions:
            sessions = sorted({(row["of_session"], row["of_backend"]) for row in due})
            async with conn.transaction():
                held = await conn.fetch(
                    statements.lock_sessions,
                    [session for session, _ in sessions],
                    [backend for _, backend in sessions],
                    str(_STALL_LIMIT_MS),
                )
                await _held(conn)
                gone = await conn.fetch(
                    statements.remove(kind),
                    span,
                    *arrays,
                    [row["session_id"] for row in held],
                    [row["backend"] for row in held],
                )
        else:
            gone = await conn.fetch(statements.remove(kind), span, *arrays)
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
            raise
        return None
    return len(gone), sum(int(row["size"]) for row in gone)


async def _held(conn: Connection) -> None:
    """The moment between taking the decisions' locks and deleting them: nothing happens here
    (a test stalls a pruner here, to see the server end its transaction)."""


class PostgresRetention:
    """``JournalRetention`` in a journal's database, with the cursors it keeps."""

    def __init__(self, db: JournalDatabase) -> None:
        self._db = db
        self._prune_cursors: dict[str, tuple[Any, ...]] = {}
        """Where the sweep of each kind goes on from (the key of the last row examined); an
        absent kind starts from its first row."""

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
        found: dict[str, Swept] = {}
        for kind in _KINDS:
            span = retention.seconds(kind.kept)
            if span is not None:
                found[kind.name] = await self._sweep(kind, span, limit, dry_run)
        pruned = pruned_of(found)
        if pruned.done and not dry_run:
            self._prune_cursors.clear()
        return pruned

    async def _sweep(self, kind: _Kind, span: float, limit: int | None, dry_run: bool) -> Swept:
        """Examine at most ``limit`` rows of ``kind`` (all of them when None), a chunk at a
        time, and remove (or, ``dry_run``, count) those due."""
        cursors = self._prune_cursors
        schema = self._db.sql.schema
        after = None if limit is None else cursors.get(kind.name)
        if after == _FINISHED:
            return Swept()
        left = limit
        removed = size = 0
        whole = True  # False once a chunk's due rows were left (the floor was taken)
        while True:
            most = _CHUNK if left is None else min(_CHUNK, left)
            rows = await self._db.run(
                functools.partial(
                    _examine, kind=kind, after=after, span=span, most=most, schema=schema
                )
            )
            due = [row for row in rows if row["due"]]
            if dry_run:
                removed, size = removed + len(due), size + sum(int(row["size"]) for row in due)
            elif due:
                freed = await self._remove(kind, due, span)
                if freed is None:
                    whole = False
                else:
                    removed, size = removed + freed[0], size + freed[1]
            ended = len(rows) < most
            after = None if ended else tuple(rows[-1][column] for column, _ in kind.key)
            if left is not None:
                left -= len(rows)
            if ended or left == 0:
                break
        if not dry_run and limit is not None:
            if after is not None:
                cursors[kind.name] = after
            elif whole:
                cursors[kind.name] = _FINISHED
            else:  # rows due were left behind a taken floor: this kind starts again
                cursors.pop(kind.name, None)
        return Swept(removed, size, done=after is None and whole)

    async def _remove(self, kind: _Kind, due: list[Any], span: float) -> tuple[int, int] | None:
        """``_remove`` of a chunk, tried again a moment later while the floor is taken."""
        work = functools.partial(_remove, kind=kind, due=due, span=span, schema=self._db.sql.schema)
        for attempt in range(_TRIES):
            if attempt:
                await asyncio.sleep(_PAUSE)
            freed = await self._db.run(work)
            if freed is not None:
                return freed
        return None
