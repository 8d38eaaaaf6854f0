"""The Redis journal's reads: unresolved intents (by session, or every session through
``index``), one intent where its session holds it, whether an intent is settled. As every read
does, each first makes sure of the schema version, once per journal object (the link's
``script`` and ``command``).

Every command and script goes through the journal's link (``link.RedisLink``); an intent is
found where ``homes`` says its session is.
"""

from __future__ import annotations

from ..._core.records import BackendIdentity
from ..._core.sealing import Keyring
from ..journal import JournalEntry
from ..rows import each
from . import replies
from .homes import IndexedHomes, Retry
from .layout import JournalKeys
from .link import RedisLink

__all__ = ["RedisReads"]


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
