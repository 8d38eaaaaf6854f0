"""The cluster journal's journal-wide reads: unresolved intents of every session, decisions of
the whole journal or of one intent, the newest decision of each of many intents. Each asks every
bucket at once (one pipeline per node) and merges the answers; a read of one session asks its
bucket alone, as on one server.

Decisions are numbered per bucket, so "newest first" across buckets is by each decision's
``decided_at``, each bucket's own order kept (a merge of its lists, which are newest first by
number).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ...._core.records import BackendIdentity
from ...journal import JournalEntry
from ...rows import each
from .. import replies
from ..link import RedisLink
from ..reads import RedisReads
from .layout import BucketKeys

if TYPE_CHECKING:
    from ...._core.sealing import Keyring
    from ...lua import LuaScript

__all__ = ["ClusterReads"]


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
