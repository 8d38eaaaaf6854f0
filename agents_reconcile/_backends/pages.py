"""Paging a journal's listings (``JournalPages``): the cursors journals give as ``Page.after``,
a page built from its last row's key (``page``), and the paging of rows held in memory, shared
by the memory journal's pages and by ``status`` on a journal that has none.

A cursor is the sort key of the last row of a page, as a JSON array: the journal that gave it
reads it back with ``read_cursor`` and lists what follows that key. Nothing else is in it, so
a row settled between two pages moves no other row from one page to another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import orjson

from .._core.effect_records import Effect
from .._core.records import Action, Decision
from .components import COUNT_LIMIT, Page
from .journal import JournalEntry, require_limit

__all__ = [
    "EFFECT_CURSOR",
    "INTENT_CURSOR",
    "WAITING_ACTIONS",
    "cursor",
    "effect_key",
    "effects_in_memory",
    "intent_key",
    "intents_in_memory",
    "page",
    "read_cursor",
    "waits",
]

_K = TypeVar("_K", bound=tuple[Any, ...])
_R = TypeVar("_R")

WAITING_ACTIONS: Final = (Action.DENIED.value, Action.LEFT_PENDING.value)
"""The actions of a newest decision that leave an intent to an operator."""
INTENT_CURSOR: Final = (str, str, float, str)
"""An intent's sort key in the SQL journals and in memory: session, backend, creation time,
id (the order of the SQL journals' indexes of unresolved intents, whose entries end with the
id)."""
EFFECT_CURSOR: Final = (float, str)
"""A started effect's sort key in memory (and on PostgreSQL): when it began, its key."""


def cursor(*values: str | float | int) -> str:
    """The cursor of a page whose last row has the sort key ``values``."""
    return orjson.dumps(list(values)).decode()


def read_cursor(after: str, shape: Sequence[type]) -> tuple[Any, ...]:
    """The sort key a cursor holds, checked against ``shape`` (the type of each value);
    ``ValueError`` when it is not a cursor of that shape (another listing's, or not one)."""
    try:
        values = orjson.loads(after)
    except (orjson.JSONDecodeError, TypeError):
        values = None
    if not isinstance(values, list) or len(values) != len(shape):
        raise ValueError(f"{after!r} is not a cursor of this listing")
    found: list[Any] = []
    for value, kind in zip(values, shape, strict=True):
        if isinstance(value, bool):
            raise ValueError(f"{after!r} is not a cursor of this listing")
        if kind is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, kind):
            raise ValueError(f"{after!r} is not a cursor of this listing")
        found.append(value)
    return tuple(found)


def intent_key(entry: JournalEntry) -> tuple[str, str, float, str]:
    intent = entry.intent
    return (intent.session_id, str(intent.backend), intent.created_at, intent.intent_id)


def effect_key(effect: Effect) -> tuple[float, str]:
    return (effect.started_at, effect.key)


def waits(decision: Decision | None) -> bool:
    """Whether a newest decision leaves its intent to an operator."""
    return decision is not None and decision.action.value in WAITING_ACTIONS


def page(
    rows: list[_R],
    newest: dict[str, Decision],
    *,
    more: int,
    waiting: int,
    last: Sequence[str | float | int] | None,
) -> Page[_R]:
    """A page whose last row (listed, or left out as damaged) has the sort key ``last``: the
    cursor to the next page only when ``more`` rows follow."""
    after = cursor(*last) if last is not None and more else None
    return Page(rows=rows, newest=newest, more=more, more_waiting=waiting, after=after)


async def intents_in_memory(
    entries: Iterable[JournalEntry],
    *,
    limit: int,
    after: str | None,
    newest: Callable[[list[str]], Any],
) -> Page[JournalEntry]:
    """A page of unresolved intents held in memory, in the SQL journals' order
    (``newest(ids)``: a coroutine function giving the newest decisions by intent id)."""
    return await _in_memory(
        entries,
        intent_key,
        limit=limit,
        after=after,
        shape=INTENT_CURSOR,
        ident=lambda entry: entry.intent.intent_id,
        newest=newest,
        waiting=lambda _, decision: waits(decision),
    )


async def effects_in_memory(
    effects: Iterable[Effect],
    *,
    limit: int,
    after: str | None,
    newest: Callable[[list[str]], Any],
    overdue_before: float | None,
) -> Page[Effect]:
    """A page of started effects held in memory, oldest begun first; those that follow it
    and were begun before ``overdue_before`` are counted as waiting."""
    return await _in_memory(
        effects,
        effect_key,
        limit=limit,
        after=after,
        shape=EFFECT_CURSOR,
        ident=lambda effect: effect.key,
        newest=newest,
        waiting=lambda effect, _: overdue_before is not None and effect.started_at < overdue_before,
    )


async def _in_memory(
    rows: Iterable[_R],
    key: Callable[[_R], _K],
    *,
    limit: int,
    after: str | None,
    shape: Sequence[type],
    ident: Callable[[_R], str],
    newest: Callable[[list[str]], Any],
    waiting: Callable[[_R, Decision | None], bool],
) -> Page[_R]:
    require_limit(limit)
    start = None if after is None else read_cursor(after, shape)
    keyed = sorted(((key(row), row) for row in rows), key=lambda pair: pair[0])
    following = [pair for pair in keyed if start is None or pair[0] > start]
    shown, rest = following[:limit], following[limit : limit + COUNT_LIMIT]
    ids = [ident(row) for _, row in shown + rest]
    # Nothing to read for an empty page: no call at all, not even one that finds nothing.
    found: dict[str, Decision] = await newest(ids) if ids else {}
    return page(
        [row for _, row in shown],
        {ident(row): found[ident(row)] for _, row in shown if ident(row) in found},
        more=len(rest),
        waiting=sum(1 for _, row in rest if waiting(row, found.get(ident(row)))),
        last=shown[-1][0] if shown else None,
    )
