"""The cluster journal's paged listings (``pending_page``, ``started_effects_page``), with the
same pages and cursors as on one server (``reads.py``, ``pages.py``), read bucket by bucket.

Unresolved intents: every bucket's listing from the cursor on at once (one pipeline per node),
each bucket's page and up to ``COUNT_LIMIT`` after it, merged in byte order as on one server;
then the page's rows with ``pending_page.lua`` in each bucket holding a session of the page or
an intent after it (whose newest decision it judges: that decision is in the same bucket), again
at once. Started effects: ``started_order.lua`` in every bucket, each giving its first
``limit`` after the cursor; the page is the first ``limit`` of them all, and what follows it is
counted over every bucket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...._core.effect_records import Effect
from ...._core.records import Decision
from ...journal import COUNT_LIMIT, JournalEntry, Page, require_limit
from ...pages import page, read_cursor
from ...rows import each
from .. import replies
from ..layout import EFFECT_INDEX, EFFECT_STARTED, LISTING, JournalKeys, unlisted
from ..link import RedisLink
from ..pages import (
    INTENT_CURSOR,
    PAGE_SCRIPTS,
    Started,
    by_session,
    listing_range,
    newest,
    session_replies,
    triples,
    waits_raw,
)
from ..reads import _triple, started_rows
from .layout import BUCKETS, BucketKeys

if TYPE_CHECKING:
    from ...._core.sealing import Keyring

__all__ = ["ClusterPages"]


def _effect_globals(bucket: JournalKeys) -> list[bytes]:
    names = bucket.names
    return [
        *bucket.globals,
        names[EFFECT_INDEX].encode("utf-8"),
        names[EFFECT_STARTED].encode("utf-8"),
    ]


class ClusterPages:
    """``pending_page`` and ``started_effects_page`` for ``RedisClusterJournal``, which
    provides what is declared here."""

    _link: RedisLink
    keyring: Keyring
    _layout: BucketKeys

    # -- unresolved intents --------------------------------------------------------------------

    async def pending_page(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        require_limit(limit)
        start = None if after is None else read_cursor(after, INTENT_CURSOR)
        layout = self._layout
        if session_id is not None:
            return await self._one_session_page(session_id, limit, start)
        ranges = [
            listing_range(layout.bucket(number).names[LISTING], start, limit)
            for number in range(BUCKETS)
        ]
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
        # The page ends where the indexes said, whether or not its last intent is still there
        # when its row is read.
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

    async def _one_session_page(
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
        keyring = self.keyring
        entries = each(
            found,
            lambda pair: replies.entry(pair[0], pair[1], keyring),
            lambda pair: ("intent", pair[1][0], pair[0]),
        )
        shown_ids = {row[0] for _, row in found}
        newest_found = newest([value for value in decided if _triple(value)[0] in shown_ids])
        return page(entries, newest_found, more=more, waiting=waiting, last=last)

    # -- started effects -----------------------------------------------------------------------

    async def started_effects_page(
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
            calls = [
                (script, _effect_globals(self._layout.bucket(number)), args)
                for number in range(BUCKETS)
            ]
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
        effects, decided = await self._started_page_rows(shown)
        last = (shown[-1].score, shown[-1].key) if shown else None
        return page(effects, decided, more=more, waiting=waiting, last=last)

    async def _started_page_rows(
        self, shown: list[Started]
    ) -> tuple[list[Effect], dict[str, Decision]]:
        """The rows of a page of started effects, in its order, with their newest decisions."""
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
        found = await self._link.fan_scripts("started_effects_page", calls)
        return started_rows(list(found), shown, self.keyring)
