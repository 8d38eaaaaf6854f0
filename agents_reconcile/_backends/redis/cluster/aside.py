"""The cluster journal's damaged intents set aside: ``set_aside.lua`` runs in the bucket of the
intent's session, with that bucket's set-aside keys; the listing reads every bucket's at once
and orders the entries newest first by when they were set aside (positions number the entries
of one bucket only)."""

from __future__ import annotations

from ...._core.records import Decision
from ...aside import RawIntent, SetAside
from ...journal import require_limit, require_settling
from .. import replies
from ..layout import ASIDE_KEYS
from ..link import VERSION, RedisLink
from .layout import BucketKeys

__all__ = ["ClusterAside"]


class ClusterAside:
    """``set_aside`` and ``set_aside_entries`` for ``RedisClusterJournal``, which provides what
    is declared here."""

    _link: RedisLink
    _layout: BucketKeys

    async def set_aside(self, raw: RawIntent, aside: SetAside, decision: Decision) -> bool:
        require_settling(decision, settling=True)
        bucket = self._layout.of(raw.session_id)
        keys = [
            *bucket.scripted(raw.session_id),
            *(bucket.names[name].encode() for name in ASIDE_KEYS),
        ]
        args: list[str | bytes] = [
            VERSION,
            raw.intent_id,
            raw.session_id,
            raw.record,
            raw.state,
            raw.owner,
            raw.backend,
            decision.encode(),
            aside.encode(),
            str(raw.stored[3]),
        ]
        word, _ = replies.status(await self._link.script("set_aside", keys, args), "set_aside")
        if word not in ("done", "changed"):
            raise replies.unexpected("set_aside", word)
        return word == "done"

    async def set_aside_entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        require_limit(limit)
        numbered: list[tuple[float, int, int, SetAside]] = []
        for bucket, reply in enumerate(
            await self._link.every_bucket("set_aside_entries", "HGETALL", "aside")
        ):
            if isinstance(reply, dict):
                pairs = list(reply.items())
            else:
                flat = replies.as_list(reply, "set_aside_entries")
                pairs = list(zip(flat[::2], flat[1::2], strict=False))
            for number, meta in pairs:
                entry = SetAside.decode(meta)
                position = int(replies.text(number, "a position"))
                numbered.append((entry.set_aside_at, position, bucket, entry))
        numbered.sort(key=lambda found: found[:3], reverse=True)
        return [
            entry
            for _, _, _, entry in numbered
            if (session_id is None or entry.session_id == session_id)
            and (intent_id is None or entry.intent_id == intent_id)
        ][:limit]
