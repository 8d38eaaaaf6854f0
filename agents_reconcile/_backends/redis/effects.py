"""The Redis journal's effect half (``EffectJournal``): tools' external effects, kept beside the
intents.

Each operation that writes is one Lua script (``begin_effect``, ``restart_effect`` and
``finish_effect`` in ``scripts/``), which checks the schema version as every writing
script does and compares state and owner on the server before it writes. An effect's keys
live in its session's hash-tag slot (``layout.EFFECT_KEYS``): its state, owner, update
time and encoded ``Effect`` in hashes by effect key, and the session's effect keys in a list,
oldest first. One global hash, ``effect_index``, names each key's session, since ``effect()``
is given the key alone; one global sorted set, ``effect_started``, holds the keys that have no
receipt yet (scored by when they were begun), so ``started_effects`` reads those alone.
Every write is stamped on the server's clock, and every row read carries its age by that
clock (``Effect.age``): an effect's lease is judged on it, never on a writer's clock, and
``prune`` (``retention.py``) judges a receipt's age by it; a receipt pruned leaves every
effect key, and a started effect is never removed, so a key stays in the session it was begun
in while it is kept.

Every command and script goes through the journal's link (``link.RedisLink``).
"""

from __future__ import annotations

from typing import Final

from ..._core.effect_records import Effect, EffectState
from ..._core.sealing import Keyring
from ...errors import IntentConflict
from ..rows import each
from . import replies
from .layout import EFFECT_INDEX, EFFECT_STARTED, JournalKeys
from .link import VERSION, RedisLink

__all__ = ["EFFECT_SCRIPTS", "RedisEffects"]

EFFECT_SCRIPTS: Final = ("begin_effect", "effect_rows", "finish_effect", "restart_effect")
"""The scripts this half runs (``scripts/<name>.lua``), for the journal's runner."""


class RedisEffects:
    """``EffectJournal`` for ``RedisJournal``, which provides what is declared here."""

    _link: RedisLink
    keyring: Keyring
    _layout: JournalKeys

    async def begin_effect(self, effect: Effect) -> tuple[Effect, bool]:
        args: list[str | bytes] = [
            VERSION,
            effect.key,
            effect.session_id,
            effect.state.value,
            effect.owner,
            "",  # the begin time: the script stamps it on the server's clock
            effect.encode(),
        ]
        keys = self._layout.effects(effect.session_id)
        word, parts = replies.status(
            await self._link.script("begin_effect", keys, args), "begin_effect"
        )
        if word in ("recorded", "exists") and len(parts) == 2:
            row = replies.effect_row(parts[1], "begin_effect")
            return replies.effect(effect.session_id, row, self.keyring), word == "recorded"
        if word == "elsewhere" and len(parts) == 2:
            # A key begun under another session (keys are derived from their session, so
            # only a hand-made key gets here): what that session holds.
            holder = replies.text(parts[1], "an effect's session")
            held = await self._effect_in(holder, effect.key)
            if held is not None:
                return held, False
        raise replies.unexpected("begin_effect", parts)

    async def restart_effect(self, effect: Effect, *, expect_owner: str) -> bool:
        if effect.state is not EffectState.STARTED:
            raise ValueError("restart_effect() takes a started effect, not one with its receipt")
        args: list[str | bytes] = [
            VERSION,
            effect.key,
            effect.session_id,
            expect_owner,
            effect.owner,
            "",  # the takeover time: the script stamps it on the server's clock
            effect.encode(),
        ]
        keys = self._layout.effects(effect.session_id)
        reply = await self._link.script("restart_effect", keys, args)
        if reply not in (0, 1):
            raise replies.unexpected("restart_effect", reply)
        return reply == 1

    async def finish_effect(self, effect: Effect) -> Effect:
        if effect.state is not EffectState.DONE:
            raise ValueError("finish_effect() takes an effect with its receipt (state done)")
        args: list[str | bytes] = [
            VERSION,
            effect.key,
            effect.session_id,
            effect.owner,
            "",  # the update time: the script stamps the receipt on the server's clock
            effect.encode(),
        ]
        keys = self._layout.effects(effect.session_id)
        reply = await self._link.script("finish_effect", keys, args)
        word, parts = replies.status(reply, "finish_effect")
        if word in ("done", "same") and len(parts) == 1:
            # What is stored now is this very record.
            return effect
        if word == "finished" and len(parts) == 2:
            row = replies.effect_row(parts[1], "finish_effect")
            held = replies.effect(effect.session_id, row, self.keyring)
            if held == effect:
                # The same receipt, encoded again (a sealed output is sealed anew each time).
                return held
            raise IntentConflict(
                f"effect {effect.key} is done already, with another receipt",
                intent_id=effect.key,
            )
        if word == "other" and len(parts) == 1:
            raise IntentConflict(
                f"effect {effect.key} is not started under {effect.owner}", intent_id=effect.key
            )
        if word == "unknown" and len(parts) == 1:
            raise IntentConflict(
                f"effect {effect.key} was never begun in session {effect.session_id!r}",
                intent_id=effect.key,
            )
        raise replies.unexpected("finish_effect", reply)

    async def effect(self, key: str) -> Effect | None:
        reply = await self._link.command("effect", "HGET", self._layout.names["effect_index"], key)
        if reply is None:
            return None
        return await self._effect_in(replies.text(reply, "an effect's session"), key)

    async def effects(self, session_id: str) -> list[Effect]:
        keys = self._layout.effects(session_id)
        reply = await self._link.script("effect_rows", keys, [session_id, "all"], read_only=True)
        keyring = self.keyring
        return each(
            replies.effect_rows(reply, "effects"),
            lambda row: replies.effect(session_id, row, keyring),
            lambda row: ("effect", row[0], session_id),
        )

    async def started_effects(self, session_id: str | None = None) -> list[Effect]:
        # The started keys, oldest first, from their own sorted set; then each one's session
        # from the index, and the rows from each session's slot, still started when read.
        names = self._layout.names
        reply = await self._link.command("started_effects", "ZRANGE", names[EFFECT_STARTED], 0, -1)
        started = [replies.text(key, "an effect key") for key in replies.as_list(reply, "ZRANGE")]
        if not started:
            return []
        reply = await self._link.command("started_effects", "HMGET", names[EFFECT_INDEX], *started)
        by_session: dict[str, list[str]] = {}
        for key, holder in zip(started, replies.as_list(reply, "HMGET"), strict=True):
            if holder is not None:
                by_session.setdefault(replies.text(holder, "an effect's session"), []).append(key)
        rank = {key: at for at, key in enumerate(started)}
        found: list[Effect] = []
        for session, keys in by_session.items():
            if session_id is None or session == session_id:
                found.extend(await self._started_in(session, keys))
        found.sort(key=lambda effect: rank.get(effect.key, len(rank)))
        return found

    async def _started_in(self, session_id: str, keys: list[str]) -> list[Effect]:
        """The effects of ``keys`` that are ``session_id``'s and still started."""
        args: list[str | bytes] = [session_id, "some", *keys]
        reply = await self._link.script(
            "effect_rows", self._layout.effects(session_id), args, read_only=True
        )
        keyring = self.keyring
        return each(
            replies.effect_rows(reply, "started_effects"),
            lambda row: replies.effect(session_id, row, keyring),
            lambda row: ("effect", row[0], session_id),
        )

    async def _effect_in(self, session_id: str, key: str) -> Effect | None:
        """The effect ``key`` of session ``session_id`` (None when it is not that session's)."""
        keys = self._layout.effects(session_id)
        args: list[str | bytes] = [session_id, "one", key]
        found = replies.effect_rows(
            await self._link.script("effect_rows", keys, args, read_only=True), "effect"
        )
        if not found:
            return None
        if len(found) != 1 or found[0][0] != key:
            raise replies.unexpected("effect", found)
        return replies.effect(session_id, found[0], self.keyring)
