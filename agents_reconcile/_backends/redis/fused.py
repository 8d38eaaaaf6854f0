"""The Redis journal's half of a fused append (``_session/fused.py``): ``open_intent`` and a
revisioned Redis store's compare-and-swap append as one script, ``open_and_append.lua``.

Kept apart from ``RedisJournal`` because only a journal paired with a store on its own server
uses it; the journal runs the script (``RedisJournal.open_by_script``: its keys and arguments
for the intent, and the intent remembered where it lives), and this reads the store's part of
what it answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ..._core.ownership import Owner
from ..._core.records import PendingWrite
from ..fused import Fused
from ..journal import IntentState, Opened
from ..store_items import encode_item
from . import replies
from .journal import RedisJournal

if TYPE_CHECKING:
    from .store import RevisionedRedisSession

__all__ = ["Fused", "Pair", "open_and_append"]

_SCRIPT = "open_and_append"
_ANSWERS: Final = frozenset({"recorded", "head", "known", "stale_state"})
"""The words of a three-part reply of the script's own (the others are ``open_intent``'s)."""


async def open_and_append(
    journal: RedisJournal,
    intent: PendingWrite,
    *,
    owner: Owner,
    clearing: str | None,
    seen_write_count: int | None,
    store_keys: list[bytes],
    writer: str,
    rows: list[bytes],
) -> Fused:
    """``open_intent`` (in flight, under ``owner``) and the store's compare-and-swap append of
    ``rows`` at ``intent.expected_revision`` under the intent's id, as one script. Nothing is
    recorded unless the append is made, and the reverse. ``seen_write_count``: refuse (record
    nothing) when the session's count is past it, as a stale run's append is refused."""
    expected = intent.expected_revision
    assert expected is not None
    state = IntentState.IN_FLIGHT
    args: list[str | bytes] = ["", clearing or "", str(expected), writer]
    args.append("" if seen_write_count is None else str(seen_write_count))
    args += rows

    def answer(reply: object) -> tuple[Fused, bool]:
        if type(reply) is list and len(reply) == 3:
            word = reply[0]
            word = word.decode("utf-8", "replace") if type(word) is bytes else word
            if word in _ANSWERS:
                write_count = replies.count(reply[1], _SCRIPT)
                third = replies.count(reply[2], _SCRIPT)
                if word == "recorded":
                    opened = Opened(recorded=True, write_count=write_count)
                    return Fused(opened, revision=third), True
                refused = Opened(recorded=False, write_count=write_count)
                return Fused(refused, refused=word, head=third), False
        opened, home = replies.opened(intent, state, owner, reply, journal.keyring)
        return Fused(opened), home

    return await journal.open_by_script(
        _SCRIPT, intent, state=state, owner=owner, args=args, keys=store_keys, answer=answer
    )


class Pair:
    """A journal and a revisioned store on one Redis server (one database, one replica wait),
    for their fused appends."""

    __slots__ = ("journal", "store")

    def __init__(self, journal: RedisJournal, store: RevisionedRedisSession) -> None:
        self.journal = journal
        self.store = store

    async def append(
        self,
        intent: PendingWrite,
        items: Sequence[Any],
        *,
        owner: Owner,
        clearing: str | None,
        seen_write_count: int | None,
    ) -> Fused:
        """``open_and_append`` of ``items`` as the store keeps them, written by ``owner``."""
        return await open_and_append(
            self.journal,
            intent,
            owner=owner,
            clearing=clearing,
            seen_write_count=seen_write_count,
            store_keys=await self.store.prepared(),
            writer=str(owner),
            rows=[encode_item(item, index) for index, item in enumerate(items)],
        )
