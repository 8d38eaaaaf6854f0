"""Recording an intent on a Redis Cluster, and whether one is settled: the id claimed for its
session first (``homes.ClaimedHomes``, which says why and keeps the claims), then recorded in
its session's bucket; a discarded or refused intent's claim let go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...._core.ownership import Owner
from ...._core.records import PendingWrite
from ....errors import LeaseLost
from ...journal import IntentState, Opened
from .. import replies
from ..homes import IndexedHomes
from ..journal import _intent_args
from ..link import VERSION, RedisLink
from .layout import BucketKeys

if TYPE_CHECKING:
    from ...._core.sealing import Keyring

__all__ = ["ClusterClaims"]


class ClusterClaims:
    """``record``, ``open_intent``, ``discard`` and ``is_settled`` of ``RedisClusterJournal``,
    over its link ``_link`` and its claims ``_homes``."""

    keyring: Keyring
    _link: RedisLink
    _layout: BucketKeys
    _homes: IndexedHomes

    # -- recording -----------------------------------------------------------------------------

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        holder = await self._homes.claim(intent.intent_id, intent.session_id)
        if holder is not None:
            replies.refuse(intent.intent_id, "taken", ["taken"], "record")
        args = _intent_args(intent, state, owner)
        reply = await self._link.script("record", self._layout.scripted(intent.session_id), args)
        word, parts = replies.status(reply, "record")
        if word == "exists" and len(parts) == 2:
            replies.compare(intent, parts[1], self.keyring)
        elif word != "recorded" or len(parts) != 1:
            if word == "taken":
                self._homes.let_go(intent.intent_id, intent.session_id)
            replies.refuse(intent.intent_id, word, reply, "record")
        self._homes.remember(intent.intent_id, intent.session_id)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        holder = await self._homes.claim(intent.intent_id, intent.session_id)
        if holder is not None:
            replies.refuse(intent.intent_id, "taken", ["taken"], "open_intent")
        args = _intent_args(intent, state, owner)
        args.append("" if expect_write_count is None else str(expect_write_count))
        args += (clearing or "", "1")
        keys = self._layout.scripted(intent.session_id)
        reply = await self._link.script("open_intent", keys, args)
        parts = replies.as_list(reply, "open_intent")
        if len(parts) < 2 or parts[-1] not in (0, 1):
            raise replies.unexpected("open_intent", reply)
        if parts[-1] == 1 and clearing:
            self._homes.let_go(clearing, intent.session_id)
        word = replies.text(parts[0], "open_intent")
        if word in ("blocked", "stale", "taken"):
            self._homes.let_go(intent.intent_id, intent.session_id)
        await self._homes.let_go_when_many()
        opened, home = replies.opened(intent, state, owner, parts[:-1], self.keyring)
        if home:
            self._homes.remember(intent.intent_id, intent.session_id)
        return opened

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        token = "" if fence is None else str(fence)
        held = ["0", "", ""] if owner is None else ["1", str(owner), token]

        async def attempt(session_id: str | None) -> replies.Moved | None:
            if session_id is None:
                return None
            keys = self._layout.scripted(session_id)
            args: list[str | bytes] = [VERSION, intent_id, session_id, *held]
            reply = await self._link.script("discard", keys, args)
            if reply != 1:
                if replies.is_word(reply, "lost"):
                    raise LeaseLost(
                        f"intent {intent_id} is no longer in flight under {owner}",
                        intent_id=intent_id,
                    )
                return replies.moved(reply, "discard")
            self._homes.forget(intent_id)
            self._homes.let_go(intent_id, session_id)
            return None

        await self._homes.on_intent(intent_id, attempt)
        await self._homes.let_go_when_many()

    async def is_settled(self, intent_id: str) -> bool:
        # Settled where its session is, as a rule: the claim (or this object) names it.
        session_id = self._homes.get(intent_id)
        if session_id is None:
            session_id = await self._homes.claimed_by(intent_id)
        if session_id is not None:
            names = self._layout.of(session_id).names
            if (
                await self._link.command("is_settled", "SISMEMBER", names["settled"], intent_id)
                == 1
            ):
                return True
        found = await self._link.every_bucket("is_settled", "SISMEMBER", "settled", intent_id)
        if any(each not in (0, 1) for each in found):
            raise replies.unexpected("is_settled", found)
        return 1 in found
