"""The cluster journal's effect reads that have no session to go by: ``effect(key)`` and
``started_effects()``. An effect's keys, its bucket's ``effect_index`` and ``effect_started``
included, are in its session's bucket (``layout.effects``), so the effect scripts run there
unchanged; a key alone is looked for where this object last saw it (it notes the session of
every effect it begins or reads), else in every bucket's ``effect_index`` at once.

An effect key is derived from its session, so one key is never begun in two buckets unless made
by hand; such a key is kept apart in each bucket, as two effects.
"""

from __future__ import annotations

from typing import Any

from ...._core.effect_records import Effect
from .. import replies
from ..effects import RedisEffects
from ..layout import IntentHomes
from ..link import RedisLink
from .layout import BUCKETS, BucketKeys

__all__ = ["ClusterEffects"]


class ClusterEffects(RedisEffects):
    """``effect`` and ``started_effects`` for ``RedisClusterJournal``, which provides what is
    declared here."""

    _link: RedisLink
    _layout: BucketKeys
    _effect_homes: IntentHomes
    """The session of each effect key this object last saw."""

    async def effect(self, key: str) -> Effect | None:
        session_id = self._effect_homes.get(key)
        if session_id is not None:
            found = await self._effect_in(session_id, key)
            if found is not None:
                return found
        holders = [
            replies.text(reply, "an effect's session")
            for reply in await self._link.every_bucket("effect", "HGET", "effect_index", key)
            if reply is not None
        ]
        if not holders:
            self._effect_homes.forget(key)
            return None
        self._effect_homes.remember(key, holders[0])
        return await self._effect_in(holders[0], key)

    async def started_effects(self, session_id: str | None = None) -> list[Effect]:
        # The started keys of each bucket with their begin times, then each one's session from
        # its bucket's index, and the rows from each session, still started when read.
        if session_id is not None:
            numbers = [self._layout.number(session_id)]
        else:
            numbers = list(range(BUCKETS))
        commands: list[tuple[str | int, ...]] = []
        for number in numbers:
            names = self._layout.bucket(number).names
            commands.append(("ZRANGE", names["effect_started"], 0, -1, "WITHSCORES"))
        started: list[tuple[float, int, str]] = []
        for number, reply in zip(
            numbers, await self._link.fan("started_effects", commands), strict=True
        ):
            for key, score in _scored(reply):
                started.append((score, number, key))
        if not started:
            return []
        started.sort()
        by_bucket: dict[int, list[str]] = {}
        for _, number, key in started:
            by_bucket.setdefault(number, []).append(key)
        lookups = [
            ("HMGET", self._layout.bucket(number).names["effect_index"], *keys)
            for number, keys in by_bucket.items()
        ]
        by_session: dict[str, list[str]] = {}
        for keys, reply in zip(
            by_bucket.values(), await self._link.fan("started_effects", lookups), strict=True
        ):
            for key, holder in zip(keys, replies.as_list(reply, "HMGET"), strict=True):
                if holder is not None:
                    session = replies.text(holder, "an effect's session")
                    by_session.setdefault(session, []).append(key)
        rank = {key: at for at, (_, _, key) in enumerate(started)}
        found: list[Effect] = []
        for session, keys in by_session.items():
            if session_id is None or session == session_id:
                found.extend(await self._started_in(session, keys))
        found.sort(key=lambda effect: rank.get(effect.key, len(rank)))
        return found


def _scored(reply: object) -> list[tuple[str, float]]:
    """A ``ZRANGE ... WITHSCORES`` reply, as the client reads it: (member, score) pairs, or
    members and scores in turn."""
    items: list[Any] = replies.as_list(reply, "started_effects")
    if items and isinstance(items[0], list | tuple):
        pairs = [(pair[0], pair[1]) for pair in items]
    else:
        pairs = list(zip(items[::2], items[1::2], strict=True))
    return [(replies.text(member, "an effect key"), float(score)) for member, score in pairs]
