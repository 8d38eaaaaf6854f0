"""The SQLite journal's pages component (``JournalPages``): its listings of unresolved intents
and started effects a page at a time, for an operator's view of every pending intent and
started effect.

Each page is one read transaction on the journal's file (``files.JournalFile``): the page's
rows with the newest decision of each, found through ``live_unresolved`` and
``intents_by_session`` merged (or ``effects_started``) from the cursor on and
``decisions_by_intent``, then what follows the page counted through
the same index, at most ``COUNT_LIMIT`` of them. Nothing scans a table, so a page costs the
same among a million sessions as among ten.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Final

from ..._core.effect_records import Effect
from ..._core.sealing import Keyring
from ..components import COUNT_LIMIT, Page
from ..journal import JournalEntry, require_limit
from ..pages import INTENT_CURSOR, WAITING_ACTIONS, page, read_cursor
from ..rows import checked_effect, checked_entry, each
from .effects import JOURNAL_NOW
from .files import JournalFile
from .statements import newest_by_intent

__all__ = ["SQLitePages"]

_INTENT_KEY: Final = "(session_id, backend, created_at, intent_id)"
_EFFECT_KEY: Final = "(session_id, rowid)"
_EFFECT_CURSOR: Final = (str, int)
_NEWEST: Final = "(SELECT max(seq) FROM decisions WHERE intent_id = {})"
_WAITING: Final = ", ".join(f"'{action}'" for action in WAITING_ACTIONS)


def _unresolved(columns: str, where: str, limit: str) -> str:
    """The unresolved intents' ``columns`` where ``where`` holds, in the listing's order, at
    most ``limit``: live ones through ``live_unresolved`` and those recorded beside through
    ``intents_by_session``, merged as they come (each arm's parameters given in turn)."""
    return (
        f"SELECT {columns} FROM live WHERE intent_id IS NOT NULL AND {where} UNION ALL"
        f" SELECT {columns} FROM intents WHERE {where}"
        f" ORDER BY session_id, backend, created_at, intent_id LIMIT {limit}"
    )


def _intent_page(by_session: bool, from_cursor: bool) -> str:
    where = _where(by_session, from_cursor, _INTENT_KEY, "?, ?, ?, ?")
    columns = "intent_id, session_id, backend, state, owner, updated_at, record, fence, created_at"
    return (
        "SELECT i.intent_id, i.session_id, i.backend, i.state, i.owner, i.updated_at, i.record,"
        f" i.fence, i.created_at, d.session_id, d.record FROM ({_unresolved(columns, where, '?')})"
        f" AS i LEFT JOIN decisions AS d ON d.seq = {_NEWEST.format('i.intent_id')}"
    )


def _intents_after(by_session: bool) -> str:
    # The newest decision's action of each intent that follows, through decisions_by_intent.
    newest = (
        "(SELECT action FROM decisions WHERE intent_id = i.intent_id ORDER BY seq DESC LIMIT 1)"
    )
    where = _where(by_session, True, _INTENT_KEY, "?, ?, ?, ?")
    following = _unresolved("intent_id, session_id, backend, created_at", where, str(COUNT_LIMIT))
    return f"SELECT count(*), coalesce(sum({newest} IN ({_WAITING})), 0) FROM ({following}) AS i"


def _effect_page(by_session: bool, from_cursor: bool) -> str:
    where = _where(by_session, from_cursor, _EFFECT_KEY, "?, ?")
    return (
        "SELECT e.position, e.key, e.session_id, e.state, e.owner, e.record, d.session_id,"
        " d.record, e.age FROM (SELECT rowid AS position, key, session_id, state, owner, record,"
        f" {JOURNAL_NOW} - updated_at AS age"
        f" FROM effects WHERE state = 'started' AND {where} ORDER BY session_id, rowid"
        f" LIMIT ?) AS e LEFT JOIN decisions AS d ON d.seq = {_NEWEST.format('e.key')}"
    )


def _effects_after(by_session: bool) -> str:
    return (
        "SELECT count(*), coalesce(sum(overdue), 0) FROM (SELECT updated_at < ? AS overdue"
        f" FROM effects WHERE state = 'started' AND {_where(by_session, True, _EFFECT_KEY, '?, ?')}"
        f" ORDER BY session_id, rowid LIMIT {COUNT_LIMIT})"
    )


def _where(by_session: bool, from_cursor: bool, key: str, marks: str) -> str:
    # From the first row, a range on the index still (every session id is at least '').
    conditions = ["session_id = ?" if by_session else "session_id >= ''"]
    if from_cursor:
        conditions.append(f"{key} > ({marks})")
    return " AND ".join(conditions)


class SQLitePages:
    """``JournalPages`` on a journal's file, its records opened with the journal's keyring."""

    def __init__(self, file: JournalFile, keyring: Keyring) -> None:
        self._file = file
        self._keyring = keyring

    async def intents(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        require_limit(limit)
        start = () if after is None else read_cursor(after, INTENT_CURSOR)
        by_session = session_id is not None
        page_sql = _intent_page(by_session, bool(start))
        after_sql = _intents_after(by_session)
        chosen = (session_id,) if by_session else ()

        def read(conn: sqlite3.Connection) -> tuple[list[Any], tuple[int, int]]:
            return _read_page(
                conn, page_sql, after_sql, chosen, start, limit, _intent_sort, (), arms=2
            )

        rows, (more, waiting) = await self._file.run(read)
        keyring = self._keyring
        entries = each(
            rows,
            lambda row: _entry(row, keyring),
            lambda row: ("intent", row[0], row[1]),
        )
        newest = newest_by_intent(
            [(row[0], row[9], row[10]) for row in rows if row[10] is not None]
        )
        last = _intent_sort(rows[-1]) if rows else None
        return page(entries, newest, more=more, waiting=waiting, last=last)

    async def started_effects(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        require_limit(limit)
        start = () if after is None else read_cursor(after, _EFFECT_CURSOR)
        by_session = session_id is not None
        page_sql = _effect_page(by_session, bool(start))
        after_sql = _effects_after(by_session)
        chosen = (session_id,) if by_session else ()
        overdue = (overdue_before,)

        def read(conn: sqlite3.Connection) -> tuple[list[Any], tuple[int, int]]:
            return _read_page(
                conn, page_sql, after_sql, chosen, start, limit, _effect_sort, overdue
            )

        rows, (more, waiting) = await self._file.run(read)
        keyring = self._keyring
        effects = each(
            rows,
            lambda row: checked_effect(
                row[1], row[2], row[3], row[4], bytes(row[5]), keyring, age=row[8]
            ),
            lambda row: ("effect", row[1], row[2]),
        )
        newest = newest_by_intent([(row[1], row[6], row[7]) for row in rows if row[7] is not None])
        last = _effect_sort(rows[-1]) if rows else None
        return page(effects, newest, more=more, waiting=waiting, last=last)

    async def counts_writes_of(self, session_id: str) -> bool:
        row = await self._file.run(
            lambda conn: conn.execute(
                "SELECT 1 FROM live WHERE session_id = ? LIMIT 1", (session_id,)
            ).fetchone()
        )
        return row is not None


def _read_page(
    conn: sqlite3.Connection,
    page_sql: str,
    after_sql: str,
    chosen: tuple[object, ...],
    start: tuple[object, ...],
    limit: int,
    sort_key: Callable[[Any], tuple[Any, ...]],
    leading: tuple[object, ...],
    *,
    arms: int = 1,
) -> tuple[list[Any], tuple[int, int]]:
    """A page's rows, in the listing's order, and (count, waiting) of the rows after it: in
    one read transaction, so that both see the same journal. ``arms``: the tables a listing
    merges, each given the session and the cursor in turn."""
    # (The link rolls back a transaction an error leaves open.)
    conn.execute("BEGIN")
    rows = conn.execute(page_sql, (*chosen, *start) * arms + (limit,)).fetchall()
    # The page's own order (the join leaves it to the planner), sorted here: a few rows.
    rows.sort(key=sort_key)
    counted = (0, 0)
    if len(rows) == limit:
        following = (*chosen, *sort_key(rows[-1])) * arms
        found = conn.execute(after_sql, (*leading, *following)).fetchone()
        counted = (int(found[0]), int(found[1]))
    conn.execute("COMMIT")
    return rows, counted


def _intent_sort(row: Any) -> tuple[str, str, float, str]:
    return (row[1], row[2], row[8], row[0])


def _effect_sort(row: Any) -> tuple[str, int]:
    return (row[2], row[0])


def _entry(row: Any, keyring: Keyring) -> JournalEntry:
    intent_id, session_id, backend, state, owner, updated_at, record, fence = row[:8]
    return checked_entry(
        intent_id, session_id, backend, state, owner, updated_at, record, keyring, fence=fence
    )
