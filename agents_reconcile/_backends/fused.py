"""What a fused append answers (``_session/fused.py``): a journal's ``open_intent`` and a
revisioned store's compare-and-swap append done as one step on one server, by the backend
that holds both (``redis/fused.py``, ``postgres/fused.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from .journal import Opened

__all__ = ["Fused"]


@dataclass(frozen=True)
class Fused:
    """What ``open_and_append`` did. ``opened`` as ``open_intent`` answers; ``revision``: the
    store's new head when the intent was recorded and appended now; ``refused``: ``'head'``
    (the store is at ``head``), ``'known'`` (the write id is there) or ``'stale_state'`` (the
    count is past ``seen_write_count``), nothing recorded or appended."""

    opened: Opened
    revision: int | None = None
    refused: str | None = None
    head: int | None = None
