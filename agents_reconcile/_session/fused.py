"""One round trip per append where the journal and a revisioned store share one Redis server.

A write-ahead append to a revisioned store is two steps: open the intent in the journal, then
the store's compare-and-swap append under the intent's id. When both live on one Redis server
(the same host, port and database, plain clients), ``_backends.redis.fused.open_and_append``
does both in one script: the intent is recorded exactly when its batch is appended. Nothing
changes for a reader of either: the journal holds an intent in flight (cleared like any other once
acknowledged), the store a write record under the intent's id. A reply lost on the way back
leaves both or neither, and the record of writes tells which.

Only the store itself qualifies: a wrapper around it (a fault injector, say) may change what an
append does, so its appends go the two-step way.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._backends.store_items import encode_item
from .._core.ownership import Owner
from .._core.records import PendingWrite

__all__ = ["FusedAppend", "fused_append"]


class FusedAppend:
    """Opens an intent and appends its batch in one script."""

    def __init__(self, journal: Any, store: Any, run: Callable[..., Awaitable[Any]]) -> None:
        self._journal = journal
        self._store = store
        self._run = run

    async def __call__(
        self,
        intent: PendingWrite,
        items: Sequence[Any],
        *,
        owner: Owner,
        clearing: str | None,
        seen_write_count: int | None,
    ) -> Any:
        """``_backends.redis.fused.open_and_append``'s answer (a ``Fused``)."""
        keys = await self._store.prepared()
        rows = [encode_item(item, index) for index, item in enumerate(items)]
        return await self._run(
            self._journal,
            intent,
            owner=owner,
            clearing=clearing,
            seen_write_count=seen_write_count,
            store_keys=keys,
            writer=str(owner),
            rows=rows,
        )


async def fused_append(journal: Any, store: Any) -> FusedAppend | None:
    """A ``FusedAppend`` when ``journal`` is a ``RedisJournal`` and ``store`` a
    ``RevisionedRedisSession`` on the same server and database; else None."""
    # Both modules are loaded already when such objects exist: nothing imports redis-py here.
    journals = sys.modules.get("agents_reconcile._backends.redis.journal")
    stores = sys.modules.get("agents_reconcile._backends.redis.store")
    if journals is None or stores is None:
        return None
    if (
        type(journal) is not journals.RedisJournal
        or type(store) is not stores.RevisionedRedisSession
    ):
        return None
    here = await journal.server()
    if here is None or here != await store.server():
        return None
    from .._backends.redis.fused import open_and_append

    return FusedAppend(journal, store, open_and_append)
