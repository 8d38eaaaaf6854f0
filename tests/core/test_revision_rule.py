"""The revisioned rule, alone: facts in, one verdict out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents_reconcile._core.records import Outcome, Reason
from agents_reconcile._core.revision import (
    WRITES_CHECKED,
    WriteRecord,
    classify_revision,
    extended_write_id,
)


def record(revision: int, write_id: str = "other", writer: str = "worker-2") -> WriteRecord:
    return WriteRecord(revision, write_id, writer, "append", 1, 0.0)


def test_found_right_after_the_expected_head_is_committed() -> None:
    verdict = classify_revision(expected=4, write_id="w", head=6, found=record(5, "w"), after=[])
    assert (verdict.outcome, verdict.reason) == (Outcome.COMMITTED, Reason.WRITE_FOUND)
    assert verdict.evidence["write_revision"] == 5


def test_absent_with_the_head_unmoved_is_unchanged() -> None:
    verdict = classify_revision(expected=4, write_id="w", head=4, found=None, after=[])
    assert (verdict.outcome, verdict.reason) == (Outcome.UNCHANGED, Reason.WRITE_ABSENT)


def test_absent_after_others_recorded_writes_is_extended_and_says_whose() -> None:
    after = [record(5, "a", "worker-2"), record(6, "b", "worker-3")]
    verdict = classify_revision(expected=4, write_id="w", head=6, found=None, after=after)
    assert (verdict.outcome, verdict.reason) == (Outcome.EXTENDED, Reason.EXTENDED_BY_OTHERS)
    assert verdict.evidence["writers"] == ["worker-2", "worker-3"]
    assert verdict.evidence["writes"] == 2


def test_a_broken_record_of_writes_is_ambiguous_and_says_what() -> None:
    cases = [
        # the head went back (a restore from an older backup, a reset)
        dict(expected=4, head=3, found=None, after=[]),
        # revisions missing between the expected head and the current one
        dict(expected=4, head=7, found=None, after=[record(5), record(7)]),
        dict(expected=4, head=6, found=None, after=[]),
        # the write found somewhere it cannot be
        dict(expected=4, head=9, found=record(8, "w"), after=[]),
        # the write listed among the others but not found by its id
        dict(expected=4, head=5, found=None, after=[record(5, "w")]),
    ]
    for case in cases:
        verdict = classify_revision(write_id="w", **case)  # type: ignore[arg-type]
        assert verdict.outcome is Outcome.AMBIGUOUS, case
        assert verdict.reason is Reason.WRITE_RECORD_BROKEN
        assert verdict.evidence["problem"]


def test_a_long_extension_is_vouched_for_by_the_writes_read() -> None:
    after = [record(5 + i) for i in range(WRITES_CHECKED)]
    verdict = classify_revision(
        expected=4, write_id="w", head=4 + WRITES_CHECKED + 50, found=None, after=after
    )
    assert verdict.outcome is Outcome.EXTENDED


@given(
    expected=st.integers(0, 50),
    others=st.integers(0, 20),
    landed=st.booleans(),
    more=st.integers(0, 20),
)
def test_an_intact_record_is_never_ambiguous(
    expected: int, others: int, landed: bool, more: int
) -> None:
    """Build a consistent history (others' writes, perhaps ours, more writes): the verdict is
    exactly what happened."""
    history = []
    revision = expected
    mine = None
    if landed:
        revision += 1
        mine = record(revision, "w", "me")
        history.append(mine)
        extra = more
    else:
        extra = others
    for _ in range(extra):
        revision += 1
        history.append(record(revision, f"x{revision}"))
    verdict = classify_revision(
        expected=expected,
        write_id="w",
        head=revision,
        found=mine,
        after=[] if mine else history,
    )
    if landed:
        assert verdict.outcome is Outcome.COMMITTED
    elif extra == 0:
        assert verdict.outcome is Outcome.UNCHANGED
    else:
        assert verdict.outcome is Outcome.EXTENDED


def test_a_replay_after_an_extension_is_found_by_its_own_id() -> None:
    """A write replayed after others' writes (its own id) is committed where it landed."""
    replay = record(8, extended_write_id("w"))
    verdict = classify_revision(
        expected=4, write_id="w", head=9, found=None, after=[], found_extended=replay
    )
    assert (verdict.outcome, verdict.reason) == (Outcome.COMMITTED, Reason.WRITE_FOUND)
    assert verdict.evidence["write_revision"] == 8
    assert verdict.evidence["replayed_after_extension"] is True


def test_a_write_found_both_as_made_and_as_replayed_is_ambiguous() -> None:
    """Landing twice, or a replay where no others' writes could precede it, is broken."""
    twice = classify_revision(
        expected=4,
        write_id="w",
        head=9,
        found=record(5, "w"),
        after=[],
        found_extended=record(8, extended_write_id("w")),
    )
    misplaced = classify_revision(
        expected=4,
        write_id="w",
        head=5,
        found=None,
        after=[],
        found_extended=record(5, extended_write_id("w")),
    )
    for verdict in (twice, misplaced):
        assert (verdict.outcome, verdict.reason) == (Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN)


def test_a_replay_listed_among_the_others_but_not_found_is_ambiguous() -> None:
    """The replay's id in the writes after the expected head, not found by id: broken."""
    after = [record(5), record(6, extended_write_id("w"))]
    verdict = classify_revision(expected=4, write_id="w", head=6, found=None, after=after)
    assert verdict.outcome is Outcome.AMBIGUOUS
