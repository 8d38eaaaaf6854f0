"""The memory journal's sealing component (``JournalSealing``): the ids of the keys its
deployment seals under, a set among the journal's rows."""

from __future__ import annotations

from collections.abc import Sequence

from .rows import MemoryRows

__all__ = ["MemorySealing"]


class MemorySealing:
    """``JournalSealing`` over a memory journal's rows: ids are only ever added."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows

    async def keys(self) -> frozenset[str]:
        return frozenset(self._rows.sealing)

    async def mark(self, key_ids: Sequence[str]) -> None:
        self._rows.sealing.update(key_ids)
