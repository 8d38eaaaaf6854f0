"""The memory journal's aside component (``JournalAside``): a damaged intent's row moved aside
from the journal's rows, its bytes kept, with the decision that settles it and its session's
write counted, in one step."""

from __future__ import annotations

from ..._core.records import Decision
from ..aside import RawIntent, SetAside
from ..journal import require_limit
from .rows import MemoryRows

__all__ = ["MemoryAside"]


class MemoryAside:
    """``JournalAside`` over a memory journal's rows."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows

    async def raw(self, intent_id: str) -> RawIntent | None:
        # Records are objects here and never damaged: the row as a stored journal would hold it.
        entry = self._rows.entries.get(intent_id)
        if entry is None:
            return None
        intent = entry.intent
        row = (intent_id, intent.session_id, str(intent.backend), entry.state.value)
        return RawIntent.of_row((*row, str(entry.owner), entry.updated_at, intent.encode()))

    async def set_aside(self, raw: RawIntent, aside: SetAside, decision: Decision) -> bool:
        now = await self.raw(raw.intent_id)
        if now is None or now.stored != raw.stored:
            return False
        rows = self._rows
        del rows.entries[raw.intent_id]
        rows.opened_at.pop(raw.intent_id, None)
        rows.settled.add(raw.intent_id)
        rows.count(decision.session_id, decision.backend)
        rows.decisions.append(decision)
        rows.aside.append((aside, raw.record))
        return True

    async def entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        require_limit(limit)
        chosen = [
            aside
            for aside, _ in reversed(self._rows.aside)
            if (session_id is None or aside.session_id == session_id)
            and (intent_id is None or aside.intent_id == intent_id)
        ]
        return chosen[:limit]

    async def kept(self, intent_id: str) -> bytes | None:
        for aside, record in reversed(self._rows.aside):
            if aside.intent_id == intent_id:
                return record
        return None
