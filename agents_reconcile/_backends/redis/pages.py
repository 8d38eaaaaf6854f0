"""The Redis journal's paged listings (``pending_page``, ``started_effects_page``): which rows a
page holds, and reading them.

A script can read only the keys it is given, and a session's keys carry a hash tag (blake3 of
the session id) that a script cannot compute: so a page is two round trips. The first finds
the page's ids and their sessions: for intents one ``ZRANGEBYLEX`` of the listing (every
unresolved intent as its session and id, in byte order) from the cursor on, the page and up to
``COUNT_LIMIT`` of those that follow; for effects ``started_order.lua`` (``effect_started`` by
begin time, then key). The second, ``pending_page.lua`` or ``started_rows.lua``, reads the
page's rows with the newest decision of each from the sessions' keys, and for intents counts
which of those that follow the page wait for an operator. Both are read only; the server's work
grows with the page (and the count's bound), never with the number of sessions or of pending
intents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from ..._core.records import Decision
from ..journal import COUNT_LIMIT
from ..lua import LuaScript
from ..pages import WAITING_ACTIONS
from . import replies
from .layout import listed, unlisted

__all__ = [
    "INTENT_CURSOR",
    "PAGE_SCRIPTS",
    "Started",
    "by_session",
    "listed_pairs",
    "listing_range",
    "started_page",
    "waits_raw",
]

PAGE_SCRIPTS: Final = {
    name: LuaScript("agents_reconcile._backends.redis", "scripts", name, prelude=True)
    for name in ("pending_page", "started_order", "started_rows")
}
INTENT_CURSOR: Final = (str, str)
"""An intent's sort key on Redis: its session, its id (in the listing: ``layout.listed``)."""


def listing_range(
    key: str | bytes, start: tuple[str, str] | None, limit: int
) -> tuple[str | bytes, ...]:
    """The command that reads the page's intents from the listing (``layout.LISTING``) and up
    to ``COUNT_LIMIT`` of those that follow: those after ``start`` (a cursor's session and
    id), in the listing's byte order."""
    low = b"-" if start is None else b"(" + listed(*start)
    return ("ZRANGEBYLEX", key, low, b"+", b"LIMIT", b"0", b"%d" % (limit + COUNT_LIMIT))


def listed_pairs(reply: object) -> list[tuple[str, str]]:
    """A ``listing_range`` reply as (session, intent id) pairs, in its order."""
    if not isinstance(reply, list):
        raise replies.unexpected("pending_page", reply)
    return [unlisted(replies.blob(member, "a listed intent")) for member in reply]


def by_session(ids: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(session, id) pairs grouped by session, in their order (equal sessions adjacent)."""
    groups: list[tuple[str, list[str]]] = []
    for session, ident in ids:
        if not groups or groups[-1][0] != session:
            groups.append((session, []))
        groups[-1][1].append(ident)
    return groups


def session_replies(reply: object, operation: str) -> list[tuple[str, object, object]]:
    """A rows script's {session, rows, newest} triples."""
    found: list[tuple[str, object, object]] = []
    for each_session in replies.as_list(reply, operation):
        parts = replies.as_list(each_session, operation)
        if len(parts) != 3:
            raise replies.unexpected(operation, each_session)
        found.append((replies.text(parts[0], "a session id"), parts[1], parts[2]))
    return found


def newest(triples: Sequence[object]) -> dict[str, Decision]:
    """The newest decisions a rows script read, each checked against its intent."""
    return replies.newest_decisions(list(triples))


def waits_raw(record: bytes) -> bool:
    """Whether a stored decision, read without its checks, leaves its intent to an operator
    (one that cannot be read at all is left to one too), as ``pending_page.lua`` counts."""
    try:
        body = orjson.loads(record)
    except orjson.JSONDecodeError:
        return True
    return not isinstance(body, dict) or body.get("action") in WAITING_ACTIONS


@dataclass(frozen=True)
class Started:
    """A started effect as ``started_order.lua`` names it: its key, score and session."""

    key: str
    score: float
    session_id: str

    @property
    def sort_key(self) -> tuple[float, bytes]:
        # Members of one score are in byte order in the sorted set.
        return (self.score, self.key.encode("utf-8", "surrogatepass"))


def triples(reply: object) -> list[Started]:
    found: list[Started] = []
    for value in replies.as_list(reply, "started_effects_page"):
        parts = replies.as_list(value, "started_effects_page")
        if len(parts) != 3:
            raise replies.unexpected("started_effects_page", value)
        score = replies.text(parts[1], "an effect's begin time")
        try:
            begun = float(score)
        except ValueError:
            raise replies.unexpected("started_effects_page", value) from None
        found.append(
            Started(
                replies.text(parts[0], "an effect key"), begun, replies.text(parts[2], "a session")
            )
        )
    return found


def started_page(
    reply: object, limit: int, start: tuple[float, str] | None, overdue_before: float | None
) -> tuple[list[Started], int, int]:
    """From ``started_order.lua``'s 'page' reply: the page, how many follow it, and how many
    of those were begun before ``overdue_before``."""
    parts = replies.as_list(reply, "started_effects_page")
    if len(parts) != 4:
        raise replies.unexpected("started_effects_page", reply)
    same, later = triples(parts[0]), triples(parts[1])
    following = replies.count(parts[2], "started_effects_page")
    late = replies.count(parts[3], "started_effects_page")
    if start is not None:
        floor = (start[0], start[1].encode("utf-8", "surrogatepass"))
        same = [found for found in same if found.sort_key > floor]
    candidates = same + later
    page = candidates[:limit]

    def overdue(found: Started) -> bool:
        return overdue_before is not None and found.score < overdue_before

    more = len(same) + following - len(page)
    waiting = sum(1 for found in same if overdue(found)) + late
    waiting -= sum(1 for found in page if overdue(found))
    return page, more, waiting
