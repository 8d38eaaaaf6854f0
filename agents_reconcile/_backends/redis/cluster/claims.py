"""Which session an intent id belongs to, on a Redis Cluster.

On one server ``index`` says it for the whole journal, and ``record`` and ``open_intent``
refuse an id another session holds (or one settled) in the same script. On a cluster each
bucket has its own ``index``: a session of another bucket holding the id is out of the
script's reach. So the id is first *claimed* for its session, in the bucket of the id itself
(``claims``, a hash from intent id to session: ``scripts/claim.lua``), and recorded in its
session's bucket only once claimed; an id claimed by another session is refused as taken, as
one server refuses it. A claim stays while its intent is held or settled (a settled id is never
recorded again, by any session) and goes once its intent is discarded, cleared by the next
opening, or never recorded (an opening that was refused): this journal object lets such claims
go together, at once, once 64 wait (one script per bucket, one pipeline per node), and at
``close``; one it claims again meanwhile stays.

Claims also name an intent's session to a call given only its id (``transition``,
``discard``, ``settle``, ``get``, ``raw_intent``): one ``HGET`` in the id's bucket, where one
server reads ``index``. When there is no claim, or the session it names does not hold the
intent, every bucket's ``index`` is asked (at once, one pipeline per node).

Order. A claim is made before its intent is recorded, so a claimed id is never held by a
session other than the one named, and two sessions of different buckets recording one id at
the same instant meet at its claim. A claim let go after its intent was discarded only names
the session it was made for, so an id recorded again by that same session through another
journal object before the first lets its claim go is left without one: lookups then ask every
bucket, and another session could take the id. An id the library makes is 128 random bits,
used once: only a hand-made one is ever recorded again, or by another session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar, Final, TypeVar

from ...._core.ownership import Owner
from ...._core.records import PendingWrite
from ....errors import LeaseLost
from ...journal import IntentState, Opened
from .. import replies
from ..homes import Retry
from ..journal import _intent_args
from ..layout import IntentHomes
from .io import ClusterIO
from .layout import BucketKeys

if TYPE_CHECKING:
    from ...._core.sealing import Keyring
    from ...lua import LuaScript

__all__ = ["ClusterClaims"]

_T = TypeVar("_T")
_DROPS_KEPT: Final = 64
"""Claims waiting to go, at most, before they go at once."""


class ClusterClaims(ClusterIO):
    """Claims of intent ids, for ``RedisClusterJournal``, which provides what is declared
    here."""

    keyring: Keyring
    _layout: BucketKeys
    _homes: IntentHomes
    _drops: dict[tuple[str, str], None]
    """Claims (intent id, session) to let go, oldest first."""
    _version_arg: bytes
    _scripts: ClassVar[dict[str, LuaScript]]

    if TYPE_CHECKING:

        async def _script(
            self, name: str, keys: list[bytes], args: list[str | bytes], *, read_only: bool = False
        ) -> object: ...

        async def _command(self, operation: str, *args: str | bytes | int) -> object: ...

        async def _on_intent(
            self,
            intent_id: str,
            attempt: Callable[[str | None], Awaitable[_T | Retry | replies.Moved]],
        ) -> _T: ...

    # -- claiming ------------------------------------------------------------------------------

    async def _claim(self, intent_id: str, session_id: str) -> str | None:
        """Claim ``intent_id`` for ``session_id``; the session it is claimed by otherwise
        (None: this one)."""
        self._drops.pop((intent_id, session_id), None)
        keys = self._layout.claims(intent_id)
        args: list[str | bytes] = [self._version_arg, "claim", intent_id, session_id]
        reply = await self._script("claim", keys, args)
        word, parts = replies.status(reply, "claim")
        if word == "mine" and len(parts) == 1:
            return None
        if word == "other" and len(parts) == 2:
            return replies.text(parts[1], "an intent's session")
        raise replies.unexpected("claim", reply)

    def _drop(self, intent_id: str, session_id: str) -> None:
        """Let ``session_id``'s claim of ``intent_id`` go, with others."""
        self._drops[(intent_id, session_id)] = None

    def _dropping(self) -> list[tuple[LuaScript, list[bytes], list[str | bytes]]]:
        """The scripts that let the waiting claims go, one per bucket; none wait afterwards."""
        drops, self._drops = self._drops, {}
        by_bucket: dict[int, list[str | bytes]] = {}
        for intent_id, session_id in drops:
            by_bucket.setdefault(self._layout.number(intent_id), []).extend((intent_id, session_id))
        script = self._scripts["claim"]
        return [
            (script, self._layout.claims(str(pairs[0])), [self._version_arg, "drop", *pairs])
            for pairs in by_bucket.values()
        ]

    async def _drop_now(self) -> None:
        """Let every waiting claim go (``close``, pruning, and when many wait)."""
        calls = self._dropping()
        if calls:
            await self._fan_scripts("claim", calls)

    async def _settle_drops(self) -> None:
        if len(self._drops) >= _DROPS_KEPT:
            await self._drop_now()

    # -- recording -----------------------------------------------------------------------------

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        holder = await self._claim(intent.intent_id, intent.session_id)
        if holder is not None:
            replies.refuse(intent.intent_id, "taken", ["taken"], "record")
        args = _intent_args(intent, state, owner)
        reply = await self._script("record", self._layout.scripted(intent.session_id), args)
        word, parts = replies.status(reply, "record")
        if word == "exists" and len(parts) == 2:
            replies.compare(intent, parts[1], self.keyring)
        elif word != "recorded" or len(parts) != 1:
            if word == "taken":
                self._drop(intent.intent_id, intent.session_id)
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
        holder = await self._claim(intent.intent_id, intent.session_id)
        if holder is not None:
            replies.refuse(intent.intent_id, "taken", ["taken"], "open_intent")
        args = _intent_args(intent, state, owner)
        args.append("" if expect_write_count is None else str(expect_write_count))
        args += (clearing or "", "1")
        keys = self._layout.scripted(intent.session_id)
        reply = await self._script("open_intent", keys, args)
        parts = replies.as_list(reply, "open_intent")
        if len(parts) < 2 or parts[-1] not in (0, 1):
            raise replies.unexpected("open_intent", reply)
        if parts[-1] == 1 and clearing:
            self._drop(clearing, intent.session_id)
        word = replies.text(parts[0], "open_intent")
        if word in ("blocked", "stale", "taken"):
            self._drop(intent.intent_id, intent.session_id)
        await self._settle_drops()
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
            args: list[str | bytes] = [self._version_arg, intent_id, session_id, *held]
            reply = await self._script("discard", keys, args)
            if reply != 1:
                if replies.is_word(reply, "lost"):
                    raise LeaseLost(
                        f"intent {intent_id} is no longer in flight under {owner}",
                        intent_id=intent_id,
                    )
                return replies.moved(reply, "discard")
            self._homes.forget(intent_id)
            self._drop(intent_id, session_id)
            return None

        await self._on_intent(intent_id, attempt)
        await self._settle_drops()

    # -- finding an intent's session -----------------------------------------------------------

    async def _lookup(self, intent_id: str) -> str | None:
        keys = self._layout.claims(intent_id)
        reply = await self._command("lookup", "HGET", keys[1], intent_id)
        if reply is not None:
            session_id = replies.text(reply, "an intent's session")
            self._homes.remember(intent_id, session_id)
            return session_id
        return await self._holder(intent_id)

    async def _lookup_again(self, intent_id: str, tried: str | None) -> str | None:
        return await self._holder(intent_id)

    async def _holder(self, intent_id: str) -> str | None:
        """The session holding ``intent_id`` by every bucket's ``index`` (None: none)."""
        found = await self._every_bucket("lookup", "HGET", "index", intent_id)
        holders = [replies.text(each, "an intent's session") for each in found if each is not None]
        if not holders:
            self._homes.forget(intent_id)
            return None
        self._homes.remember(intent_id, holders[0])
        return holders[0]

    async def is_settled(self, intent_id: str) -> bool:
        # Settled where its session is, as a rule: the claim (or this object) names it.
        session_id = self._homes.get(intent_id)
        if session_id is None:
            reply = await self._command(
                "is_settled", "HGET", self._layout.claims(intent_id)[1], intent_id
            )
            session_id = None if reply is None else replies.text(reply, "an intent's session")
        if session_id is not None:
            names = self._layout.of(session_id).names
            if await self._command("is_settled", "SISMEMBER", names["settled"], intent_id) == 1:
                return True
        found = await self._every_bucket("is_settled", "SISMEMBER", "settled", intent_id)
        if any(each not in (0, 1) for each in found):
            raise replies.unexpected("is_settled", found)
        return 1 in found
