"""The Redis journal's sealing component (``JournalSealing``): the ids of the keys its
deployment seals under, members of one set under ``<prefix>:sealing``, outside the buckets on a
cluster. The set appears with its first member, so it needs no layout step (a journal without
it was never sealed), and the layout names it among the journal's keys, so it goes with them
when the journal is dropped."""

from __future__ import annotations

from collections.abc import Sequence

from .layout import SEALING
from .link import RedisLink

__all__ = ["RedisSealing"]


class RedisSealing:
    """``JournalSealing`` through a journal's link, under its ``prefix``."""

    def __init__(self, link: RedisLink, prefix: str) -> None:
        self._link = link
        self._key = f"{prefix}:{SEALING}"

    async def keys(self) -> frozenset[str]:
        found = await self._link.command("sealing_keys", "SMEMBERS", self._key)
        members = found if isinstance(found, list | set | tuple) else ()
        return frozenset(
            member.decode() if isinstance(member, bytes) else str(member) for member in members
        )

    async def mark(self, key_ids: Sequence[str]) -> None:
        if key_ids:
            await self._link.command("mark_sealing", "SADD", self._key, *key_ids)
