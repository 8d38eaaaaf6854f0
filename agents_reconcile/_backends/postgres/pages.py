"""The PostgreSQL journal's pages component (``JournalPages``): its listings of unresolved
intents and started effects a page at a time, one statement per page, built once per schema and
variant, run on the journal's database (``database.JournalDatabase``); records are decoded,
and so checked, with the journal's keyring.

A page's statement finds its rows through an index from the cursor on (``slots_unresolved``,
whose order is the listing's: session, backend, creation time, then the id to break ties;
``effects_started`` for started effects, by begin time and key), joins the newest decision of
each row through ``decisions_by_intent``, and counts the rows that follow the page (at most
``COUNT_LIMIT``), and which of them may wait for an operator, only when the page is full. One
round trip, whatever the journal holds beside the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..._core.effect_records import Effect
from ..._core.sealing import Keyring
from ..components import COUNT_LIMIT, Page
from ..journal import JournalEntry, require_limit
from ..pages import EFFECT_CURSOR, INTENT_CURSOR, WAITING_ACTIONS, page, read_cursor
from ..rows import checked_decision, checked_effect, each
from .answers import _entry
from .statements import _NOW

if TYPE_CHECKING:
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PageStatements", "PostgresPages", "page_statements"]

_WAITING: Final = ", ".join(f"'{action}'" for action in WAITING_ACTIONS)
_INTENT_ORDER: Final = ("session_id", "backend", "created_at", "intent_id")
_EFFECT_ORDER: Final = ("created_at", "key")


def _newest(schema: str, row: str, columns: str) -> str:
    """The newest decision about ``row`` (an intent id or effect key expression)."""
    return (
        f"(SELECT {columns} FROM {schema}.decisions AS x WHERE x.intent_id = {row}"
        " ORDER BY x.seq DESC LIMIT 1)"
    )


@dataclass(frozen=True)
class PageStatements:
    """The page statements of one schema (its quoted name)."""

    schema: str

    def intents(self, by_session: bool, from_cursor: bool) -> str:
        """Parameters: the session (when ``by_session``), the cursor's four values (when
        ``from_cursor``), the limit. Rows: an intent's nine columns as ``answers._entry``
        reads them, its creation time, the newest decision's session and record (or nulls),
        then the count of the rows that follow and of those waiting."""
        s = self.schema
        args = _Args()
        session = f"session_id = {args.next()}" if by_session else ""
        key = _after(_INTENT_ORDER, [args.next() for _ in _INTENT_ORDER]) if from_cursor else ""
        limit = args.next()
        page_where = _all(session, key)
        follows = _all(
            f"i.{session}" if session else "",
            _after([f"i.{c}" for c in _INTENT_ORDER], [f"last.{c}" for c in _INTENT_ORDER]),
        )
        order = ", ".join(_INTENT_ORDER)
        action = _newest(s, "a.intent_id", "x.action")
        return (
            "WITH page AS (SELECT intent_id, session_id, backend, state, owner, updated_at,"
            f" record, fence, {_NOW} - updated_at AS age, created_at FROM {s}.intents"
            f"{page_where} ORDER BY {order} LIMIT {limit}),"
            f" last AS (SELECT {order} FROM page ORDER BY {_descending(_INTENT_ORDER)} LIMIT 1),"
            f" follows AS (SELECT i.intent_id FROM {s}.intents AS i, last{follows}"
            f" AND (SELECT count(*) FROM page) = {limit}"
            f" ORDER BY {', '.join(f'i.{c}' for c in _INTENT_ORDER)} LIMIT {COUNT_LIMIT}),"
            " counted AS (SELECT count(*) AS more,"
            f" count(*) FILTER (WHERE {action} IN ({_WAITING})) AS waiting FROM follows AS a)"
            " SELECT p.intent_id, p.session_id, p.backend, p.state, p.owner, p.updated_at,"
            " p.record, p.fence, p.age, p.created_at, d.session_id AS decided_in,"
            " d.record AS decision, c.more, c.waiting FROM page AS p CROSS JOIN counted AS c"
            f" LEFT JOIN LATERAL {_newest(s, 'p.intent_id', 'x.session_id, x.record')} AS d"
            f" ON true ORDER BY {', '.join(f'p.{c}' for c in _INTENT_ORDER)}"
        )

    def effects(self, by_session: bool, from_cursor: bool) -> str:
        """Parameters: the session (when ``by_session``), the cursor's two values (when
        ``from_cursor``), the limit, the overdue time (or null). Rows: an effect's key,
        session, state, owner and record, its begin time, the newest decision's session and
        record (or nulls), its age by the server's clock, then the count of the rows that
        follow and of those overdue."""
        s = self.schema
        args = _Args()
        session = f"session_id = {args.next()}" if by_session else ""
        key = _after(_EFFECT_ORDER, [args.next() for _ in _EFFECT_ORDER]) if from_cursor else ""
        limit, overdue = args.next(), args.next()
        page_where = _all("state = 'started'", session, key)
        follows = _all(
            "e.state = 'started'",
            f"e.{session}" if session else "",
            _after([f"e.{c}" for c in _EFFECT_ORDER], [f"last.{c}" for c in _EFFECT_ORDER]),
        )
        order = ", ".join(_EFFECT_ORDER)
        return (
            "WITH page AS (SELECT key, session_id, state, owner, record, created_at,"
            f" {_NOW} - updated_at AS age"
            f" FROM {s}.effects{page_where} ORDER BY {order} LIMIT {limit}),"
            f" last AS (SELECT {order} FROM page ORDER BY {_descending(_EFFECT_ORDER)} LIMIT 1),"
            f" follows AS (SELECT e.updated_at FROM {s}.effects AS e, last{follows}"
            f" AND (SELECT count(*) FROM page) = {limit}"
            f" ORDER BY {', '.join(f'e.{c}' for c in _EFFECT_ORDER)} LIMIT {COUNT_LIMIT}),"
            " counted AS (SELECT count(*) AS more,"
            f" count(*) FILTER (WHERE updated_at < {overdue}::float8) AS waiting FROM follows)"
            " SELECT p.key, p.session_id, p.state, p.owner, p.record, p.created_at,"
            " d.session_id AS decided_in, d.record AS decision, p.age, c.more, c.waiting"
            " FROM page AS p CROSS JOIN counted AS c"
            f" LEFT JOIN LATERAL {_newest(s, 'p.key', 'x.session_id, x.record')} AS d"
            f" ON true ORDER BY {', '.join(f'p.{c}' for c in _EFFECT_ORDER)}"
        )


@cache
def page_statements(schema: str) -> PageStatements:
    return PageStatements(schema)


class _Args:
    """Numbers parameters in the order they are asked for."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"${self.count}"


def _after(columns: list[str] | tuple[str, ...], values: list[str]) -> str:
    # A row comparison: an index whose leading columns are these ranges over it.
    return f"({', '.join(columns)}) > ({', '.join(values)})"


def _all(*conditions: str) -> str:
    chosen = [condition for condition in conditions if condition]
    return f" WHERE {' AND '.join(chosen)}" if chosen else ""


def _descending(columns: tuple[str, ...]) -> str:
    return ", ".join(f"{column} DESC" for column in columns)


class PostgresPages:
    """``JournalPages`` in a journal's database, its records opened with the journal's
    keyring."""

    def __init__(self, db: JournalDatabase, keyring: Keyring) -> None:
        self._db = db
        self._keyring = keyring
        self._statements = page_statements(db.sql.schema)

    async def intents(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        require_limit(limit)
        start = () if after is None else read_cursor(after, INTENT_CURSOR)
        sql = self._statements.intents(session_id is not None, bool(start))
        args = [*([] if session_id is None else [session_id]), *start, limit]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        rows = await self._db.run(work)
        keyring = self._keyring
        entries = each(
            rows,
            lambda row: _entry(tuple(row)[:9], keyring),
            lambda row: ("intent", row[0], row[1]),
        )
        last = rows[-1] if rows else None
        return _page(entries, rows, None if last is None else (last[1], last[2], last[9], last[0]))

    async def started_effects(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        require_limit(limit)
        start = () if after is None else read_cursor(after, EFFECT_CURSOR)
        sql = self._statements.effects(session_id is not None, bool(start))
        args = [*([] if session_id is None else [session_id]), *start, limit, overdue_before]

        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(sql, *args)

        rows = await self._db.run(work)
        keyring = self._keyring
        effects = each(
            rows,
            lambda row: checked_effect(
                row[0], row[1], row[2], row[3], row[4], keyring, age=row["age"]
            ),
            lambda row: ("effect", row[0], row[1]),
        )
        last = rows[-1] if rows else None
        return _page(effects, rows, None if last is None else (last[5], last[0]))

    async def counts_writes_of(self, session_id: str) -> bool:
        schema = self._statements.schema
        sql = f"SELECT 1 FROM {schema}.slots WHERE session_id = $1 AND slot = 0 LIMIT 1"

        async def work(conn: Connection) -> object:
            return await conn.fetchval(sql, session_id)

        return await self._db.run(work) is not None


_R = TypeVar("_R")


def _page(found: list[_R], rows: list[Any], last: tuple[str | float, ...] | None) -> Page[_R]:
    """A page of ``found`` (the rows decoded; ``last``, the last row's sort key), with the
    newest decisions and counts its statement's ``rows`` carry (the first column the id, the
    last four the decision's session and record, the count of what follows and of those
    waiting)."""
    decided = [(row[0], row["decided_in"], row["decision"]) for row in rows if row["decision"]]
    newest = each(
        decided, lambda row: checked_decision(*row), lambda row: ("decision", row[0], row[1])
    )
    return page(
        found,
        {decision.intent_id: decision for decision in newest},
        more=int(rows[0]["more"]) if rows else 0,
        waiting=int(rows[0]["waiting"]) if rows else 0,
        last=last,
    )
