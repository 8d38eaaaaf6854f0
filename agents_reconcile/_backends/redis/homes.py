"""Where the Redis journal finds an intent: the session that holds it, remembered from the last
time this object saw it (``layout.IntentHomes``), else looked up; a script that finds the
intent elsewhere says where, and the call is made again there; and where its mark of being
settled is. Two ways, chosen by the layout (the journal's one core, ``journal.RedisJournal``,
asks the one it was given and has no other difference between a server and a cluster):

- ``IndexedHomes`` (one server): ``index`` names every unresolved intent's session, and
  ``record`` and ``open_intent`` refuse an id another session holds (or one settled) in the
  same script, so an id needs no claim.
- ``ClaimedHomes`` (a cluster): each bucket has its own ``index``, and a session of another
  bucket holding the id is out of a script's reach. So the id is first *claimed* for its
  session, in the bucket of the id itself (``claims``, a hash from intent id to session:
  ``scripts/claim.lua``), and recorded in its session's bucket only once claimed; an id
  claimed by another session is refused as taken, as one server refuses it. A claim stays
  while its intent is held or settled (a settled id is never recorded again, by any session)
  and goes once its intent is discarded, cleared by the next opening, or never recorded (an
  opening that was refused): this object lets such claims go together, at once, once 64 wait
  (one script per bucket, one pipeline per node), and when the journal closes; one claimed
  again meanwhile stays. Claims also name an intent's session to a call given only its id:
  one ``HGET`` in the id's bucket. When there is no claim, or the session it names does not
  hold the intent, every bucket's ``index`` is asked (at once, one pipeline per node). An
  intent is marked settled in its session's bucket, as a rule (a settlement by a session of
  another bucket marks it in both): that bucket is asked first, then every bucket.

Order (a cluster). A claim is made before its intent is recorded, so a claimed id is never
held by a session other than the one named, and two sessions of different buckets recording
one id at the same instant meet at its claim. A claim let go after its intent was discarded
only names the session it was made for, so an id recorded again by that same session through
another journal object before the first lets its claim go is left without one: lookups then
ask every bucket, and another session could take the id. An id the library makes is 128
random bits, used once: only a hand-made one is ever recorded again, or by another session.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import ClassVar, Final, TypeVar

from ..._core.records import PendingWrite
from ...errors import JournalUnavailable
from ..lua import LuaScript
from . import replies
from .layout import IntentHomes, JournalKeys, KeyLayout
from .link import VERSION, RedisLink

__all__ = ["ClaimedHomes", "IndexedHomes", "Retry"]

_T = TypeVar("_T")
# Attempts at an operation on an intent whose session keeps changing under it (discarded and
# recorded again elsewhere between the lookup and the script).
_ATTEMPTS: Final = 8
_DROPS_KEPT: Final = 64
"""Claims waiting to go, at most, before they go at once."""


class Retry(enum.Enum):
    MOVED = "moved"
    """The intent's session changed between looking it up and acting on it."""


class IndexedHomes(IntentHomes):
    """Intents' sessions on one server: remembered, else read from ``index``."""

    claims_ids: ClassVar[bool] = False
    """Whether an intent id is claimed for its session before it is recorded (a cluster's):
    ``open_intent`` then asks its script whether it cleared the intent it was given, whose
    claim goes."""

    def __init__(self, link: RedisLink, layout: KeyLayout) -> None:
        super().__init__()
        self._link = link
        self._layout = layout
        first = layout.buckets()[0]
        self._index = first.names["index"]
        self._settled = first.names["settled"]

    async def claim(self, intent_id: str, session_id: str) -> str | None:
        """Claim ``intent_id`` for ``session_id`` before it is recorded; the session it is
        claimed by otherwise (None: this one). One server needs no claim."""
        return None

    async def opened(self, intent: PendingWrite, clearing: str | None, reply: object) -> object:
        """``open_intent.lua``'s ``reply`` as ``replies.opened`` reads it, the claims it made
        needless let go (those of ``intent`` when refused, of ``clearing`` when cleared)."""
        return reply

    async def settled(self, intent_id: str) -> bool:
        """Whether ``intent_id`` is settled (on one server: in ``settled``). Only reads."""
        reply = await self._link.command("is_settled", "SISMEMBER", self._settled, intent_id)
        if reply not in (0, 1):
            raise replies.unexpected("is_settled", reply)
        return reply == 1

    def let_go(self, intent_id: str, session_id: str) -> None:
        """Let ``session_id``'s claim of ``intent_id`` go (with others, later)."""

    async def let_go_now(self) -> None:
        """Let every claim waiting to go go now."""

    async def let_go_when_many(self) -> None:
        """Let the claims waiting to go go, once many wait."""

    async def claimed_by(self, intent_id: str) -> str | None:
        """The session the claim of ``intent_id`` names (None: no claim). Only reads."""
        return None

    async def let_go_unsettled(self, bucket: JournalKeys, intents: list[tuple[str, str]]) -> None:
        """After pruning decisions in ``bucket``: let the claims of ``intents`` (id, session)
        go that are neither settled nor unresolved there any more (their last decision went)."""

    async def lookup(self, intent_id: str) -> str | None:
        """The session holding ``intent_id`` (None: none), remembered from now on."""
        reply = await self._link.command("lookup", "HGET", self._index, intent_id)
        if reply is None:
            self.forget(intent_id)
            return None
        session_id = replies.text(reply, "an intent's session")
        self.remember(intent_id, session_id)
        return session_id

    async def lookup_again(self, intent_id: str, tried: str | None) -> str | None:
        """The session holding the intent, after ``tried`` was found not to hold it."""
        return await self.lookup(intent_id)

    async def on_intent(
        self,
        intent_id: str,
        attempt: Callable[[str | None], Awaitable[_T | Retry | replies.Moved]],
    ) -> _T:
        """Run ``attempt`` with the session holding the intent (None when none does), again
        where the script found the intent (or after a fresh lookup) while it is elsewhere."""
        session_id = self.get(intent_id)
        if session_id is None:
            session_id = await self.lookup(intent_id)
        for _ in range(_ATTEMPTS):
            result = await attempt(session_id)
            if isinstance(result, replies.Moved):
                session_id = result.holder
                if session_id is None:
                    self.forget(intent_id)
                else:
                    self.remember(intent_id, session_id)
                continue
            if not isinstance(result, Retry):
                return result
            session_id = await self.lookup_again(intent_id, session_id)
        raise JournalUnavailable(
            f"intent {intent_id} kept moving between sessions; try again",
        )


class ClaimedHomes(IndexedHomes):
    """Intents' sessions on a cluster: claimed in the id's own bucket before recording, named
    by the claim, else found in every bucket's ``index``."""

    claims_ids: ClassVar[bool] = True

    def __init__(self, link: RedisLink, layout: KeyLayout, claim: LuaScript) -> None:
        super().__init__(link, layout)
        self._script = claim
        self._drops: dict[tuple[str, str], None] = {}
        """Claims (intent id, session) to let go, oldest first."""

    def _claims(self, intent_id: str) -> list[bytes]:
        keys = self._layout.claims(intent_id)
        assert keys is not None, "a layout of claims"
        return keys

    def clear(self) -> None:
        super().clear()
        self._drops = {}

    async def claim(self, intent_id: str, session_id: str) -> str | None:
        self._drops.pop((intent_id, session_id), None)
        args: list[str | bytes] = [VERSION, "claim", intent_id, session_id]
        reply = await self._link.script("claim", self._claims(intent_id), args)
        word, parts = replies.status(reply, "claim")
        if word == "mine" and len(parts) == 1:
            return None
        if word == "other" and len(parts) == 2:
            return replies.text(parts[1], "an intent's session")
        raise replies.unexpected("claim", reply)

    async def opened(self, intent: PendingWrite, clearing: str | None, reply: object) -> object:
        # The script's last element says whether it cleared ``clearing`` (``claims_ids``).
        parts = replies.as_list(reply, "open_intent")
        if len(parts) < 2 or parts[-1] not in (0, 1):
            raise replies.unexpected("open_intent", reply)
        if parts[-1] == 1 and clearing:
            self.let_go(clearing, intent.session_id)
        word = replies.text(parts[0], "open_intent")
        if word in ("blocked", "stale", "taken"):
            self.let_go(intent.intent_id, intent.session_id)
        await self.let_go_when_many()
        return parts[:-1]

    async def settled(self, intent_id: str) -> bool:
        # Settled where its session is, as a rule: the claim (or this object) names it.
        session_id = self.get(intent_id)
        if session_id is None:
            session_id = await self.claimed_by(intent_id)
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

    def let_go(self, intent_id: str, session_id: str) -> None:
        self._drops[(intent_id, session_id)] = None

    async def let_go_now(self) -> None:
        drops, self._drops = self._drops, {}
        by_bucket: dict[int, list[str | bytes]] = {}
        for intent_id, session_id in drops:
            by_bucket.setdefault(self._layout.number(intent_id), []).extend((intent_id, session_id))
        calls: list[tuple[LuaScript, list[bytes], list[str | bytes]]] = [
            (self._script, self._claims(str(pairs[0])), [VERSION, "drop", *pairs])
            for pairs in by_bucket.values()
        ]
        if calls:
            await self._link.fan_scripts("claim", calls)

    async def let_go_when_many(self) -> None:
        if len(self._drops) >= _DROPS_KEPT:
            await self.let_go_now()

    async def lookup(self, intent_id: str) -> str | None:
        reply = await self._link.command("lookup", "HGET", self._claims(intent_id)[1], intent_id)
        if reply is not None:
            session_id = replies.text(reply, "an intent's session")
            self.remember(intent_id, session_id)
            return session_id
        return await self.holder(intent_id)

    async def lookup_again(self, intent_id: str, tried: str | None) -> str | None:
        return await self.holder(intent_id)

    async def claimed_by(self, intent_id: str) -> str | None:
        reply = await self._link.command(
            "is_settled", "HGET", self._claims(intent_id)[1], intent_id
        )
        return None if reply is None else replies.text(reply, "an intent's session")

    async def let_go_unsettled(self, bucket: JournalKeys, intents: list[tuple[str, str]]) -> None:
        names = bucket.names
        checks = [
            command
            for intent, _ in intents
            for command in (
                ("SISMEMBER", names["settled"], intent),
                ("HEXISTS", names["index"], intent),
            )
        ]
        flags = await self._link.fan("prune", checks)
        for at, (intent, session) in enumerate(intents):
            if flags[2 * at] == 0 and flags[2 * at + 1] == 0:
                self.let_go(intent, session)

    async def holder(self, intent_id: str) -> str | None:
        """The session holding ``intent_id`` by every bucket's ``index`` (None: none)."""
        found = await self._link.every_bucket("lookup", "HGET", "index", intent_id)
        holders = [replies.text(each, "an intent's session") for each in found if each is not None]
        if not holders:
            self.forget(intent_id)
            return None
        self.remember(intent_id, holders[0])
        return holders[0]
