"""The policy, alone: an outcome and the configuration in, one step out."""

from __future__ import annotations

import pytest

from agents_reconcile._core.policy import Step, refused_append_step, settlement_step
from agents_reconcile._core.records import Outcome


@pytest.mark.parametrize(
    ("outcome", "on_unchanged", "on_extended", "step"),
    [
        (Outcome.COMMITTED, "replay", "fail", Step.SETTLE),
        (Outcome.COMMITTED, "fail", "append", Step.SETTLE),
        (Outcome.UNCHANGED, "replay", "fail", Step.REPLAY),
        (Outcome.UNCHANGED, "fail", "append", Step.LEAVE_FOR_OPERATOR),
        (Outcome.EXTENDED, "replay", "fail", Step.REFUSE),
        (Outcome.EXTENDED, "replay", "append", Step.REPLAY_AFTER_OTHERS),
        (Outcome.EXTENDED, "fail", "append", Step.REPLAY_AFTER_OTHERS),
        (Outcome.AMBIGUOUS, "replay", "append", Step.REFUSE),
    ],
)
def test_a_pending_intents_step(
    outcome: Outcome, on_unchanged: str, on_extended: str, step: Step
) -> None:
    """Committed settles; unchanged replays unless left to an operator; extended goes after
    the others only under on_extended="append"; ambiguous is refused."""
    assert settlement_step(outcome, on_unchanged=on_unchanged, on_extended=on_extended) is step


@pytest.mark.parametrize(
    ("outcome", "on_extended", "step"),
    [
        (Outcome.COMMITTED, "fail", Step.SETTLE),
        (Outcome.EXTENDED, "append", Step.REPLAY_AFTER_OTHERS),
        (Outcome.EXTENDED, "fail", Step.REFUSE),
        (Outcome.UNCHANGED, "append", Step.REFUSE),
        (Outcome.AMBIGUOUS, "append", Step.REFUSE),
    ],
)
def test_a_refused_compare_and_swap(outcome: Outcome, on_extended: str, step: Step) -> None:
    """A refused append that landed after all is done; after others it is built again only
    under on_extended="append"; anything else is refused."""
    assert refused_append_step(outcome, on_extended=on_extended) is step
