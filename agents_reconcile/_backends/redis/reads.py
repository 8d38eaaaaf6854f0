"""The Redis journal's reads: unresolved intents (by session, or every session through
``index``), one intent where its session holds it, whether an intent is settled, and the
decision log. As every read does, each first makes sure of the schema version, once per journal
object (the journal's ``_script`` and ``_command``).

Kept apart from ``RedisJournal`` for length; it speaks through the journal's own script
runner, command sender, key layout, intent routing and keyring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from ..._core.records import BackendIdentity, Decision
from ..._core.sealing import Keyring
from ..journal import JournalEntry, require_limit
from ..rows import each
from . import replies
from .homes import Retry
from .layout import JournalKeys

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["RedisReads"]

_T = TypeVar("_T")


class RedisReads:
    """``pending``, ``get``, ``is_settled`` and ``decisions`` for ``RedisJournal``, which
    provides what is declared here."""

    keyring: Keyring
    _layout: JournalKeys

    if TYPE_CHECKING:

        async def _script(
            self, name: str, keys: list[bytes], args: list[str | bytes], *, read_only: bool = False
        ) -> object: ...

        async def _command(self, operation: str, *args: str | bytes | int) -> object: ...

        async def _on_intent(
            self,
            intent_id: str,
            attempt: Callable[[str | None], Awaitable[_T | Retry | replies.Moved]],
        ) -> _T: ...

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        if session_id is not None:
            return await self._session_entries(session_id, backend)
        reply = await self._command("pending", "HVALS", self._layout.names["index"])
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
        found = replies.rows(await self._script("entries", keys, args, read_only=True), "pending")
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
            found = replies.rows(await self._script("entries", keys, args, read_only=True), "get")
            if not found:
                return Retry.MOVED
            if len(found) != 1 or found[0][0] != intent_id:
                raise replies.unexpected("get", found)
            return replies.entry(session_id, found[0], self.keyring)

        return await self._on_intent(intent_id, attempt)

    async def is_settled(self, intent_id: str) -> bool:
        reply = await self._command(
            "is_settled", "SISMEMBER", self._layout.names["settled"], intent_id
        )
        if reply not in (0, 1):
            raise replies.unexpected("is_settled", reply)
        return reply == 1

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        by_session = session_id is not None and intent_id is None
        keys = list(self._layout.globals)
        if session_id is not None and intent_id is None:
            keys += self._layout.session(session_id)
        args: list[str | bytes] = [
            "0" if intent_id is None else "1",
            "" if intent_id is None else intent_id,
            str(limit),
            "1" if by_session else "0",
        ]
        reply = await self._script("decisions", keys, args, read_only=True)
        return replies.decisions(reply, session_id=session_id, intent_id=intent_id, limit=limit)

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        ids = list(dict.fromkeys(intent_ids))
        if not ids:
            return {}
        reply = await self._script(
            "newest_decisions", list(self._layout.globals), list(ids), read_only=True
        )
        return replies.newest_decisions(reply)
