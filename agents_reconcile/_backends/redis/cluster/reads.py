"""The cluster journal's journal-wide reads: unresolved intents of every session, decisions of
the whole journal or of one intent, the newest decision of each of many intents. Each asks every
bucket at once (one pipeline per node) and merges the answers; a read of one session asks its
bucket alone, as on one server.

Decisions are numbered per bucket, so "newest first" across buckets is by each decision's
``decided_at``, each bucket's own order kept (a merge of its lists, which are newest first by
number).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ...._core.records import BackendIdentity, Decision
from ...journal import JournalEntry, require_limit
from ...rows import each
from .. import replies
from ..link import RedisLink
from ..reads import RedisReads
from .layout import BUCKETS, BucketKeys

if TYPE_CHECKING:
    from ...._core.sealing import Keyring
    from ...lua import LuaScript

__all__ = ["ClusterReads", "newest_first"]


def newest_first(lists: Sequence[list[Decision]], limit: int) -> list[Decision]:
    """The first ``limit`` of several lists of decisions, each newest first, merged by
    ``decided_at`` (the newest head first; the lists' own order kept)."""
    heap: list[tuple[float, int, int]] = [
        (-found[0].decided_at, number, 0) for number, found in enumerate(lists) if found
    ]
    heapq.heapify(heap)
    merged: list[Decision] = []
    while heap and len(merged) < limit:
        _, number, at = heapq.heappop(heap)
        merged.append(lists[number][at])
        if at + 1 < len(lists[number]):
            heapq.heappush(heap, (-lists[number][at + 1].decided_at, number, at + 1))
    return merged


class ClusterReads(RedisReads):
    """``pending``, ``decisions`` and ``newest_decisions`` for ``RedisClusterJournal``, which
    provides what is declared here."""

    _link: RedisLink
    keyring: Keyring
    _layout: BucketKeys
    _scripts: ClassVar[dict[str, LuaScript]]

    async def _sessions(self, operation: str) -> list[str]:
        """Every session holding an unresolved intent (by every bucket's ``index``), sorted."""
        found: set[str] = set()
        for reply in await self._link.every_bucket(operation, "HVALS", "index"):
            found.update(
                replies.text(value, "an intent's session")
                for value in replies.as_list(reply, operation)
            )
        return sorted(found)

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        if session_id is not None:
            return await self._session_entries(session_id, backend)
        sessions = await self._sessions("pending")
        filtered = ["0", ""] if backend is None else ["1", str(backend)]
        calls = [
            (
                self._link.scripts["entries"],
                self._layout.scripted(session),
                [session, "all", *filtered],
            )
            for session in sessions
        ]
        found: list[JournalEntry] = []
        for session, reply in zip(
            sessions, await self._link.fan_scripts("pending", calls), strict=True
        ):
            found.extend(self._entries_of(session, reply))
        # Each session's rows are oldest first already; a stable sort merges them.
        found.sort(key=lambda entry: entry.intent.created_at)
        return found

    def _entries_of(self, session_id: str, reply: object) -> list[JournalEntry]:
        """A session's rows as ``entries.lua`` answered them, each checked."""
        keyring = self.keyring
        return each(
            replies.rows(reply, "pending"),
            lambda row: replies.entry(session_id, row, keyring),
            lambda row: ("intent", row[0], session_id),
        )

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        by_intent = ["0", ""] if intent_id is None else ["1", intent_id]
        if session_id is not None:
            # Decisions filed under a session are in its bucket.
            bucket = self._layout.of(session_id)
            keys = list(bucket.globals)
            if intent_id is None:
                keys += bucket.session(session_id)
            args: list[str | bytes] = [*by_intent, str(limit), "0" if intent_id else "1"]
            reply = await self._link.script("decisions", keys, args, read_only=True)
            return replies.decisions(reply, session_id=session_id, intent_id=intent_id, limit=limit)
        script = self._link.scripts["decisions"]
        calls = [
            (script, self._layout.bucket(number).globals, [*by_intent, str(limit), "0"])
            for number in range(BUCKETS)
        ]
        lists = [
            replies.decisions(reply, session_id=None, intent_id=intent_id, limit=limit)
            for reply in await self._link.fan_scripts("decisions", calls)
        ]
        return newest_first(lists, limit)

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        if not ids:
            return {}
        script = self._link.scripts["newest_decisions"]
        calls = [(script, self._layout.bucket(number).globals, ids) for number in range(BUCKETS)]
        newest: dict[str, Decision] = {}
        for reply in await self._link.fan_scripts("newest_decisions", calls):
            for intent_id, decision in replies.newest_decisions(reply).items():
                kept = newest.get(intent_id)
                if kept is None or decision.decided_at > kept.decided_at:
                    newest[intent_id] = decision
        return newest
