"""What a Redis server holds, for an operator told there is no journal where one was expected:
the keys under a journal's prefix and the prefixes under which the server holds a journal.
Only reads, with ``SCAN`` over a bounded number of keys, so a large server is never walked in
full.

Kept apart from ``RedisJournal`` for length; it speaks through the journal's own command
sender and key layout.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from ..lua import Send
from .layout import JournalKeys

__all__ = ["RedisSurvey"]

_SCAN_STEP: Final = 1000
"""Keys a ``SCAN`` looks at per call while an operator's diagnosis looks for journals."""


class RedisSurvey:
    """The operator's look at the server, for ``RedisJournal``, which provides what is declared
    here."""

    prefix: str
    _layout: JournalKeys

    if TYPE_CHECKING:

        def _translated(self, operation: str) -> AbstractContextManager[None]: ...

        async def _send(self) -> Send: ...

    async def keys_held(self, *, most: int = 3, budget: int = 10_000) -> list[str]:
        """Up to ``most`` names of keys under this journal's prefix, found by ``SCAN`` over at
        most ``budget`` keys of the server (none: the prefix holds nothing, as far as seen)."""
        from .backend import glob_escape

        found, _ = await self._scan(f"{glob_escape(self.prefix)}:*", most, budget)
        return [key.decode("utf-8", "backslashreplace") for key in found]

    async def journal_prefixes(
        self, *, most: int = 20, budget: int = 10_000
    ) -> tuple[list[str], bool]:
        """The prefixes under which this server holds a journal (a ``PREFIX:schema`` key
        holding a version), found by ``SCAN`` over at most ``budget`` keys, up to ``most`` of
        them, sorted; and whether the scan saw every key of the server."""
        suffix = self._layout.names["schema"][len(self.prefix) :].encode()  # b":schema"
        keys, complete = await self._scan(f"*{suffix.decode()}", most, budget)
        found: list[str] = []
        with self._translated("journal_prefixes"):
            send = await self._send()
            for key in sorted(keys):
                raw = await send("GET", key)
                if isinstance(raw, bytes) and raw.strip().isdigit():
                    found.append(key[: -len(suffix)].decode("utf-8", "backslashreplace"))
        return found, complete

    async def _scan(self, pattern: str, most: int, budget: int) -> tuple[list[bytes], bool]:
        """Keys matching ``pattern``, up to ``most``, over at most ``budget`` keys scanned; and
        whether the scan went through every key."""
        found: list[bytes] = []
        with self._translated("scan"):
            send = await self._send()
            cursor = 0
            for _ in range(max(1, budget // _SCAN_STEP)):
                reply, keys = await send("SCAN", cursor, "MATCH", pattern, "COUNT", _SCAN_STEP)
                found.extend(key for key in keys if key not in found)
                cursor = int(reply)
                if cursor == 0:
                    return found[:most], len(found) <= most
                if len(found) >= most:
                    break
        return found[:most], False
