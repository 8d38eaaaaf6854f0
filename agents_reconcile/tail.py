"""The wrapper's memory of the history's newest items: pure, no I/O.

A write-ahead wrapper remembers the digests of the newest items it saw, together with the
journal's count of the session's writes at that moment. An append may build its intent on that
memory instead of reading the store: the journal records the intent only while the count is
still the remembered one, so a stale memory never stands behind a decision.

After a settlement it remembers the batch just vouched for and the tail that ended with it, to
recognise the same batch sent again while the history still ends with it (the usual retry after
a lost acknowledgement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["KEPT_DIGESTS", "SettledBatch", "TailMemory", "TailView"]

KEPT_DIGESTS: Final = 32
"""How many of the newest items' digests the memory keeps."""


@dataclass(frozen=True)
class TailView:
    """Digests of the newest items, oldest first; ``whole`` if they are the whole history;
    ``count``, the journal's count of the session's writes when they were seen (None: a view
    no count vouches for, which is used once and not remembered)."""

    digests: tuple[str, ...]
    whole: bool
    count: int | None = None


@dataclass(frozen=True)
class SettledBatch:
    """The batch a settlement just vouched for, and the tail that ended with it."""

    batch: tuple[str, ...]
    tail: tuple[str, ...]


class TailMemory:
    """What one wrapper remembers of its session's tail."""

    def __init__(self) -> None:
        self._view: TailView | None = None
        self._settled: SettledBatch | None = None

    @property
    def view(self) -> TailView | None:
        return self._view

    @property
    def settled(self) -> SettledBatch | None:
        return self._settled

    def wanted(self, needed: int) -> int:
        """How many newest digests to look at before an append of ``needed - 1`` items (more
        right after a settlement: enough to recognise the settled batch sent again)."""
        return max(needed, len(self._settled.tail) if self._settled is not None else 0)

    def trusted(self, wanted: int) -> TailView | None:
        """The remembered view an append may build on without reading, or None to read.

        Right after a settlement the retried-batch check decides without the journal's
        verdict, so it must see the store itself."""
        view = self._view
        if self._settled is not None or view is None or view.count is None:
            return None
        return view if view.whole or len(view.digests) >= wanted else None

    def remember(self, view: TailView) -> None:
        """Keep a view just read, if a write count vouches for it."""
        if view.count is not None:
            self._view = view

    def observe(
        self, digests: Sequence[str] | None, *, read: int, complete: bool, count: int
    ) -> None:
        """A read of ``read`` newest items (``digests`` of the last ``KEPT_DIGESTS`` of them;
        None when they could not be digested) while the journal counted ``count`` writes;
        ``complete`` when the read returned all it could."""
        if digests is None:
            self._view = None
            return
        digests = tuple(digests[-KEPT_DIGESTS:])
        known = self._view
        if (
            not complete
            and known is not None
            and known.count == count
            and len(known.digests) > len(digests)
            and known.digests[len(known.digests) - len(digests) :] == digests
        ):
            # A short read that agrees with what is known says nothing new: keep the longer view.
            return
        self._view = TailView(digests, complete and read <= KEPT_DIGESTS, count)

    def extend(self, digests: Sequence[str], *, count: int) -> None:
        """The store acknowledged an append of ``digests`` counted as write ``count``."""
        if self._view is None:
            return
        merged = self._view.digests + tuple(digests)
        whole = self._view.whole and len(merged) <= KEPT_DIGESTS
        self._view = TailView(merged[-KEPT_DIGESTS:], whole, count)

    def forget_view(self) -> None:
        """The store may have changed: the remembered view is void."""
        self._view = None

    def forget(self) -> None:
        """Forget the view and the settled batch."""
        self._view = None
        self._settled = None

    def settle(self, batch: tuple[str, ...], before: tuple[str, ...]) -> None:
        """A settlement vouched for ``batch`` on top of ``before``; being a counted write, it
        voids the view (the next append reads the tail in any case)."""
        self._view = None
        self._settled = SettledBatch(batch, before + batch)

    def drop_settled(self) -> None:
        self._settled = None

    def is_retried_batch(self, digests: tuple[str, ...], tail: Sequence[str]) -> bool:
        """Whether ``digests`` is the batch just settled and ``tail`` still ends with it."""
        settled = self._settled
        if settled is None or settled.batch != digests:
            return False
        return tuple(tail[-len(settled.tail) :]) == settled.tail
