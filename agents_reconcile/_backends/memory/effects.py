"""The memory journal's effects component (``JournalEffects``): tools' effects as objects among
the journal's rows, each stamped with the journal's own clock (a monotonic one: no writer's wall
clock moves it) when stored."""

from __future__ import annotations

import time
from dataclasses import replace

from ..._core.effect_records import Effect, EffectState
from ...errors import IntentConflict
from .rows import MemoryRows

__all__ = ["MemoryEffects"]


class MemoryEffects:
    """``JournalEffects`` over a memory journal's rows."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows

    def _stored(self, effect: Effect) -> Effect:
        """``effect`` stored, stamped now; as a read answers it."""
        self._rows.effects[effect.key] = replace(effect, age=None)
        self._rows.effect_stamps[effect.key] = time.monotonic()
        return self._rows.aged(self._rows.effects[effect.key])

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
        stored = self._rows.effects.get(effect.key)
        if stored is not None:
            return self._rows.aged(stored), False
        return self._stored(effect), True

    async def restart(self, effect: Effect, *, expect_owner: str) -> bool:
        stored = self._rows.effects.get(effect.key)
        if stored is None or stored.state is not EffectState.STARTED:
            return False
        if stored.owner != expect_owner:
            return False
        self._stored(effect)
        return True

    async def finish(self, effect: Effect) -> Effect:
        stored = self._rows.effects.get(effect.key)
        if stored is not None and stored.state is EffectState.STARTED:
            if stored.owner == effect.owner:
                done = self._stored(effect)
                self._rows.done_at[effect.key] = time.time()
                return done
        elif stored is not None and (stored.owner, stored.output_digest) == (
            effect.owner,
            effect.output_digest,
        ):
            return self._rows.aged(stored)
        raise IntentConflict(
            f"effect {effect.key}: no started effect of owner {effect.owner} to finish",
            intent_id=effect.key,
        )

    async def get(self, key: str) -> Effect | None:
        stored = self._rows.effects.get(key)
        return None if stored is None else self._rows.aged(stored)

    async def of_session(self, session_id: str) -> list[Effect]:
        return [
            self._rows.aged(e) for e in self._rows.effects.values() if e.session_id == session_id
        ]

    async def started(self, session_id: str | None = None) -> list[Effect]:
        return self._rows.started(session_id)
