"""Paging a journal's listings (``PagedReading``): the cursors journals give as ``Page.after``,
and the paging of rows held in memory, shared by ``MemoryJournal`` and by ``status`` on a
journal that does not page itself.

A cursor is the sort key of the last row of a page, as a JSON array: the journal that gave it
reads it back with ``read_cursor`` and lists what follows that key. Nothing else is in it, so
a row settled between two pages moves no other row from one page to another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import orjson

from .._core.records import Action, Decision
from .._effects.records import Effect
from .journal import JournalEntry, Page, require_limit

__all__ = [
    "EFFECT_CURSOR",
    "INTENT_CURSOR",
    "WAITING_ACTIONS",
    "cursor",
    "effect_key",
    "intent_key",
    "page_in_memory",
    "read_cursor",
    "waits",
]

_K = TypeVar("_K", bound=tuple[Any, ...])
_R = TypeVar("_R")

WAITING_ACTIONS: Final = (Action.DENIED.value, Action.LEFT_PENDING.value)
"""The actions of a newest decision that leave an intent to an operator."""
INTENT_CURSOR: Final = (str, str, float, str)
"""An intent's sort key in the SQL journals and in memory: session, backend, creation time,
id (the order of the index ``intents_by_session``, whose entries end with the id)."""
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


async def page_in_memory(
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
    """A page of ``rows`` held in memory, sorted by ``key``: those after the cursor ``after``
    (``shape``: its values' types), with the newest decision of each (``newest(ids)``, a
    coroutine function giving them by id) and ``waiting(row, newest)`` counted over the rows
    that follow."""
    require_limit(limit)
    start = None if after is None else read_cursor(after, shape)
    keyed = sorted(((key(row), row) for row in rows), key=lambda pair: pair[0])
    following = [pair for pair in keyed if start is None or pair[0] > start]
    shown, rest = following[:limit], following[limit:]
    found: dict[str, Decision] = await newest([ident(row) for _, row in following])
    return Page(
        rows=[row for _, row in shown],
        newest={ident(row): found[ident(row)] for _, row in shown if ident(row) in found},
        more=len(rest),
        more_waiting=sum(1 for _, row in rest if waiting(row, found.get(ident(row)))),
        after=cursor(*shown[-1][0]) if rest else None,
    )
