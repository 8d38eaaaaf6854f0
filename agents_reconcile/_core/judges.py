"""Judges: they read what a rule needs about one pending intent, and ask the rule.

The tail judge reads the store's newest items and asks the fingerprint rule (``classify``); the
revision judge reads a revisioned store's head and record of writes and asks the revision rule
(``revision``). Neither writes anything.
"""

from __future__ import annotations

from typing import Any

from .._session.inner import InnerSession, without_reconciling
from .classify import Observation, Verdict, classify, observation_window
from .fingerprint import digest_items
from .records import PendingWrite
from .revision import (
    WRITES_CHECKED,
    RevisionedStore,
    WriteRecord,
    classify_revision,
    extended_write_id,
)

__all__ = ["judge_revision", "judge_tail"]


async def judge_tail(inner: InnerSession, intent: PendingWrite, wrapper: Any) -> Verdict:
    """Read the tail the intent's rule needs (never reconciling inside the read: the inner
    session may hold a lock of its own around it) and classify the intent by fingerprints,
    under the scheme its record was made with."""
    window = observation_window(intent)
    with without_reconciling():
        items = await inner.read(window, wrapper)
    tail = digest_items(items[-window:], ignore_ids=intent.ignore_ids, scheme=intent.scheme)
    return classify(intent, Observation(tail))


async def judge_revision(store: RevisionedStore, intent: PendingWrite) -> Verdict:
    """What the store's record of writes says about ``intent``. The head is read before the
    writes after it, which the rule relies on."""
    assert intent.expected_revision is not None
    found = await store.find_write(intent.intent_id)
    found_extended = await store.find_write(extended_write_id(intent.intent_id))
    head = await store.head()
    after: list[WriteRecord] = []
    if found is None and found_extended is None and head > intent.expected_revision:
        after = await store.writes_after(intent.expected_revision, limit=WRITES_CHECKED)
    return classify_revision(
        expected=intent.expected_revision,
        write_id=intent.intent_id,
        head=head,
        found=found,
        after=after,
        found_extended=found_extended,
    )
