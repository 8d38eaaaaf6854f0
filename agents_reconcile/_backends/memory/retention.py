"""Pruning ``MemoryJournal`` (``PruningJournal``): the rule of ``_core/retention.py`` over the
journal's own dicts, oldest first, at most ``limit`` of each kind a call."""

from __future__ import annotations

import time
from typing import TypeVar

from ..._core.effect_records import Effect, EffectState
from ..._core.records import BackendIdentity, Decision
from ..._core.retention import Kept, Pruned, Retention
from ..aside import SetAside
from ..journal import JournalEntry

__all__ = ["MemoryRetention"]


_T = TypeVar("_T")


def _due(retention: Retention, kept: Kept, now: float) -> float | None:
    seconds = retention.seconds(kept)
    return None if seconds is None else now - seconds


def _first(wanted: list[_T], limit: int | None) -> tuple[list[_T], bool]:
    if limit is None or len(wanted) <= limit:
        return wanted, True
    return wanted[:limit], False


class MemoryRetention:
    """Counts that read as the floor once pruned, and ``prune``."""

    _entries: dict[str, JournalEntry]
    _settled: set[str]
    _decisions: list[Decision]
    _effects: dict[str, Effect]
    _write_counts: dict[tuple[str, BackendIdentity], int]
    _aside: list[tuple[SetAside, bytes]]
    _counted_at: dict[tuple[str, BackendIdentity], float]
    _done_at: dict[str, float]
    _effect_stamps: dict[str, float]
    _floor: int

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        return self._write_counts.get((session_id, backend), self._floor)

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        key = (session_id, backend)
        self._write_counts[key] = self._write_counts.get(key, self._floor) + 1
        self._counted_at[key] = time.time()
        return self._write_counts[key]

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        now = time.time()
        open_ids = set(self._entries)
        busy = {(e.intent.session_id, e.intent.backend) for e in self._entries.values()}
        decided = _due(retention, "decisions", now)
        stored = _due(retention, "receipts", now)
        idle = _due(retention, "idle_sessions", now)

        old_decisions = [
            n
            for n, d in enumerate(self._decisions)
            if decided is not None and d.decided_at < decided and d.intent_id not in open_ids
        ]
        old_decisions, done = _first(old_decisions, limit)
        old_aside = [
            n
            for n, (aside, _) in enumerate(self._aside)
            if decided is not None and aside.set_aside_at < decided
        ]
        old_aside, aside_done = _first(old_aside, limit)
        # A receipt of a session with an unresolved intent stays: that intent's batch may hold
        # the output it vouches for.
        vouching = {e.intent.session_id for e in self._entries.values()}
        receipts = [
            key
            for key, effect in self._effects.items()
            if stored is not None
            and effect.state is EffectState.DONE
            and self._done_at.get(key, now) < stored
            and effect.session_id not in vouching
        ]
        receipts, receipts_done = _first(receipts, limit)
        counts = [
            key
            for key, at in self._counted_at.items()
            if idle is not None and at < idle and key not in busy
        ]
        counts, counts_done = _first(counts, limit)
        removed = Pruned(
            decisions=len(old_decisions),
            set_aside=len(old_aside),
            receipts=len(receipts),
            write_counts=len(counts),
            bytes=sum(len(self._decisions[n].encode()) for n in old_decisions)
            + sum(len(self._aside[n][1]) for n in old_aside)
            + sum(len(self._effects[key].encode()) for key in receipts),
            done=done and aside_done and receipts_done and counts_done,
        )
        if dry_run:
            return removed
        gone = set(old_decisions)
        kept_ids = {d.intent_id for n, d in enumerate(self._decisions) if n not in gone}
        self._settled -= {self._decisions[n].intent_id for n in gone} - kept_ids
        self._decisions = [d for n, d in enumerate(self._decisions) if n not in gone]
        aside_gone = set(old_aside)
        self._aside = [a for n, a in enumerate(self._aside) if n not in aside_gone]
        for key in receipts:
            del self._effects[key]
            self._done_at.pop(key, None)
            self._effect_stamps.pop(key, None)
        for count in counts:
            self._floor = max(self._floor, self._write_counts.pop(count))
            del self._counted_at[count]
        return removed
