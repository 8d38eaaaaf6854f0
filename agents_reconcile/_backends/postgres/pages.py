"""The PostgreSQL journal's paged listings (``pending_page``, ``started_effects_page``): one
statement per page, built once per schema and variant.

A page's statement finds its rows through an index from the cursor on (``intents_by_session``,
whose order is the listing's: session, backend, creation time, then the id to break ties;
``effects_started`` for started effects, by begin time and key), joins the newest decision of
each row through ``decisions_by_intent``, and counts the rows that follow the page (at most
``COUNT_LIMIT``), and which of them may wait for an operator, only when the page is full. One
round trip, whatever the journal holds beside the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

from ..journal import COUNT_LIMIT
from ..pages import WAITING_ACTIONS
from .statements import _NOW

__all__ = ["PageStatements", "page_statements"]

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
