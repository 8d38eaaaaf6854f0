"""Paging ``MemoryJournal``'s listings (``PagedReading``): its rows sorted in memory by the
keys the SQL journals page by (``_backends.pages``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ..._core.effect_records import Effect
from ..._core.records import Decision
from ..journal import JournalEntry, Page
from ..pages import effects_in_memory, intents_in_memory
from .rows import MemoryRows

__all__ = ["MemoryPages"]


class MemoryPages:
    """``pending_page`` and ``started_effects_page`` over the journal's own rows."""

    _rows: MemoryRows
    newest_decisions: Callable[[Sequence[str]], Awaitable[dict[str, Decision]]]
    started_effects: Callable[..., Awaitable[list[Effect]]]

    async def pending_page(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        return await intents_in_memory(
            [e for e in self._rows.entries.values() if session_id in (None, e.intent.session_id)],
            limit=limit,
            after=after,
            newest=self.newest_decisions,
        )

    async def started_effects_page(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        return await effects_in_memory(
            await self.started_effects(session_id),
            limit=limit,
            after=after,
            newest=self.newest_decisions,
            overdue_before=overdue_before,
        )
