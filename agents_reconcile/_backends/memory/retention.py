"""The memory journal's retention component (``JournalRetention``): the rule of
``_core/retention.py`` over the journal's rows, oldest first, at most ``limit`` of each kind a
call."""

from __future__ import annotations

import time
from typing import TypeVar

from ..._core.effect_records import EffectState
from ..._core.retention import Kept, Pruned, Retention
from .rows import MemoryRows

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
    """``JournalRetention`` over a memory journal's rows: a pruned count raises the floor that
    a session without one reads."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        now = time.time()
        open_ids = set(self._rows.entries)
        busy = {(e.intent.session_id, e.intent.backend) for e in self._rows.entries.values()}
        decided = _due(retention, "decisions", now)
        stored = _due(retention, "receipts", now)
        idle = _due(retention, "idle_sessions", now)

        old_decisions = [
            n
            for n, d in enumerate(self._rows.decisions)
            if decided is not None and d.decided_at < decided and d.intent_id not in open_ids
        ]
        old_decisions, done = _first(old_decisions, limit)
        old_aside = [
            n
            for n, (aside, _) in enumerate(self._rows.aside)
            if decided is not None and aside.set_aside_at < decided
        ]
        old_aside, aside_done = _first(old_aside, limit)
        # A receipt of a session with an unresolved intent stays: that intent's batch may hold
        # the output it vouches for.
        vouching = {e.intent.session_id for e in self._rows.entries.values()}
        receipts = [
            key
            for key, effect in self._rows.effects.items()
            if stored is not None
            and effect.state is EffectState.DONE
            and self._rows.done_at.get(key, now) < stored
            and effect.session_id not in vouching
        ]
        receipts, receipts_done = _first(receipts, limit)
        counts = [
            key
            for key, at in self._rows.counted_at.items()
            if idle is not None and at < idle and key not in busy
        ]
        counts, counts_done = _first(counts, limit)
        removed = Pruned(
            decisions=len(old_decisions),
            set_aside=len(old_aside),
            receipts=len(receipts),
            write_counts=len(counts),
            bytes=sum(len(self._rows.decisions[n].encode()) for n in old_decisions)
            + sum(len(self._rows.aside[n][1]) for n in old_aside)
            + sum(len(self._rows.effects[key].encode()) for key in receipts),
            done=done and aside_done and receipts_done and counts_done,
        )
        if dry_run:
            return removed
        gone = set(old_decisions)
        kept_ids = {d.intent_id for n, d in enumerate(self._rows.decisions) if n not in gone}
        self._rows.settled -= {self._rows.decisions[n].intent_id for n in gone} - kept_ids
        self._rows.decisions = [d for n, d in enumerate(self._rows.decisions) if n not in gone]
        aside_gone = set(old_aside)
        self._rows.aside = [a for n, a in enumerate(self._rows.aside) if n not in aside_gone]
        for key in receipts:
            del self._rows.effects[key]
            self._rows.done_at.pop(key, None)
            self._rows.effect_stamps.pop(key, None)
        for count in counts:
            self._rows.floor = max(self._rows.floor, self._rows.write_counts.pop(count))
            del self._rows.counted_at[count]
        return removed
