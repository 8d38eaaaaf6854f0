"""The Redis journal's effects component (``JournalEffects``): tools' external effects, kept
beside the intents, on a server or a cluster alike.

Each operation that writes is one Lua script (``begin_effect``, ``restart_effect`` and
``finish_effect`` in ``scripts/``), which checks the schema version as every writing
script does and compares state and owner on the server before it writes. An effect's keys
live in its session's hash-tag slot (``layout.EFFECT_KEYS``): its state, owner, update
time and encoded ``Effect`` in hashes by effect key, and the session's effect keys in a list,
oldest first. One global hash, ``effect_index``, names each key's session, since ``get()`` is
given the key alone; one global sorted set, ``effect_started``, holds the keys that have no
receipt yet (scored by when they were begun), so ``started()`` reads those alone.
Every write is stamped on the server's clock, and every row read carries its age by that
clock (``Effect.age``): an effect's lease is judged on it, never on a writer's clock, and
``prune`` (``retention.py``) judges a receipt's age by it; a receipt pruned leaves every
effect key, and a started effect is never removed, so a key stays in the session it was begun
in while it is kept.

On a cluster an effect's keys, its bucket's ``effect_index`` and ``effect_started`` included,
are in its session's bucket (``layout.effects``), so the effect scripts run there unchanged; a
key alone is looked for where this object last saw it (it notes the session of every effect it
begins or reads), else in every bucket's ``effect_index`` at once, and the started effects are
read from every bucket at once. An effect key is derived from its session, so one key is never
begun in two buckets unless made by hand; such a key is kept apart in each bucket, as two
effects. On one server ``effect_index`` is one command away, and nothing is noted.

Every command and script goes through the journal's link (``link.RedisLink``).
"""

from __future__ import annotations

from typing import Any, Final

from ..._core.effect_records import Effect, EffectState
from ..._core.sealing import Keyring
from ...errors import IntentConflict
from ..rows import each
from . import replies
from .layout import EFFECT_INDEX, EFFECT_STARTED, IntentHomes, KeyLayout
from .link import VERSION, RedisLink

__all__ = ["EFFECT_SCRIPTS", "RedisEffects"]

EFFECT_SCRIPTS: Final = ("begin_effect", "effect_rows", "finish_effect", "restart_effect")
"""The scripts this component runs (``scripts/<name>.lua``), for the journal's runner."""


class RedisEffects:
    """``JournalEffects`` through a journal's link, over its layout (one bucket or many), its
    records opened with the journal's keyring."""

    def __init__(self, link: RedisLink, layout: KeyLayout, keyring: Keyring) -> None:
        self._link = link
        self._layout = layout
        self._keyring = keyring
        self._homes = IntentHomes() if len(layout.buckets()) > 1 else None
        """The session of each effect key this object last saw, where a key alone is not one
        command away (a cluster)."""

    def forget(self) -> None:
        """Forget the effects' sessions noted (the journal was dropped)."""
        if self._homes is not None:
            self._homes.clear()

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
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
            if self._homes is not None:
                self._homes.remember(effect.key, effect.session_id)
            return replies.effect(effect.session_id, row, self._keyring), word == "recorded"
        if word == "elsewhere" and len(parts) == 2:
            # A key begun under another session (keys are derived from their session, so
            # only a hand-made key gets here): what that session holds.
            holder = replies.text(parts[1], "an effect's session")
            held = await self._effect_in(holder, effect.key)
            if held is not None:
                return held, False
        raise replies.unexpected("begin_effect", parts)

    async def restart(self, effect: Effect, *, expect_owner: str) -> bool:
        if effect.state is not EffectState.STARTED:
            raise ValueError("effects.restart() takes a started effect, not one with its receipt")
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

    async def finish(self, effect: Effect) -> Effect:
        if effect.state is not EffectState.DONE:
            raise ValueError("effects.finish() takes an effect with its receipt (state done)")
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
            held = replies.effect(effect.session_id, row, self._keyring)
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

    async def get(self, key: str) -> Effect | None:
        if self._homes is None:
            names = self._layout.bucket(0).names
            reply = await self._link.command("effect", "HGET", names[EFFECT_INDEX], key)
            if reply is None:
                return None
            return await self._effect_in(replies.text(reply, "an effect's session"), key)
        session_id = self._homes.get(key)
        if session_id is not None:
            found = await self._effect_in(session_id, key)
            if found is not None:
                return found
        holders = [
            replies.text(reply, "an effect's session")
            for reply in await self._link.every_bucket("effect", "HGET", EFFECT_INDEX, key)
            if reply is not None
        ]
        if not holders:
            self._homes.forget(key)
            return None
        self._homes.remember(key, holders[0])
        return await self._effect_in(holders[0], key)

    async def of_session(self, session_id: str) -> list[Effect]:
        keys = self._layout.effects(session_id)
        reply = await self._link.script("effect_rows", keys, [session_id, "all"], read_only=True)
        keyring = self._keyring
        return each(
            replies.effect_rows(reply, "effects"),
            lambda row: replies.effect(session_id, row, keyring),
            lambda row: ("effect", row[0], session_id),
        )

    async def started(self, session_id: str | None = None) -> list[Effect]:
        # The started keys of each bucket (of the session's alone, when one is asked) with
        # their begin times, then each one's session from its bucket's index, and the rows
        # from each session, still started when read.
        layout = self._layout
        if session_id is not None:
            numbers = [layout.number(session_id)]
        else:
            numbers = list(range(len(layout.buckets())))
        commands: list[tuple[str | int, ...]] = [
            ("ZRANGE", layout.bucket(number).names[EFFECT_STARTED], 0, -1, "WITHSCORES")
            for number in numbers
        ]
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
            ("HMGET", layout.bucket(number).names[EFFECT_INDEX], *keys)
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

    async def _started_in(self, session_id: str, keys: list[str]) -> list[Effect]:
        """The effects of ``keys`` that are ``session_id``'s and still started."""
        args: list[str | bytes] = [session_id, "some", *keys]
        reply = await self._link.script(
            "effect_rows", self._layout.effects(session_id), args, read_only=True
        )
        keyring = self._keyring
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
        return replies.effect(session_id, found[0], self._keyring)


def _scored(reply: object) -> list[tuple[str, float]]:
    """A ``ZRANGE ... WITHSCORES`` reply, as the client reads it: (member, score) pairs, or
    members and scores in turn."""
    items: list[Any] = replies.as_list(reply, "started_effects")
    if items and isinstance(items[0], list | tuple):
        pairs = [(pair[0], pair[1]) for pair in items]
    else:
        pairs = list(zip(items[::2], items[1::2], strict=True))
    return [(replies.text(member, "an effect key"), float(score)) for member, score in pairs]
