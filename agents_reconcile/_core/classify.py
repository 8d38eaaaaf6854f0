"""The rule: what an observed history says about a pending write.

Pure functions over digests and counts: no I/O, no clock, no asyncio. The session reads the
tail, calls ``classify``, and acts on the verdict.

Given the digests of the items before the write (``before``, and whether they were the whole
history) and of the batch, the observed tail says:

- it ends with ``before + batch``            -> COMMITTED (never replay)
- it ends with ``before`` (and, where before
  was the whole history, holds nothing more) -> UNCHANGED (the batch is missing)
- it ends with ``before`` + the batch's first
  n items, n a whole number of requests of a
  store that writes a batch in requests of
  ``chunk`` items (each all or nothing)      -> PARTIAL (the rest is missing)
- more than one reading fits (repeated
  content), none does (someone changed the
  history), or only a strict prefix of the
  batch is there that is not a whole number
  of requests                                -> AMBIGUOUS (fail closed)

Nothing here searches for "similar" items or repairs anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .records import Outcome, PendingWrite, Reason

__all__ = ["Observation", "Verdict", "classify", "classify_digests", "observation_window"]


@dataclass(frozen=True, slots=True)
class Observation:
    """The authoritative tail as re-read from the store.

    ``tail`` holds the digests of at most ``observation_window(intent)`` newest items, oldest
    first; a shorter tail is the whole history. ``count`` is the number of items in the
    whole history where the store knows it, else ``None``.
    """

    tail: tuple[str, ...]
    count: int | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome, its reason, and the payload-free evidence that led to it."""

    outcome: Outcome
    reason: Reason
    evidence: dict[str, Any] = field(default_factory=dict)


def observation_window(intent: PendingWrite) -> int:
    """How many newest items to read: one more than before + batch, to see past a whole history."""
    return len(intent.before_digests) + len(intent.batch_digests) + 1


def classify(intent: PendingWrite, observed: Observation) -> Verdict:
    """Classify ``intent`` against ``observed``."""
    return classify_digests(
        before=intent.before_digests,
        before_is_whole=intent.before_is_whole,
        batch=intent.batch_digests,
        tail=observed.tail,
        window=observation_window(intent),
        count_before=intent.persisted_count,
        count=observed.count,
        chunk=intent.chunk,
    )


def classify_digests(
    *,
    before: Sequence[str],
    before_is_whole: bool,
    batch: Sequence[str],
    tail: Sequence[str],
    window: int | None = None,
    count_before: int | None = None,
    count: int | None = None,
    chunk: int | None = None,
) -> Verdict:
    """The rule over plain digests (``classify`` unpacks a ``PendingWrite`` into this)."""
    before = tuple(before)
    batch = tuple(batch)
    tail = tuple(tail)
    if window is not None and len(tail) > window:
        tail = tail[len(tail) - window :]
    whole_tail = window is None or len(tail) < window

    def holds(expected: tuple[str, ...], added: int) -> bool:
        if not _ends_with(tail, expected):
            return False
        if before_is_whole and (not whole_tail or len(tail) != len(expected)):
            return False
        return count is None or count_before is None or count == count_before + added

    committed = holds(before + batch, len(batch))
    unchanged = holds(before, 0)
    evidence: dict[str, Any] = {
        "before": list(before),
        "before_is_whole": before_is_whole,
        "batch": list(batch),
        "observed": list(tail),
    }
    if count is not None:
        evidence["count"] = count
    if count_before is not None:
        evidence["count_before"] = count_before

    partial = [n for n in range(1, len(batch)) if holds(before + batch[:n], n)]
    # A clean verdict needs exactly one reading of the tail: with repeated content a partial
    # write can look like a full one or like none, and then neither can be vouched for.
    if committed + unchanged + bool(partial) > 1:
        return Verdict(Outcome.AMBIGUOUS, Reason.INDISTINGUISHABLE, evidence)
    if committed:
        return Verdict(Outcome.COMMITTED, Reason.BATCH_PRESENT, evidence)
    if unchanged:
        return Verdict(Outcome.UNCHANGED, Reason.BATCH_ABSENT, evidence)
    if partial:
        evidence["landed"] = landed = partial[-1]
        if chunk is not None and landed % chunk == 0:
            evidence["chunk"] = chunk
            return Verdict(Outcome.PARTIAL, Reason.CHUNKS_LANDED, evidence)
        return Verdict(Outcome.AMBIGUOUS, Reason.PARTIAL_COMMIT, evidence)
    return Verdict(Outcome.AMBIGUOUS, Reason.HISTORY_CHANGED, evidence)


def _ends_with(sequence: tuple[str, ...], suffix: tuple[str, ...]) -> bool:
    if not suffix:
        return True
    return len(suffix) <= len(sequence) and sequence[len(sequence) - len(suffix) :] == suffix
