"""The Redis journal's pages component (``JournalPages``): its listings of unresolved intents
and started effects a page at a time, on a server or a cluster alike.

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

On a cluster each step asks every bucket at once (one pipeline per node: ``link.fan``): each
bucket's listing from the cursor on, merged in byte order as on one server, then the rows in
each bucket holding a session of the page or an intent after it (whose newest decision it
judges: that decision is in the same bucket); each bucket's first ``limit`` started effects
after the cursor, the page the first ``limit`` of them all, and what follows it counted over
every bucket. On one server the same steps are one command each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from ..._core.effect_records import Effect
from ..._core.records import Decision
from ..._core.sealing import Keyring
from ..components import COUNT_LIMIT, Page
from ..journal import JournalEntry, require_limit
from ..lua import LuaScript
from ..pages import WAITING_ACTIONS, page, read_cursor
from ..rows import each
from . import replies
from .layout import (
    COUNTS,
    EFFECT_INDEX,
    EFFECT_STARTED,
    LISTING,
    SESSION_KEYS,
    JournalKeys,
    KeyLayout,
    listed,
    unlisted,
)
from .link import RedisLink

__all__ = [
    "INTENT_CURSOR",
    "PAGE_SCRIPTS",
    "RedisPages",
    "by_session",
    "listing_range",
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


def _effect_globals(bucket: JournalKeys) -> list[bytes]:
    names = bucket.names
    return [
        *bucket.globals,
        names[EFFECT_INDEX].encode("utf-8"),
        names[EFFECT_STARTED].encode("utf-8"),
    ]


class RedisPages:
    """``JournalPages`` through a journal's link, over its layout (one bucket or many), its
    records opened with the journal's keyring."""

    def __init__(self, link: RedisLink, layout: KeyLayout, keyring: Keyring) -> None:
        self._link = link
        self._layout = layout
        self._keyring = keyring

    # -- unresolved intents ----------------------------------------------------------------

    async def intents(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        require_limit(limit)
        start = None if after is None else read_cursor(after, INTENT_CURSOR)
        layout = self._layout
        if session_id is not None:
            return await self._one_session(session_id, limit, start)
        ranges = [listing_range(bucket.names[LISTING], start, limit) for bucket in layout.buckets()]
        members: list[bytes] = []
        for reply in await self._link.fan("pending_page", ranges):
            members += [
                replies.blob(m, "a listed intent") for m in replies.as_list(reply, "pending_page")
            ]
        members.sort()
        chosen = [unlisted(member) for member in members]
        shown, rest = chosen[:limit], chosen[limit : limit + COUNT_LIMIT]
        if not shown:
            return Page(rows=[], more=len(rest), after=None)
        # The page ends where the listings said, whether or not its last intent is still
        # there when its row is read.
        last = shown[-1]
        groups: dict[int, list[tuple[str, list[str]]]] = {}
        following: dict[int, list[str]] = {}
        for session, ids in by_session(shown):
            groups.setdefault(layout.number(session), []).append((session, ids))
        for session, ident in rest:
            following.setdefault(layout.number(session), []).append(ident)
        script = PAGE_SCRIPTS["pending_page"]
        calls = []
        for number in sorted(set(groups) | set(following)):
            bucket = layout.bucket(number)
            keys = list(bucket.globals)
            args: list[str | bytes] = [str(len(groups.get(number, [])))]
            for session, ids in groups.get(number, []):
                keys += bucket.session(session)
                args += [session, str(len(ids)), *ids]
            calls.append((script, keys, [*args, *following.get(number, [])]))
        found: list[tuple[str, replies.Row]] = []
        decided: list[object] = []
        waiting = 0
        for reply in await self._link.fan_scripts("pending_page", calls):
            parts = replies.as_list(reply, "pending_page")
            if len(parts) != 2:
                raise replies.unexpected("pending_page", reply)
            for session, rows, triples_found in session_replies(parts[0], "pending_page"):
                found += [(session, row) for row in replies.rows(rows, "pending_page")]
                decided += replies.as_list(triples_found, "pending_page")
            waiting += replies.count(parts[1], "pending_page")
        found.sort(key=lambda pair: (pair[0], pair[1][0]))
        return self._intent_page(found, decided, more=len(rest), waiting=waiting, last=last)

    async def _one_session(
        self, session_id: str, limit: int, start: tuple[str, str] | None
    ) -> Page[JournalEntry]:
        bucket = self._layout.of(session_id)
        keys = [*bucket.globals, *bucket.session(session_id)]
        [reply] = await self._link.fan_scripts(
            "pending_page", [(PAGE_SCRIPTS["pending_page"], keys, ["1", session_id, "all"])]
        )
        parts = replies.as_list(reply, "pending_page")
        if len(parts) != 2:
            raise replies.unexpected("pending_page", reply)
        found: list[tuple[str, replies.Row]] = []
        decided: list[object] = []
        for session, rows, triples_found in session_replies(parts[0], "pending_page"):
            found += [(session, row) for row in replies.rows(rows, "pending_page")]
            decided += replies.as_list(triples_found, "pending_page")
        # One session: paged here, by id, from every intent it holds.
        found.sort(key=lambda pair: (pair[0], pair[1][0]))
        found = [pair for pair in found if start is None or (pair[0], pair[1][0]) > start]
        found, following = found[:limit], found[limit : limit + COUNT_LIMIT]
        last = (found[-1][0], found[-1][1][0]) if found else None
        known = {str(each[0]): each for each in map(_triple, decided)}
        rest = [row[0] for _, row in following]
        waiting = sum(1 for ident in rest if ident in known and waits_raw(known[ident][2]))
        return self._intent_page(found, decided, more=len(rest), waiting=waiting, last=last)

    def _intent_page(
        self,
        found: list[tuple[str, replies.Row]],
        decided: list[object],
        *,
        more: int,
        waiting: int,
        last: tuple[str, str] | None,
    ) -> Page[JournalEntry]:
        keyring = self._keyring
        entries = each(
            found,
            lambda pair: replies.entry(pair[0], pair[1], keyring),
            lambda pair: ("intent", pair[1][0], pair[0]),
        )
        shown_ids = {row[0] for _, row in found}
        newest_found = newest([value for value in decided if _triple(value)[0] in shown_ids])
        return page(entries, newest_found, more=more, waiting=waiting, last=last)

    # -- started effects -------------------------------------------------------------------

    async def started_effects(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        require_limit(limit)
        start = None if after is None else read_cursor(after, (float, str))
        script = PAGE_SCRIPTS["started_order"]

        def overdue(found: Started) -> bool:
            return overdue_before is not None and found.score < overdue_before

        floor = None if start is None else (start[0], start[1].encode("utf-8", "surrogatepass"))
        if session_id is None:
            args: list[str | bytes] = [
                "page",
                str(limit),
                "" if start is None else repr(start[0]),
                "" if overdue_before is None else repr(overdue_before),
            ]
            calls = [(script, _effect_globals(bucket), args) for bucket in self._layout.buckets()]
            candidates: list[Started] = []
            counted = late = 0
            for reply in await self._link.fan_scripts("started_effects_page", calls):
                parts = replies.as_list(reply, "started_effects_page")
                if len(parts) != 4:
                    raise replies.unexpected("started_effects_page", reply)
                same = [
                    found for found in triples(parts[0]) if floor is None or found.sort_key > floor
                ]
                candidates += same + triples(parts[1])
                counted += len(same) + replies.count(parts[2], "started_effects_page")
                late += sum(1 for found in same if overdue(found))
                late += replies.count(parts[3], "started_effects_page")
            candidates.sort(key=lambda found: found.sort_key)
            shown = candidates[:limit]
            more = counted - len(shown)
            waiting = late - sum(1 for found in shown if overdue(found))
        else:
            call = (script, _effect_globals(self._layout.of(session_id)), ["session"])
            [reply] = await self._link.fan_scripts("started_effects_page", [call])
            mine = sorted(
                (found for found in triples(reply) if found.session_id == session_id),
                key=lambda found: found.sort_key,
            )
            if floor is not None:
                mine = [found for found in mine if found.sort_key > floor]
            shown, rest = mine[:limit], mine[limit:]
            more = len(rest)
            waiting = sum(1 for found in rest if overdue(found))
        effects, decided = await self._started_rows(shown)
        last = (shown[-1].score, shown[-1].key) if shown else None
        return page(effects, decided, more=more, waiting=waiting, last=last)

    async def counts_writes_of(self, session_id: str) -> bool:
        counts = self._layout.session(session_id)[SESSION_KEYS.index(COUNTS)]
        return bool(await self._link.command("counts_writes_of", "EXISTS", counts))

    async def _started_rows(self, shown: list[Started]) -> tuple[list[Effect], dict[str, Decision]]:
        """The rows of a page of started effects, in its order, with their newest decisions:
        ``started_rows.lua`` in each bucket holding one of them, at once."""
        groups: dict[int, list[tuple[str, list[str]]]] = {}
        for session, effect_keys in by_session(
            sorted((found.session_id, found.key) for found in shown if found.session_id)
        ):
            groups.setdefault(self._layout.number(session), []).append((session, effect_keys))
        calls = []
        for number, sessions in sorted(groups.items()):
            bucket = self._layout.bucket(number)
            globals_ = _effect_globals(bucket)
            keys = list(globals_)
            args: list[str | bytes] = [str(len(sessions))]
            for session, wanted in sessions:
                keys += bucket.effects(session)[len(globals_) :]
                args += [session, str(len(wanted)), *wanted]
            calls.append((PAGE_SCRIPTS["started_rows"], keys, args))
        found_replies = await self._link.fan_scripts("started_effects_page", calls)
        rows: dict[str, tuple[str, replies.EffectRow]] = {}
        decided: list[object] = []
        for reply in found_replies:
            for session, found, triples_found in session_replies(reply, "started_effects_page"):
                for row in replies.effect_rows(found, "started_effects_page"):
                    rows[row[0]] = (session, row)
                decided += replies.as_list(triples_found, "started_effects_page")
        ordered = [rows[found.key] for found in shown if found.key in rows]
        keyring = self._keyring
        effects = each(
            ordered,
            lambda pair: replies.effect(pair[0], pair[1], keyring),
            lambda pair: ("effect", pair[1][0], pair[0]),
        )
        return effects, newest(decided)


def _triple(value: object) -> tuple[str, str, bytes]:
    parts = replies.as_list(value, "pending_page")
    if len(parts) != 3:
        raise replies.unexpected("pending_page", value)
    return (
        replies.text(parts[0], "an intent id"),
        replies.text(parts[1], "a decision's number"),
        replies.blob(parts[2], "a decision's record"),
    )
