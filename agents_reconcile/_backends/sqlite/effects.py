"""The SQLite journal's effects component (``JournalEffects``): tools' external effects, one row
each in the ``effects`` table, keyed by the effect key and kept beside the intents (an effect is
not a session write, so it takes no part in the write counts).
Its statements run on the journal's file (``files.JournalFile``); records open with the
journal's keyring.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from ..._core.effect_records import Effect, EffectState
from ..._core.sealing import Keyring
from ...errors import IntentConflict
from ..rows import checked_effect, each
from .files import JournalFile

__all__ = ["EFFECT_COLUMNS", "JOURNAL_NOW", "SQLiteEffects"]

JOURNAL_NOW: Final = "((julianday('now') - 2440587.5) * 86400.0)"
"""The journal's clock in SQL (seconds since the epoch): an effect's row is stamped and aged
by SQLite's own reading of the time, in the statement that writes or reads it, never by the
time a writer's process reports."""
EFFECT_COLUMNS: Final = f"key, session_id, state, owner, record, {JOURNAL_NOW} - updated_at"
"""An effect's row as ``checked_effect`` takes it, with its age by the journal's clock."""
_EFFECT_ROW: Final = f"SELECT {EFFECT_COLUMNS} FROM effects WHERE key = ?"
_EffectRow = tuple[str, str, str, str, bytes, float]


class SQLiteEffects:
    """``JournalEffects`` on a journal's file, its records opened with the journal's
    keyring."""

    def __init__(self, file: JournalFile, keyring: Keyring) -> None:
        self._file = file
        self._keyring = keyring

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
        row = (effect.key, effect.session_id, effect.state.value, effect.owner)
        record = effect.encode()

        def begin(conn: sqlite3.Connection) -> tuple[_EffectRow, bool]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                inserted = conn.execute(
                    "INSERT INTO effects (key, session_id, state, owner, started_at,"
                    f" updated_at, record) VALUES (?, ?, ?, ?, ?, {JOURNAL_NOW}, ?)"
                    " ON CONFLICT (key) DO NOTHING",
                    (*row, effect.started_at, record),
                ).rowcount
                [stored] = conn.execute(_EFFECT_ROW, row[:1]).fetchall()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return stored, inserted == 1

        stored, recorded = await self._file.run(begin)
        return self._effect(stored), recorded

    async def restart(self, effect: Effect, *, expect_owner: str) -> bool:
        sql = (
            f"UPDATE effects SET owner = ?, updated_at = {JOURNAL_NOW}, record = ?"
            " WHERE key = ? AND state = 'started' AND owner = ?"
        )
        args = (effect.owner, effect.encode(), effect.key, expect_owner)
        return bool(await self._file.run(lambda conn: conn.execute(sql, args).rowcount == 1))

    async def finish(self, effect: Effect) -> Effect:
        sql = (
            f"UPDATE effects SET state = 'done', updated_at = {JOURNAL_NOW}, record = ?"
            " WHERE key = ? AND state = 'started' AND owner = ?"
        )
        args = (effect.encode(), effect.key, effect.owner)

        def finish(conn: sqlite3.Connection) -> tuple[bool, _EffectRow | None]:
            updated = conn.execute(sql, args).rowcount == 1
            return updated, conn.execute(_EFFECT_ROW, (effect.key,)).fetchone()

        updated, stored = await self._file.run(finish)
        if stored is not None:
            held = self._effect(stored)
            done = (held.state, held.owner, held.output_digest) == (
                EffectState.DONE,
                effect.owner,
                effect.output_digest,
            )
            if updated or done:
                return held
        raise IntentConflict(
            f"effect {effect.key}: no started effect of owner {effect.owner} to finish",
            intent_id=effect.key,
        )

    async def get(self, key: str) -> Effect | None:
        rows = await self._file.run(lambda conn: conn.execute(_EFFECT_ROW, (key,)).fetchall())
        return self._effect(rows[0]) if rows else None

    async def of_session(self, session_id: str) -> list[Effect]:
        sql = f"SELECT {EFFECT_COLUMNS} FROM effects WHERE session_id = ? ORDER BY rowid"
        rows = await self._file.run(lambda conn: conn.execute(sql, (session_id,)).fetchall())
        return [self._effect(row) for row in rows]

    async def started(self, session_id: str | None = None) -> list[Effect]:
        # The partial index effects_started holds the started rows alone.
        sql = f"SELECT {EFFECT_COLUMNS} FROM effects WHERE state = 'started'"
        args: tuple[str, ...] = ()
        if session_id is not None:
            sql, args = f"{sql} AND session_id = ?", (session_id,)
        rows = await self._file.run(
            lambda conn: conn.execute(f"{sql} ORDER BY rowid", args).fetchall()
        )
        return each(rows, self._effect, lambda row: ("effect", row[0], row[1]))

    def _effect(self, row: _EffectRow) -> Effect:
        key, session_id, state, owner, record, age = row
        return checked_effect(key, session_id, state, owner, bytes(record), self._keyring, age=age)
