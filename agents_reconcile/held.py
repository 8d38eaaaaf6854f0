"""What one wrapper holds between calls, besides its memory of the tail (``tail``).

``HeldIntents``: its own intents outside the journal (recorded only here because the journal
failed; acknowledged but not yet cleared from the journal) and copies of the caller's items for
the appends that failed here. ``KnownHead``: on a revisioned store, the head its next append
builds on, and the batch just settled there.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from .errors import FingerprintError
from .fingerprint import digest_items
from .records import PendingWrite

__all__ = ["HeldIntents", "KnownHead"]

logger = logging.getLogger("agents_reconcile")


@dataclass
class HeldIntents:
    """This wrapper's own intents, as far as the journal does not hold them."""

    unjournaled: dict[str, PendingWrite] = field(default_factory=dict)
    """Failed appends the journal could not record: kept here, settled before the next use."""
    undiscarded: set[str] = field(default_factory=set)
    """Acknowledged appends whose intent the journal could not clear yet."""
    in_hand: dict[str, list[Any]] = field(default_factory=dict)
    """Copies of the caller's own items for appends that failed here: a replay writes
    exactly what the caller gave, not the journal's copy of it."""

    def any(self) -> bool:
        return bool(self.unjournaled or self.undiscarded)

    def keep_in_hand(self, intent: PendingWrite, items: list[Any]) -> None:
        try:
            self.in_hand[intent.intent_id] = copy.deepcopy(items)
        except Exception:
            # An item that refuses to be copied: the journal's copy, equal as JSON, serves.
            logger.debug("items of intent %s could not be copied", intent.intent_id)

    def replay_batch(self, intent: PendingWrite) -> list[Any]:
        """What a replay writes: the caller's own items while this wrapper holds them (the
        journal's copy is equal as JSON, but the caller's are what the caller gave)."""
        kept = self.in_hand.get(intent.intent_id)
        if kept is not None:
            try:
                digests = digest_items(kept, ignore_ids=intent.ignore_ids, scheme=intent.scheme)
            except FingerprintError:
                digests = ()
            if digests == intent.batch_digests:
                return copy.deepcopy(kept)
        return copy.deepcopy(list(intent.batch))

    def settled(self, intent_id: str) -> None:
        self.unjournaled.pop(intent_id, None)
        self.in_hand.pop(intent_id, None)


@dataclass
class KnownHead:
    """On a revisioned store: the head this wrapper's next append builds on (None: read it
    first), and the batch a settlement just vouched for with the head after it."""

    head: int | None = None
    settled_at: tuple[tuple[str, ...], int] | None = None
