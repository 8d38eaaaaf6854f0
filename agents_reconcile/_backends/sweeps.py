"""What the SQL journals' limited sweeps found, kind by kind, and the ``Pruned`` they add up to
(``JournalRetention.prune``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .._core.retention import Pruned

__all__ = ["Swept", "pruned_of"]


@dataclass(frozen=True)
class Swept:
    """What one kind's sweep in one ``prune`` call found (or removed)."""

    rows: int = 0
    bytes: int = 0
    done: bool = True


def pruned_of(found: Mapping[str, Swept]) -> Pruned:
    """The answer of a ``prune`` call whose sweeps found ``found`` (by kind: ``decisions``,
    ``set_aside``, ``receipts``, ``write_counts``; a kind not swept is absent)."""
    none = Swept()
    return Pruned(
        decisions=found.get("decisions", none).rows,
        set_aside=found.get("set_aside", none).rows,
        receipts=found.get("receipts", none).rows,
        write_counts=found.get("write_counts", none).rows,
        bytes=sum(each.bytes for each in found.values()),
        done=all(each.done for each in found.values()),
    )
