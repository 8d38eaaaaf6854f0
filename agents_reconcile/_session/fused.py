"""One round trip per append where the journal and a revisioned store share one server.

A write-ahead append to a revisioned store is two steps: open the intent in the journal, then
the store's compare-and-swap append under the intent's id. When both live on one server, the
backend that holds them does both in one step: on Redis (the same host, port and database,
plain clients) ``_backends.redis.fused.open_and_append``, one script; on PostgreSQL (one
database reached as one role, ``_backends.postgres.fused``) one statement; each backend's
``Pair`` of the two is made once per writer. The intent is
recorded exactly when its batch is appended. Nothing changes for a reader of either: the
journal holds an intent in flight (cleared like any other once acknowledged), the store a
write record under the intent's id. A reply lost on the way back leaves both or neither, and
the record of writes tells which.

A step that raised is left failed in the journal, as a two-step append that raised is. Where
the backend can (``record_failed``), that is decided under the session's lock with the check
the step makes: while another intent of the session is unresolved, the step records and
appends nothing, so its batch was not written and is not recorded either (recorded, it would
be a second intent expecting the same revision, and be judged extended by the other's write
once that one is settled).

Only the store itself qualifies: a wrapper around it (a fault injector, say) may change what an
append does, so its appends go the two-step way.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from .._backends.fused import FailedAppend
from .._backends.journal import IntentState
from .._core.ownership import Owner
from .._core.records import PendingWrite

__all__ = ["FusedAppend", "fused_append"]

Append = Callable[..., Awaitable[Any]]
"""The backend's one step: ``append(intent, items, *, owner, clearing, seen_write_count)``,
answering a ``_backends.fused.Fused``."""
RecordFailed = Callable[..., Awaitable[FailedAppend]]
"""The backend's ``record_failed(intent, *, state, owner, clearing)`` for the pair."""


class FusedAppend:
    """Opens an intent and appends its batch in one step (``append``, the backend's, for one
    journal and store); ``record_failed``, where the backend has one, leaves the intent of a
    step that raised in the journal."""

    __slots__ = ("_record_failed", "append")

    def __init__(self, append: Append, record_failed: RecordFailed | None = None) -> None:
        self.append = append
        """``append(intent, items, *, owner, clearing, seen_write_count)``: the backend's
        ``open_and_append`` of ``items``, answering a ``_backends.fused.Fused``."""
        self._record_failed = record_failed

    def failed_recording(
        self, intent: PendingWrite, *, owner: Owner, clearing: str | None
    ) -> Callable[[IntentState], Awaitable[FailedAppend]] | None:
        """How to leave ``intent`` failed (or cancelled: the state given) in the journal once
        its step (under ``owner``, clearing ``clearing``) raised; None where the backend has
        no such check (the journal's ``record`` serves)."""
        record_failed = self._record_failed
        if record_failed is None:
            return None

        async def recording(state: IntentState) -> FailedAppend:
            return await record_failed(intent, state=state, owner=owner, clearing=clearing)

        return recording


def _pair(journal: Any, store: Any, backend: str, journal_type: str, store_type: str) -> bool:
    # Both modules are loaded already when such objects exist: nothing imports a driver here.
    journals = sys.modules.get(f"agents_reconcile._backends.{backend}.journal")
    stores = sys.modules.get(f"agents_reconcile._backends.{backend}.store")
    return (
        journals is not None
        and stores is not None
        and type(journal) is getattr(journals, journal_type)
        and type(store) is getattr(stores, store_type)
    )


async def fused_append(journal: Any, store: Any) -> FusedAppend | None:
    """A ``FusedAppend`` when ``journal`` is a ``RedisJournal`` and ``store`` a
    ``RevisionedRedisSession`` on the same server and database, with the same replica wait, or
    ``journal`` a ``PostgresJournal`` and ``store`` a ``RevisionedPostgresSession`` in the same
    database reached as the same role; else None."""
    if _pair(journal, store, "redis", "RedisJournal", "RevisionedRedisSession"):
        here = await journal.server()
        if here is None or here != await store.server():
            return None
        if journal.replica_wait != store.replica_wait:
            return None  # one script, one wait: the store's writes wait as their own ask
        from .._backends.redis import fused as redis_fused

        return FusedAppend(redis_fused.Pair(journal, store).append)
    if _pair(journal, store, "postgres", "PostgresJournal", "RevisionedPostgresSession"):
        from .._backends.postgres import fused

        if not await fused.same_database(journal, store):
            return None
        pair = fused.Pair(journal, store)
        return FusedAppend(pair.append, pair.record_failed)
    return None
