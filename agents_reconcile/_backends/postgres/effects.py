"""The PostgreSQL journal's effects component (``JournalEffects``) over the ``effects`` table.

An effect is a row of its own, keyed by the effect key, outside the intents' session locks
and write counts: an effect is not a session write. Each operation is one autocommit
statement whenever it can be:

* ``begin`` inserts with ``ON CONFLICT (key) DO NOTHING`` and reads back the row held,
  in one statement. The unique key makes exactly one of racing callers record. The loser of
  such a race, when the winner committed after its snapshot, gets no row from that statement
  and reads the key again in a new one.
* ``restart`` and ``finish`` are one ``UPDATE`` each, conditioned on the key,
  its session, its owner and the state ``started``. PostgreSQL re-checks that condition on the
  newest version of the row once it holds the row's lock, so two racing updates cannot both
  match.
* When ``finish`` updated nothing, it reads the row in a new statement, which sees
  whatever committed before it. The same bytes as the receipt given mean the receipt is
  already stored: a retry whose first reply was lost, or one racing its first attempt. A
  sealed output is sealed afresh each time a record is encoded, so the same receipt can be
  stored under other bytes. The stored record is then decoded and compared with the receipt,
  keys aside.

Records are the bytes of ``Effect.encode()``. Every read decodes them with the journal's
keyring: sealed outputs open, signatures are checked where the deployment signs, and an
edited record is refused. So is a row whose key, session, state or owner columns disagree
with its record, because the updates select by those columns.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from ..._core.effect_records import Effect, EffectState
from ...errors import IntentConflict, JournalCorrupt
from ..rows import checked_effect, each

if TYPE_CHECKING:
    from ..._core.sealing import Keyring
    from .backend import Connection
    from .database import JournalDatabase

__all__ = ["PostgresEffects"]

# How many times begin tries before giving up on a key whose row keeps vanishing
# between its two statements (only a schema dropped meanwhile can do that).
_BEGIN_TRIES: Final = 3


class PostgresEffects:
    """``JournalEffects`` in a journal's database (a pooled connection, the schema checked or
    migrated first, the driver's errors translated), its records opened with the journal's
    keyring."""

    def __init__(self, db: JournalDatabase, keyring: Keyring) -> None:
        self._db = db
        self._keyring = keyring

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
        _require_state(effect, EffectState.STARTED, "effects.begin")
        args = (effect.key, effect.session_id, effect.owner, effect.encode())

        async def work(conn: Connection) -> tuple[Any, bool]:
            for _ in range(_BEGIN_TRIES):
                row = await conn.fetchrow(self._db.sql.begin_effect, *args)
                if row is not None:
                    return row, bool(row["added"])
                # Recorded by a transaction that committed after that statement's snapshot.
                row = await conn.fetchrow(self._db.sql.effect, effect.key)
                if row is not None:
                    return row, False
            raise JournalCorrupt(f"effect {effect.key}: its row keeps vanishing")

        row, recorded = await self._db.run(work)
        if recorded:
            return replace(effect, age=_age(row)), True
        return _checked(row, self._keyring), False

    async def restart(self, effect: Effect, *, expect_owner: str) -> bool:
        _require_state(effect, EffectState.STARTED, "effects.restart")
        args = (
            effect.key,
            effect.session_id,
            expect_owner,
            effect.owner,
            effect.encode(),
        )

        async def work(conn: Connection) -> bool:
            return await conn.fetchval(self._db.sql.restart_effect, *args) is not None

        return await self._db.run(work)

    async def finish(self, effect: Effect) -> Effect:
        _require_state(effect, EffectState.DONE, "effects.finish")
        record = effect.encode()
        args = (effect.key, effect.session_id, effect.owner, time.time(), record)

        async def work(conn: Connection) -> tuple[bool, Any]:
            if await conn.fetchval(self._db.sql.finish_effect, *args) is not None:
                return True, None
            # Nothing matched: the row as it is now, in a new snapshot.
            return False, await conn.fetchrow(self._db.sql.effect, effect.key)

        stored, row = await self._db.run(work)
        if stored:
            return effect
        if row is None:
            raise IntentConflict(f"effect {effect.key} was never begun", intent_id=effect.key)
        held = _checked(row, self._keyring)
        if row["record"] == record or (held.state is EffectState.DONE and held == effect):
            # This very receipt is stored already (an earlier attempt of this call).
            return held
        if held.state is EffectState.DONE:
            problem = "is done with another receipt"
        elif held.owner != effect.owner:
            problem = f"was started by {held.owner}, not {effect.owner}"
        else:
            problem = "is held under another record"
        raise IntentConflict(f"effect {effect.key} {problem}", intent_id=effect.key)

    async def get(self, key: str) -> Effect | None:
        async def work(conn: Connection) -> Any:
            return await conn.fetchrow(self._db.sql.effect, key)

        row = await self._db.run(work)
        return None if row is None else _checked(row, self._keyring)

    async def of_session(self, session_id: str) -> list[Effect]:
        async def work(conn: Connection) -> list[Any]:
            return await conn.fetch(self._db.sql.effects, session_id)

        keyring = self._keyring
        return each(
            await self._db.run(work),
            lambda row: _checked(row, keyring),
            lambda row: ("effect", row["key"], row["session_id"]),
        )

    async def started(self, session_id: str | None = None) -> list[Effect]:
        async def work(conn: Connection) -> list[Any]:
            if session_id is None:
                return await conn.fetch(self._db.sql.started_effects)
            return await conn.fetch(self._db.sql.started_effects_of, session_id)

        keyring = self._keyring
        return each(
            await self._db.run(work),
            lambda row: _checked(row, keyring),
            lambda row: ("effect", row["key"], row["session_id"]),
        )


def _require_state(effect: Effect, state: EffectState, method: str) -> None:
    if effect.state is not state:
        raise ValueError(
            f"{method}() takes an effect in state {state.value}, not {effect.state.value}"
        )


def _checked(row: Mapping[str, Any], keyring: Keyring) -> Effect:
    """An effect's row, checked against the record it holds."""
    return checked_effect(
        row["key"],
        row["session_id"],
        row["state"],
        row["owner"],
        row["record"],
        keyring,
        age=_age(row),
    )


def _age(row: Mapping[str, Any]) -> float | None:
    """The row's age by the server's clock, where the statement read it."""
    age = row.get("age")
    return None if age is None else float(age)
