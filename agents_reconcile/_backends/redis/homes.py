"""Where the Redis journal finds an intent: the session that holds it, remembered from the
last time this object saw it, else looked up in ``index``; a script that finds the intent
elsewhere says where, and the call is made again there."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

from ...errors import JournalUnavailable
from . import replies
from .layout import IntentHomes, JournalKeys

__all__ = ["RedisIntentHomes", "Retry"]

_T = TypeVar("_T")
# Attempts at an operation on an intent whose session keeps changing under it (discarded and
# recorded again elsewhere between the lookup and the script).
_ATTEMPTS: Final = 8


class Retry(enum.Enum):
    MOVED = "moved"
    """The intent's session changed between looking it up and acting on it."""


class RedisIntentHomes:
    """The intent-routing half of ``RedisJournal``, which provides what is declared here."""

    _layout: JournalKeys
    _homes: IntentHomes

    if TYPE_CHECKING:

        async def _command(self, operation: str, *args: str | bytes | int) -> object: ...

    async def _lookup(self, intent_id: str) -> str | None:
        reply = await self._command("lookup", "HGET", self._layout.names["index"], intent_id)
        if reply is None:
            self._homes.forget(intent_id)
            return None
        session_id = replies.text(reply, "an intent's session")
        self._homes.remember(intent_id, session_id)
        return session_id

    async def _lookup_again(self, intent_id: str, tried: str | None) -> str | None:
        """The session holding the intent, after ``tried`` was found not to hold it."""
        return await self._lookup(intent_id)

    async def _on_intent(
        self,
        intent_id: str,
        attempt: Callable[[str | None], Awaitable[_T | Retry | replies.Moved]],
    ) -> _T:
        """Run ``attempt`` with the session holding the intent (None when none does), again
        where the script found the intent (or after a fresh lookup) while it is elsewhere."""
        session_id = self._homes.get(intent_id)
        if session_id is None:
            session_id = await self._lookup(intent_id)
        for _ in range(_ATTEMPTS):
            result = await attempt(session_id)
            if isinstance(result, replies.Moved):
                session_id = result.holder
                if session_id is None:
                    self._homes.forget(intent_id)
                else:
                    self._homes.remember(intent_id, session_id)
                continue
            if not isinstance(result, Retry):
                return result
            session_id = await self._lookup_again(intent_id, session_id)
        raise JournalUnavailable(
            f"intent {intent_id} kept moving between sessions; try again",
        )
