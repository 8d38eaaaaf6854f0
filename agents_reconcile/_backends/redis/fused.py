"""The Redis journal's half of a fused append (``_session/fused.py``): ``open_intent`` and a
revisioned Redis store's compare-and-swap append as one script, ``open_and_append.lua``.

Kept apart from ``RedisJournal`` because only a journal paired with a store on its own server
uses it; it speaks through the journal's own script runner and key layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._core.ownership import Owner
from ..._core.records import PendingWrite
from ..journal import IntentState, Opened
from . import replies
from .journal import RedisJournal, _intent_args

__all__ = ["Fused", "open_and_append"]

_SCRIPT = "open_and_append"


@dataclass(frozen=True)
class Fused:
    """What ``open_and_append`` did. ``opened`` as ``open_intent`` answers; ``revision``: the
    store's new head when the intent was recorded and appended now; ``refused``: ``'head'``
    (the store is at ``head``), ``'known'`` (the write id is there) or ``'stale_state'`` (the
    count is past ``seen_write_count``), nothing recorded or appended."""

    opened: Opened
    revision: int | None = None
    refused: str | None = None
    head: int | None = None


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
    assert intent.expected_revision is not None
    args = _intent_args(intent, IntentState.IN_FLIGHT, owner)
    args += ["", clearing or "", str(intent.expected_revision), writer]
    args += ["" if seen_write_count is None else str(seen_write_count), *rows]
    keys = journal._layout.scripted(intent.session_id) + store_keys
    reply = await journal._script(_SCRIPT, keys, args)
    word, parts = replies.status(reply, _SCRIPT)
    if word in ("recorded", "head", "known", "stale_state") and len(parts) == 3:
        write_count = replies.count(parts[1], _SCRIPT)
        third = replies.count(parts[2], _SCRIPT)
        if word == "recorded":
            journal._homes.remember(intent.intent_id, intent.session_id)
            return Fused(Opened(recorded=True, write_count=write_count), revision=third)
        return Fused(Opened(recorded=False, write_count=write_count), refused=word, head=third)
    opened, home = replies.opened(intent, IntentState.IN_FLIGHT, owner, reply, journal.keyring)
    if home:
        journal._homes.remember(intent.intent_id, intent.session_id)
    return Fused(opened)
