"""Judges: they read what a rule needs about one pending intent, and ask the rule.

``judge`` is the step the settler and the resolver take: the tail judge reads the store's
newest items and asks the fingerprint rule (``classify``); the revision judge reads a revisioned
store's head and record of writes and asks the revision rule (``revision``); then the effects'
receipts are consulted (``vouched_by_receipts``), and the verdict goes to the trail. None of
them writes anything, except a denial of an intent the session cannot judge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core.classify import Observation, Verdict, classify, observation_window
from .._core.fingerprint import digest_items
from .._core.observability import judged
from .._core.records import Outcome, PendingWrite, Reason
from .._core.revision import (
    WRITES_CHECKED,
    RevisionedStore,
    WriteRecord,
    classify_revision,
    extended_write_id,
)
from .._effects.evidence import vouched_by_receipts
from .inner import InnerSession, without_reconciling

if TYPE_CHECKING:
    from .state import SessionState

__all__ = ["judge", "judge_revision", "judge_tail"]


async def judge(state: SessionState, intent: PendingWrite, wrapper: Any) -> Verdict:
    """What the store's history says about ``intent`` now (the rule, on a fresh read), with
    what the effects' receipts add, recorded in the trail."""
    client = state.client
    with client.trail.step(
        "judge", session_id=intent.session_id, intent_id=intent.intent_id
    ) as traced:
        if intent.expected_revision is None:
            verdict = await judge_tail(state.inner, intent, wrapper)
        elif state.store is None:
            await client.deny(
                intent,
                Outcome.AMBIGUOUS,
                Reason.BACKEND_MISMATCH,
                {"problem": "a revisioned intent, and the session is not revisioned"},
                binding=True,
            )
        else:
            verdict = await judge_revision(state.store, intent)
        verdict = await vouched_by_receipts(client, intent, verdict)
        judged(traced, verdict)
    return verdict


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
