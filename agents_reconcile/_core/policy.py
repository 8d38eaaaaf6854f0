"""The policy: what to do with a verdict, given the configuration. Pure, no I/O.

Both rules end here, the fingerprint rule (``classify``) and the revision rule (``revision``):
a verdict's outcome and the user's choices (``on_unchanged``, ``on_extended``) give one step.
"""

from __future__ import annotations

import enum
from typing import Final

from .records import Outcome

__all__ = [
    "PROVEN_ABSENT",
    "Resolution",
    "Step",
    "refused_append_step",
    "resolution_step",
    "settlement_step",
]


class Resolution(enum.Enum):
    """An operator's answer about one pending intent (``ReconcilingSession.resolve``)."""

    COMMITTED = "committed"
    """The batch is in the history: settle it, never replay it."""
    REPLAY = "replay"
    """Append the batch now, once, then settle it."""
    ABANDON = "abandon"
    """Drop the intent and write nothing: the history stays as it is."""


class Step(enum.Enum):
    """What the session does next about one write."""

    SETTLE = "settle"
    """The batch is there: close the intent, write nothing."""
    REPLAY = "replay"
    """The batch is missing and nothing else moved: write it once, where it was meant to go."""
    REPLAY_REST = "replay_rest"
    """Whole requests of the batch landed and the rest did not: write the rest once, in order."""
    REPLAY_AFTER_OTHERS = "replay_after_others"
    """The batch is missing and others wrote since (revisioned): write it after them."""
    LEAVE_FOR_OPERATOR = "leave_for_operator"
    """The batch is missing and the configuration leaves replaying it to an operator."""
    REFUSE = "refuse"
    """Nobody can vouch for the history, or the configuration refuses to go on from it."""


def settlement_step(outcome: Outcome, *, on_unchanged: str, on_extended: str) -> Step:
    """The step for a pending intent judged ``outcome``."""
    if outcome is Outcome.COMMITTED:
        return Step.SETTLE
    if outcome is Outcome.UNCHANGED:
        return Step.REPLAY if on_unchanged == "replay" else Step.LEAVE_FOR_OPERATOR
    if outcome is Outcome.PARTIAL:
        return Step.REPLAY_REST if on_unchanged == "replay" else Step.LEAVE_FOR_OPERATOR
    if outcome is Outcome.EXTENDED and on_extended == "append":
        return Step.REPLAY_AFTER_OTHERS
    return Step.REFUSE


def refused_append_step(outcome: Outcome, *, on_extended: str) -> Step:
    """The step after a revisioned store refused an append's compare-and-swap, judged
    ``outcome``: it landed after all (a driver retried it), it may go after the others
    (build it again on the new head), or the append is refused."""
    if outcome is Outcome.COMMITTED:
        return Step.SETTLE
    if outcome is Outcome.EXTENDED and on_extended == "append":
        return Step.REPLAY_AFTER_OTHERS
    return Step.REFUSE


PROVEN_ABSENT: Final = (Outcome.UNCHANGED, Outcome.EXTENDED, Outcome.PARTIAL)
"""The outcomes in which the store shows the batch (or part of it) missing."""


def resolution_step(resolution: Resolution, outcome: Outcome | None, *, override: bool) -> Step:
    """The step for an operator's ``resolution`` of an intent judged ``outcome`` now (None:
    not judged, the store was not read). ``abandon`` is the operator's word and writes
    nothing. ``committed`` writes nothing either, and is refused where the store proves the
    batch (or part of it) missing (``PROVEN_ABSENT``): settling it as written would lose it;
    ``override`` settles it regardless. ``replay`` appends only where the rule still sees the
    history the write was meant for (or, on a revisioned store, others' writes after it);
    where the rule cannot vouch for the history, ``override`` appends it at the end
    regardless. Where whole requests of it landed (``PARTIAL``), only the rest is appended.
    Never where the rule found the batch already written, and never unjudged: those are
    refused."""
    if resolution is Resolution.COMMITTED:
        return Step.REFUSE if outcome in PROVEN_ABSENT and not override else Step.SETTLE
    if resolution is not Resolution.REPLAY:
        return Step.SETTLE
    if outcome is Outcome.UNCHANGED:
        return Step.REPLAY
    if outcome is Outcome.PARTIAL:
        return Step.REPLAY_REST
    if outcome is Outcome.EXTENDED:
        return Step.REPLAY_AFTER_OTHERS
    if override and outcome is Outcome.AMBIGUOUS:
        return Step.REPLAY_AFTER_OTHERS
    return Step.REFUSE
