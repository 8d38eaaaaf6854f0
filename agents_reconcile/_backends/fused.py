"""What a fused append answers (``_session/fused.py``): a journal's ``open_intent`` and a
revisioned store's compare-and-swap append done as one step on one server, by the backend
that holds both (``redis/fused.py``, ``postgres/fused.py``); and where a backend's
``record_failed`` left the intent of one that raised."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .journal import Opened

__all__ = ["FailedAppend", "Fused"]


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


class FailedAppend(enum.Enum):
    """Where ``record_failed`` left the intent of a fused append that raised (its outcome
    unknown to the caller), decided under the session's lock."""

    RECORDED = "recorded"
    """The journal holds it, failed (or cancelled), under its owner: recorded now, or moved
    there from in flight when the step had recorded it. The next use judges it."""
    TAKEN = "taken"
    """Another holds it (claimed after its lease ran out), or it was settled: its fate is
    theirs."""
    REFUSED = "refused"
    """Not recorded: another intent of the session was unresolved. The step records and
    appends nothing while one is (and its reply was lost or it never ran), so its batch
    was not written, and never will be: there is nothing to judge."""
