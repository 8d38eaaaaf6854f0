"""The Redis journal's reads: unresolved intents (by session, or every session through
``index``), one intent where its session holds it, whether an intent is settled, the decision
log, and the pages of the listings of unresolved intents and started effects (``pages``). As
every read does, each first makes sure of the schema version, once per journal object (the
link's ``script`` and ``command``, and ``_page_script`` here).

Every command and script goes through the journal's link (``link.RedisLink``); an intent is
found where ``homes`` says its session is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from ..._core.effect_records import Effect
from ..._core.records import BackendIdentity, Decision
from ..._core.sealing import Keyring
from ..journal import COUNT_LIMIT, JournalEntry, Page, require_limit
from ..pages import page, read_cursor
from ..rows import each
from . import replies
from .homes import IndexedHomes, Retry
from .layout import EFFECT_INDEX, EFFECT_STARTED, LISTING, JournalKeys
from .link import RedisLink
from .pages import (
    INTENT_CURSOR,
    PAGE_SCRIPTS,
    Started,
    by_session,
    listed_pairs,
    listing_range,
    newest,
    session_replies,
    started_page,
    triples,
    waits_raw,
)

if TYPE_CHECKING:
    pass

__all__ = ["RedisReads"]

_T = TypeVar("_T")


class RedisReads:
    """``pending``, ``get``, ``is_settled`` and ``decisions`` for ``RedisJournal``, which
    provides what is declared here."""

    _link: RedisLink
    _homes: IndexedHomes
    keyring: Keyring
    _layout: JournalKeys

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        if session_id is not None:
            return await self._session_entries(session_id, backend)
        reply = await self._link.command("pending", "HVALS", self._layout.names["index"])
        sessions = sorted(
            {
                replies.text(value, "an intent's session")
                for value in replies.as_list(reply, "pending")
            }
        )
        found: list[JournalEntry] = []
        for session in sessions:
            found.extend(await self._session_entries(session, backend))
        # Each session's rows are oldest first already; a stable sort merges them.
        found.sort(key=lambda entry: entry.intent.created_at)
        return found

    async def _session_entries(
        self, session_id: str, backend: BackendIdentity | None
    ) -> list[JournalEntry]:
        args: list[str | bytes] = [
            session_id,
            "all",
            "0" if backend is None else "1",
            "" if backend is None else str(backend),
        ]
        keys = self._layout.scripted(session_id)
        found = replies.rows(
            await self._link.script("entries", keys, args, read_only=True), "pending"
        )
        keyring = self.keyring
        return each(
            found,
            lambda row: replies.entry(session_id, row, keyring),
            lambda row: ("intent", row[0], session_id),
        )

    async def get(self, intent_id: str) -> JournalEntry | None:
        async def attempt(session_id: str | None) -> JournalEntry | Retry | None:
            if session_id is None:
                return None
            keys = self._layout.scripted(session_id)
            args: list[str | bytes] = [session_id, "one", intent_id]
            found = replies.rows(
                await self._link.script("entries", keys, args, read_only=True), "get"
            )
            if not found:
                return Retry.MOVED
            if len(found) != 1 or found[0][0] != intent_id:
                raise replies.unexpected("get", found)
            return replies.entry(session_id, found[0], self.keyring)

        return await self._homes.on_intent(intent_id, attempt)

    async def is_settled(self, intent_id: str) -> bool:
        reply = await self._link.command(
            "is_settled", "SISMEMBER", self._layout.names["settled"], intent_id
        )
        if reply not in (0, 1):
            raise replies.unexpected("is_settled", reply)
        return reply == 1

    # -- pages (``pages.py``) ---------------------------------------------------------------

    async def _page_script(self, name: str, keys: list[bytes], args: list[str | bytes]) -> object:
        """Run a read-only script of ``pages.py``, the schema version checked first, once."""
        with self._link.translated(name):
            send = await self._link.send()
            if not self._link.schema_checked:
                await self._link.ensure_schema(send)
            return await PAGE_SCRIPTS[name].run(send, keys, args)

    async def pending_page(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        require_limit(limit)
        start = None if after is None else read_cursor(after, INTENT_CURSOR)
        layout = self._layout
        if session_id is None:
            reply = await self._link.command(
                "pending_page", *listing_range(layout.names[LISTING], start, limit)
            )
            chosen = listed_pairs(reply)
            shown, rest = chosen[:limit], [ident for _, ident in chosen[limit:]]
            groups = by_session(shown)
            # The page ends where the index said, whether or not its last intent is still
            # there when its row is read.
            last = shown[-1] if shown else None
        else:
            groups, rest = [(session_id, [])], []
        keys = list(layout.globals)
        args: list[str | bytes] = [str(len(groups))]
        for session, ids in groups:
            keys += layout.session(session)
            args += [session, str(len(ids)) if session_id is None else "all", *ids]
        if not groups:
            return Page(rows=[], more=len(rest), after=None)
        reply = replies.as_list(
            await self._page_script("pending_page", keys, [*args, *rest]), "pending_page"
        )
        if len(reply) != 2:
            raise replies.unexpected("pending_page", reply)
        found: list[tuple[str, replies.Row]] = []
        decided: list[object] = []
        for session, rows, triples_found in session_replies(reply[0], "pending_page"):
            found += [(session, row) for row in replies.rows(rows, "pending_page")]
            decided += replies.as_list(triples_found, "pending_page")
        waiting = replies.count(reply[1], "pending_page")
        if session_id is not None:
            # One session: paged here, by id, from every intent it holds.
            found.sort(key=lambda pair: (pair[0], pair[1][0]))
            found = [pair for pair in found if start is None or (pair[0], pair[1][0]) > start]
            found, following = found[:limit], found[limit : limit + COUNT_LIMIT]
            last = (found[-1][0], found[-1][1][0]) if found else None
            known = {str(each[0]): each for each in map(_triple, decided)}
            rest = [row[0] for _, row in following]
            waiting = sum(1 for ident in rest if ident in known and waits_raw(known[ident][2]))
        keyring = self.keyring
        entries = each(
            found,
            lambda pair: replies.entry(pair[0], pair[1], keyring),
            lambda pair: ("intent", pair[1][0], pair[0]),
        )
        shown_ids = {row[0] for _, row in found}
        newest_found = newest([value for value in decided if _triple(value)[0] in shown_ids])
        return page(entries, newest_found, more=len(rest), waiting=waiting, last=last)

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
        names = self._layout.names
        globals_ = [
            *self._layout.globals,
            names[EFFECT_INDEX].encode("utf-8"),
            names[EFFECT_STARTED].encode("utf-8"),
        ]
        if session_id is None:
            args: list[str | bytes] = [
                "page",
                str(limit),
                "" if start is None else repr(start[0]),
                "" if overdue_before is None else repr(overdue_before),
            ]
            reply = await self._page_script("started_order", globals_, args)
            shown, more, waiting = started_page(reply, limit, start, overdue_before)
        else:
            reply = await self._page_script("started_order", globals_, ["session"])
            mine = sorted(
                (found for found in triples(reply) if found.session_id == session_id),
                key=lambda found: found.sort_key,
            )
            if start is not None:
                floor = (start[0], start[1].encode("utf-8", "surrogatepass"))
                mine = [found for found in mine if found.sort_key > floor]
            shown, following = mine[:limit], mine[limit:]
            more = len(following)
            waiting = sum(
                1
                for found in following
                if overdue_before is not None and found.score < overdue_before
            )
        effects, decided = await self._started_rows(globals_, shown)
        last = (shown[-1].score, shown[-1].key) if shown else None
        return page(effects, decided, more=more, waiting=waiting, last=last)

    async def _started_rows(
        self, globals_: list[bytes], page: list[Started]
    ) -> tuple[list[Effect], dict[str, Decision]]:
        """The rows of a page of started effects, in its order, with their newest decisions."""
        groups = by_session((found.session_id, found.key) for found in page if found.session_id)
        if not groups:
            return [], {}
        keys = list(globals_)
        args: list[str | bytes] = [str(len(groups))]
        for session, effect_keys in groups:
            keys += self._layout.effects(session)[len(globals_) :]
            args += [session, str(len(effect_keys)), *effect_keys]
        reply = await self._page_script("started_rows", keys, args)
        return started_rows([reply], page, self.keyring)


def started_rows(
    found_replies: list[object], shown: list[Started], keyring: Keyring
) -> tuple[list[Effect], dict[str, Decision]]:
    """The effects ``started_rows.lua`` replied with (one reply per script run), in the
    page's order, and the newest decision about each."""
    rows: dict[str, tuple[str, replies.EffectRow]] = {}
    decided: list[object] = []
    for reply in found_replies:
        for session, found, triples_found in session_replies(reply, "started_effects_page"):
            for row in replies.effect_rows(found, "started_effects_page"):
                rows[row[0]] = (session, row)
            decided += replies.as_list(triples_found, "started_effects_page")
    ordered = [rows[found.key] for found in shown if found.key in rows]
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
