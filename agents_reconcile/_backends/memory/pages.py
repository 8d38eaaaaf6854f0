"""The memory journal's pages component (``JournalPages``): its rows sorted in memory by the
keys the SQL journals page by (``_backends.pages``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..._core.effect_records import Effect
from ..._core.records import Decision
from ..components import Page
from ..journal import JournalEntry
from ..pages import effects_in_memory, intents_in_memory
from .rows import MemoryRows

__all__ = ["MemoryPages"]


class MemoryPages:
    """``JournalPages`` over a memory journal's rows."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows

    async def _newest(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        return self._rows.newest(intent_ids)

    async def intents(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        return await intents_in_memory(
            [e for e in self._rows.entries.values() if session_id in (None, e.intent.session_id)],
            limit=limit,
            after=after,
            newest=self._newest,
        )

    async def started_effects(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        return await effects_in_memory(
            self._rows.started(session_id),
            limit=limit,
            after=after,
            newest=self._newest,
            overdue_before=overdue_before,
        )

    async def counts_writes_of(self, session_id: str) -> bool:
        return any(counted == session_id for counted, _ in self._rows.write_counts)
