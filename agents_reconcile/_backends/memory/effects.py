"""The memory journal's effects component (``JournalEffects``): tools' effects as objects among
the journal's rows, each stamped with the journal's own clock (a monotonic one: no writer's wall
clock moves it) when stored, and read as a stored journal reads its records: opened and checked
with the journal's keyring."""

from __future__ import annotations

import time
from dataclasses import replace

from ..._core.effect_records import Effect, EffectState
from ..._core.sealing import Keyring
from ...errors import IntentConflict
from ..rows import decoded, each
from .rows import MemoryRows

__all__ = ["MemoryEffects"]


class MemoryEffects:
    """``JournalEffects`` over a memory journal's rows, read with its keyring."""

    def __init__(self, rows: MemoryRows, keyring: Keyring) -> None:
        self._rows = rows
        self._keyring = keyring

    def _read(self, effect: Effect) -> Effect:
        """``effect`` as a stored journal reads it back: aged, and its record opened and
        checked with the keyring where anything is sealed or signed (a keyring with a signer
        refuses an unsigned record). Records are objects here, so the check encodes the
        record and decodes it."""
        aged = self._rows.aged(effect)
        keyring = self._keyring
        if effect.seal_key is None and effect.sign_key is None and keyring.signer is None:
            return aged
        opened = decoded(effect.key, lambda data: Effect.decode(data, keyring), effect.encode())
        return replace(opened, age=aged.age)

    def _stored(self, effect: Effect) -> Effect:
        """``effect`` stored, stamped now; as a read answers it."""
        self._rows.effects[effect.key] = replace(effect, age=None)
        self._rows.effect_stamps[effect.key] = time.monotonic()
        return self._read(self._rows.effects[effect.key])

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
        stored = self._rows.effects.get(effect.key)
        if stored is not None:
            return self._read(stored), False
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
            return self._read(stored)
        raise IntentConflict(
            f"effect {effect.key}: no started effect of owner {effect.owner} to finish",
            intent_id=effect.key,
        )

    async def get(self, key: str) -> Effect | None:
        stored = self._rows.effects.get(key)
        return None if stored is None else self._read(stored)

    async def of_session(self, session_id: str) -> list[Effect]:
        chosen = [e for e in self._rows.effects.values() if e.session_id == session_id]
        return each(chosen, self._read, _named)

    async def started(self, session_id: str | None = None) -> list[Effect]:
        return each(self._rows.started(session_id), self._read, _named)


def _named(effect: Effect) -> tuple[str, object, object]:
    return ("effect", effect.key, effect.session_id)
