"""What ``MemoryJournal`` holds (``MemoryRows``): its intents, decisions, effects, counts and
set-aside entries as objects in dicts and lists, one object that the journal and each of its
parts read and change, as a stored journal's parts share one file or server."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..._core.effect_records import Effect, EffectState
from ..._core.records import BackendIdentity, Decision
from ..aside import SetAside
from ..journal import JournalEntry

__all__ = ["MemoryRows"]


@dataclass(eq=False)
class MemoryRows:
    """The rows of one memory journal. Records are kept as objects, never encoded."""

    entries: dict[str, JournalEntry] = field(default_factory=dict)
    """The unresolved intents, by id."""
    settled: set[str] = field(default_factory=set)
    """The ids of the settled intents."""
    decisions: list[Decision] = field(default_factory=list)
    """Every decision, oldest first."""
    effects: dict[str, Effect] = field(default_factory=dict)
    """Every effect, by key."""
    effect_stamps: dict[str, float] = field(default_factory=dict)
    """When each effect's record was last stored, on the journal's clock (monotonic)."""
    sealing: set[str] = field(default_factory=set)
    """The ids of the keys the journal is marked as sealed under."""
    write_counts: dict[tuple[str, BackendIdentity], int] = field(default_factory=dict)
    """Each session and backend's write count."""
    counted_at: dict[tuple[str, BackendIdentity], float] = field(default_factory=dict)
    """When each count was last raised."""
    done_at: dict[str, float] = field(default_factory=dict)
    """When each receipt was stored."""
    floor: int = 0
    """The highest count pruned: what a session without a count reads."""
    opened_at: dict[str, int] = field(default_factory=dict)
    """The session's count before each intent ``open_intent`` recorded: a retried opening
    answers with it. Intents stored by ``record`` have none, and read as 0 like elsewhere."""
    aside: list[tuple[SetAside, bytes]] = field(default_factory=list)
    """The entries set aside, oldest first, each with the bytes of its intent."""

    def count(self, session_id: str, backend: BackendIdentity) -> int:
        """Count one more write of the session (above the floor when it has no count), stamped
        now; the new count."""
        key = (session_id, backend)
        self.write_counts[key] = self.write_counts.get(key, self.floor) + 1
        self.counted_at[key] = time.time()
        return self.write_counts[key]

    def aged(self, effect: Effect) -> Effect:
        """``effect`` as a read answers it: with its age by this journal's clock (monotonic: no
        writer's wall clock moves it), from when its record was last stored."""
        return replace(effect, age=time.monotonic() - self.effect_stamps[effect.key])

    def started(self, session_id: str | None) -> list[Effect]:
        """The started effects (of one session when given), in the order they were begun."""
        return [
            self.aged(effect)
            for effect in self.effects.values()
            if effect.state is EffectState.STARTED and session_id in (None, effect.session_id)
        ]

    def newest(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        """The newest decision about each of ``intent_ids`` that has one."""
        wanted = set(intent_ids)
        found: dict[str, Decision] = {}
        for decision in reversed(self.decisions):
            if decision.intent_id in wanted and decision.intent_id not in found:
                found[decision.intent_id] = decision
        return found
