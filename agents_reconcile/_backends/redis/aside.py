"""The Redis journal's aside component (``JournalAside``): damaged intents set aside
(``_backends/aside.py``). ``set_aside`` is one Lua script (``scripts/set_aside.lua``), run in
the bucket of the intent's session, that removes the intent only while its row still holds the
bytes, state and owner read, settles it and keeps the bytes. Three keys of each bucket hold
what was set aside there: a list of intent ids in order, and two hashes from a position in it
to a description and to the bytes (an entry pruned leaves an empty id at its position, so the
positions of the others stay theirs: ``retention.py``). Entries are rare, so listing reads
them all, every bucket's at once: on one server in the order they were set aside, on a
cluster newest first by when they were set aside (positions number one bucket's entries only).

Every command and script goes through the journal's link (``link.RedisLink``); an intent is
found where ``homes`` says its session is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..._core.records import Decision
from ..aside import RawIntent, SetAside, as_bytes
from ..journal import require_limit, require_settling
from . import replies
from .homes import IndexedHomes, Retry
from .layout import ASIDE_KEYS, KeyLayout
from .link import VERSION, RedisLink

if TYPE_CHECKING:
    pass

__all__ = ["ASIDE_SCRIPTS", "RedisAside"]

ASIDE_SCRIPTS: Final = ("set_aside",)
"""The scripts this half runs (``scripts/<name>.lua``), for the journal's runner."""


class RedisAside:
    """``JournalAside`` through a journal's link, over its layout (one bucket or many); an
    intent is found where ``homes`` says its session is."""

    def __init__(self, link: RedisLink, layout: KeyLayout, homes: IndexedHomes) -> None:
        self._link = link
        self._layout = layout
        self._homes = homes

    async def raw(self, intent_id: str) -> RawIntent | None:
        async def attempt(session_id: str | None) -> RawIntent | Retry | None:
            if session_id is None:
                return None
            keys = self._layout.scripted(session_id)
            args: list[str | bytes] = [session_id, "one", intent_id]
            found = replies.rows(
                await self._link.script("entries", keys, args, read_only=True), "raw_intent"
            )
            if not found:
                return Retry.MOVED
            found_id, backend, state, owner, updated, record, _, age = found[0]
            return RawIntent.of_row(
                (found_id, session_id, backend, state, owner, updated, record), age
            )

        found = await self._homes.on_intent(intent_id, attempt)
        assert found is None or isinstance(found, RawIntent)
        return found

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

    async def entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        require_limit(limit)
        found = await self._link.every_bucket("set_aside_entries", "HGETALL", "aside")
        numbered: list[tuple[float, int, int, SetAside]] = []
        for bucket, reply in enumerate(found):
            if isinstance(reply, dict):
                pairs = list(reply.items())
            else:
                flat = replies.as_list(reply, "set_aside_entries")
                pairs = list(zip(flat[::2], flat[1::2], strict=False))
            for number, meta in pairs:
                entry = SetAside.decode(meta)
                position = int(replies.text(number, "a position"))
                # One bucket: its positions are the order they were set aside in.
                at = entry.set_aside_at if len(found) > 1 else 0.0
                numbered.append((at, position, bucket, entry))
        numbered.sort(key=lambda each: each[:3], reverse=True)
        return [
            entry
            for _, _, _, entry in numbered
            if (session_id is None or entry.session_id == session_id)
            and (intent_id is None or entry.intent_id == intent_id)
        ][:limit]

    async def kept(self, intent_id: str) -> bytes | None:
        # Each bucket's order lists its intent ids by position (an entry pruned leaves an
        # empty id): the bytes are under the position of the newest that names this intent.
        orders = await self._link.every_bucket("set_aside_kept", "LRANGE", "aside_order", "0", "-1")
        for bucket, reply in enumerate(orders):
            listed = [
                replies.text(each, "an intent id")
                for each in replies.as_list(reply, "set_aside_kept")
            ]
            if intent_id not in listed:
                continue
            position = len(listed) - listed[::-1].index(intent_id)
            key = self._layout.bucket(bucket).names["aside_record"]
            [found] = await self._link.fan("set_aside_kept", [("HGET", key, str(position))])
            return None if found is None else as_bytes(found)
        return None
