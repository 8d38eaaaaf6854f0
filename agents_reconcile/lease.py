"""A holder's lease on an intent, kept fresh while its append or replay runs.

A worker holds an intent from the moment it opens or claims it until it clears or settles it.
Others judge its lease by the journal's clock: it runs out ``lease_seconds`` after the last
change or renewal. The holder renews every third of the lease, with the same compare-and-set
that claimed it (its fencing token expected), so a renewal never extends a claim someone else
took. Its own margin is the other two thirds: it starts no write to the store once two thirds
of the lease passed without a confirmed renewal, when others may be about to take over.

Unrenewed (the operation ended before the first third) the cost is one timer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import TracebackType
from typing import TYPE_CHECKING, Final

from .errors import JournalError, LeaseLost
from .journal.base import IntentState

if TYPE_CHECKING:
    from .journal_client import JournalClient

__all__ = ["HOLDER_SHARE", "Renewal"]

logger = logging.getLogger("agents_reconcile")

HOLDER_SHARE: Final = 2 / 3
"""The part of the lease a holder counts on: it renews at a third and stops starting writes
at two thirds, a margin of a third for the journal's reply times and the clocks' drift."""


class Renewal:
    """Keeps ``intent_id`` (held in ``state`` under ``fence``) leased while the block runs."""

    def __init__(
        self,
        client: JournalClient,
        intent_id: str,
        *,
        state: IntentState,
        fence: int,
        lease_seconds: float,
    ) -> None:
        self._client = client
        self.intent_id = intent_id
        self._state = state
        self.fence = fence
        self._lease = lease_seconds
        self._confirmed = time.monotonic()
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.lost = False
        """Whether a renewal found the intent no longer held under ``fence``."""

    def __enter__(self) -> Renewal:
        self._confirmed = time.monotonic()
        self._schedule()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def check(self) -> None:
        """Raise ``LeaseLost`` unless the lease is still this holder's to count on: before a
        write to the store starts."""
        if self.lost:
            raise LeaseLost(
                f"intent {self.intent_id}: another worker took it over", intent_id=self.intent_id
            )
        if time.monotonic() - self._confirmed >= self._lease * HOLDER_SHARE:
            raise LeaseLost(
                f"intent {self.intent_id}: no renewal of its lease confirmed for "
                f"{time.monotonic() - self._confirmed:.1f} s of {self._lease:g}",
                intent_id=self.intent_id,
            )

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(self._lease / 3, self._due)

    def _due(self) -> None:
        self._handle = None
        self._task = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        me = self._client.owner
        try:
            renewed = await self._client.journal.transition(
                self.intent_id,
                state=self._state,
                owner=me,
                expect_state=self._state,
                expect_owner=me,
                expect_fence=self.fence,
            )
        except JournalError:
            # Tried again at the next third; meanwhile the margin runs down (``check``).
            logger.warning("could not renew the lease on intent %s", self.intent_id, exc_info=True)
            renewed = True
        except Exception:
            # The journal refused to touch it at all (a journal that raises on a settled
            # intent): it is not held under this token any more.
            logger.debug("renewal of intent %s refused", self.intent_id, exc_info=True)
            renewed = False
        else:
            if renewed:
                self._confirmed = time.monotonic()
        self._task = None
        if not renewed:
            self.lost = True
            return
        self._schedule()
