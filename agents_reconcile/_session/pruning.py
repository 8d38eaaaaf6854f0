"""Pruning in the background of normal use: no operator has to schedule it.

One ``Pruner`` per journal object in a process. A wrapper's append asks it (a clock read and a
comparison) whether a prune is due; when one is, a task prunes a bounded batch
(``BATCH`` rows of each kind) and the next is due ``INTERVAL`` later, or ``AGAIN`` later when
the batch stopped at its bound with more due. The journal checks its rule again in each step
that removes (``journal.retention.prune``), so a prune that is slow, cancelled or overtaken by
writes removes nothing still needed; a prune that fails is logged and tried again later.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Final

from .._backends.journal import IntentJournal
from .._core.retention import KINDS, Pruned, Retention

__all__ = ["AGAIN", "BATCH", "INTERVAL", "Pruner", "pruner_for"]

logger = logging.getLogger("agents_reconcile")

INTERVAL: Final = 60.0
"""Seconds between two prunes of one journal by one process, the first included."""
AGAIN: Final = 1.0
"""Seconds before the next prune when the last one stopped at its bound."""
BATCH: Final = 500
"""Rows of each kind a prune examines at most."""


class Pruner:
    """The background pruning of one journal object, on whichever event loop appends."""

    def __init__(self, journal: IntentJournal, retention: Retention) -> None:
        self._journal = weakref.ref(journal)
        self.retention = retention
        self.due = time.monotonic() + INTERVAL
        """When the next prune may start (``time.monotonic()``)."""
        self._task: asyncio.Task[Pruned] | None = None
        self.last: Pruned | None = None
        """What the last prune removed (None before the first)."""

    def kick(self) -> None:
        """Start a prune now, unless one is running (call when ``due`` has passed)."""
        journal = self._journal()
        if journal is None or journal.retention is None or self._task is not None:
            return
        self.due = time.monotonic() + INTERVAL
        task = asyncio.ensure_future(journal.retention.prune(self.retention, limit=BATCH))
        self._task = task
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Pruned]) -> None:
        self._task = None
        if task.cancelled():
            return
        failure = task.exception()
        if failure is not None:
            logger.warning("pruning the journal failed; it is tried again later: %s", failure)
            return
        self.last = task.result()
        if not self.last.done:
            self.due = min(self.due, time.monotonic() + AGAIN)

    async def wait(self) -> Pruned | None:
        """The running prune's answer (None when none runs)."""
        task = self._task
        return None if task is None else await asyncio.shield(task)


_PRUNERS: weakref.WeakKeyDictionary[IntentJournal, Pruner] = weakref.WeakKeyDictionary()


def pruner_for(journal: IntentJournal, retention: Retention | None) -> Pruner | None:
    """The journal's pruner in this process (made on first use), or None when the journal has no
    retention component or ``retention`` keeps everything. Wrappers sharing a journal object with
    different retentions have it pruned by the longest of each (None, kept for good, the longest of
    all): one wrapper's shorter retention never removes what another's keeps."""
    if retention is None or retention.keeps_everything or journal.retention is None:
        return None
    try:
        found = _PRUNERS.get(journal)
        if found is None:
            found = _PRUNERS[journal] = Pruner(journal, retention)
    except TypeError:  # a journal that cannot be weakly referenced: pruned by operators only
        return None
    found.retention = _longest(found.retention, retention)
    return found


def _longest(first: Retention, second: Retention) -> Retention:
    spans: dict[str, float | None] = {}
    for kind in KINDS:
        a, b = first.seconds(kind), second.seconds(kind)
        spans[kind] = None if a is None or b is None else max(a, b)
    return Retention(**spans)
