"""The rule: table tests for every outcome and reason, and properties over random histories.

Digests are plain strings here: the rule only compares them. Table rows spell histories as
strings of one-letter digests ("xab" is three items), oldest first.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents_reconcile._core.classify import (
    Observation,
    Verdict,
    classify,
    classify_digests,
    observation_window,
)
from agents_reconcile._core.records import BackendIdentity, Outcome, PendingWrite, Reason

COMMITTED = Outcome.COMMITTED
UNCHANGED = Outcome.UNCHANGED
AMBIGUOUS = Outcome.AMBIGUOUS


# -- builders -----------------------------------------------------------------------------


def digest(n: int) -> str:
    """A digest-shaped string for a small int (equal ints give equal digests)."""
    return f"{n:064x}"


def intent_for(history: list[str], batch: list[str], *, count: bool = False) -> PendingWrite:
    """The intent the session records when appending ``batch`` on top of ``history``."""
    k = len(batch) + 1
    return PendingWrite(
        intent_id="intent-1",
        session_id="session-1",
        backend=BackendIdentity("tests.FakeSession"),
        batch=tuple({"digest": d} for d in batch),
        batch_digests=tuple(batch),
        before_digests=tuple(history[-k:]),
        before_is_whole=len(history) <= k,
        created_at=1.0,
        persisted_count=len(history) if count else None,
    )


def observe(intent: PendingWrite, observed: list[str], *, count: bool = False) -> Verdict:
    """Classify as the session does: read the newest ``observation_window`` items, then rule."""
    window = observation_window(intent)
    tail = tuple(observed[-window:])
    return classify(intent, Observation(tail, len(observed) if count else None))


def rule(
    before: str,
    batch: str,
    observed: str,
    *,
    whole: bool,
    count_before: int | None = None,
    count: int | None = None,
) -> Verdict:
    """``classify_digests`` over one-letter digests, fed the tail the session would read."""
    window = len(before) + len(batch) + 1
    return classify_digests(
        before=list(before),
        before_is_whole=whole,
        batch=list(batch),
        tail=list(observed)[-window:],
        window=window,
        count_before=count_before,
        count=count,
    )


# -- the table ----------------------------------------------------------------------------

# (before, before_is_whole, batch, observed history, outcome, reason)
TABLE = [
    # COMMITTED: the history ends with before + batch.
    ("ab", False, "c", "xab" + "c", COMMITTED, Reason.BATCH_PRESENT),
    ("ab", False, "c", "qqqqxab" + "c", COMMITTED, Reason.BATCH_PRESENT),
    ("abc", False, "de", "wxabc" + "de", COMMITTED, Reason.BATCH_PRESENT),
    ("", True, "c", "c", COMMITTED, Reason.BATCH_PRESENT),
    ("", True, "cd", "cd", COMMITTED, Reason.BATCH_PRESENT),
    ("a", True, "c", "ac", COMMITTED, Reason.BATCH_PRESENT),
    # Whole-ness tells a repeated batch from the history before it.
    ("a", True, "a", "aa", COMMITTED, Reason.BATCH_PRESENT),
    # UNCHANGED: the history ends with before (and, if before was whole, nothing more).
    ("ab", False, "c", "xab", UNCHANGED, Reason.BATCH_ABSENT),
    ("ab", False, "c", "qqqqxab", UNCHANGED, Reason.BATCH_ABSENT),
    ("", True, "c", "", UNCHANGED, Reason.BATCH_ABSENT),
    ("a", True, "c", "a", UNCHANGED, Reason.BATCH_ABSENT),
    ("a", True, "a", "a", UNCHANGED, Reason.BATCH_ABSENT),
    ("ab", True, "cd", "ab", UNCHANGED, Reason.BATCH_ABSENT),
    # AMBIGUOUS / indistinguishable: both readings fit because of repeated content.
    ("aa", False, "a", "aaa", AMBIGUOUS, Reason.INDISTINGUISHABLE),
    ("aa", False, "a", "aaaa", AMBIGUOUS, Reason.INDISTINGUISHABLE),
    ("bab", False, "ab", "ababab", AMBIGUOUS, Reason.INDISTINGUISHABLE),
    # AMBIGUOUS / history_changed: neither reading fits.
    ("ab", False, "c", "xaz", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("ab", False, "c", "", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("ab", False, "c", "xabcy", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("ab", False, "c", "xabyc", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("ab", False, "c", "xbac", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("", True, "c", "z", AMBIGUOUS, Reason.HISTORY_CHANGED),
    # Extra items beyond a whole history, after it, in front of it, or doubling the batch.
    ("", True, "c", "cc", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("", True, "c", "zc", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("a", True, "c", "acz", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("a", True, "c", "zac", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("a", True, "c", "za", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("a", True, "c", "acc", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("a", True, "a", "aaa", AMBIGUOUS, Reason.HISTORY_CHANGED),
    ("a", True, "c", "", AMBIGUOUS, Reason.HISTORY_CHANGED),
    # AMBIGUOUS / partial_commit: only a strict prefix of the batch is there.
    ("abc", False, "de", "xabc" + "d", AMBIGUOUS, Reason.PARTIAL_COMMIT),
    ("wabc", False, "def", "xwabc" + "de", AMBIGUOUS, Reason.PARTIAL_COMMIT),
    ("wabc", False, "def", "xwabc" + "d", AMBIGUOUS, Reason.PARTIAL_COMMIT),
    ("", True, "de", "d", AMBIGUOUS, Reason.PARTIAL_COMMIT),
    ("a", True, "de", "ad", AMBIGUOUS, Reason.PARTIAL_COMMIT),
]


@pytest.mark.parametrize(("before", "whole", "batch", "observed", "outcome", "reason"), TABLE)
def test_rule_table(before, whole, batch, observed, outcome, reason):
    """Each row's observed history yields exactly the outcome and reason of the rule."""
    verdict = rule(before, batch, observed, whole=whole)
    assert (verdict.outcome, verdict.reason) == (outcome, reason)


@pytest.mark.parametrize(
    ("before", "whole", "batch", "observed", "landed"),
    [
        ("abc", False, "de", "xabcd", 1),
        ("wabc", False, "def", "xwabcd", 1),
        ("wabc", False, "def", "xwabcde", 2),
        ("", True, "de", "d", 1),
    ],
)
def test_partial_commit_reports_how_many_items_landed(before, whole, batch, observed, landed):
    """A partial commit's evidence says how many leading batch items are in the history."""
    verdict = rule(before, batch, observed, whole=whole)
    assert verdict.reason is Reason.PARTIAL_COMMIT
    assert verdict.evidence["landed"] == landed


def test_only_partial_commits_carry_landed():
    """Verdicts other than a partial commit carry no ``landed`` count."""
    for before, whole, batch, observed, _, reason in TABLE:
        verdict = rule(before, batch, observed, whole=whole)
        assert ("landed" in verdict.evidence) == (reason is Reason.PARTIAL_COMMIT), observed


def test_evidence_is_the_digests_compared():
    """The evidence lists before, batch, whole-ness and the (windowed) observed tail."""
    verdict = classify_digests(
        before=["a", "b"],
        before_is_whole=False,
        batch=["c"],
        tail=["q", "q", "x", "a", "b", "c"],
        window=4,
    )
    assert verdict.evidence == {
        "before": ["a", "b"],
        "before_is_whole": False,
        "batch": ["c"],
        "observed": ["x", "a", "b", "c"],
    }


def test_evidence_carries_counts_only_when_known():
    """``count`` and ``count_before`` appear in the evidence exactly when they were given."""
    both = rule("ab", "c", "xabc", whole=False, count_before=3, count=4)
    only_count = rule("ab", "c", "xabc", whole=False, count=4)
    neither = rule("ab", "c", "xabc", whole=False)
    assert (both.evidence["count"], both.evidence["count_before"]) == (4, 3)
    assert "count_before" not in only_count.evidence
    assert only_count.evidence["count"] == 4
    assert "count" not in neither.evidence
    assert "count_before" not in neither.evidence


# -- the window ---------------------------------------------------------------------------


def test_observation_window_is_before_plus_batch_plus_one():
    """The session reads one item more than before + batch, to see past a whole history."""
    assert observation_window(intent_for([], ["c"])) == 2
    assert observation_window(intent_for(["a"], ["c"])) == 3
    assert observation_window(intent_for(list("wxyzab"), ["c", "d"])) == 3 + 2 + 1


def test_a_longer_tail_is_cut_to_the_window():
    """Items older than the window cannot turn a commit into a changed history."""
    verdict = classify_digests(
        before=["a", "b"],
        before_is_whole=False,
        batch=["c"],
        tail=["z", "z", "z", "x", "a", "b", "c"],
        window=4,
    )
    assert verdict.outcome is COMMITTED
    assert verdict.evidence["observed"] == ["x", "a", "b", "c"]


def test_a_window_long_tail_is_not_a_whole_history():
    """A tail as long as the window may have more items before it, so a whole before fails."""
    verdict = classify_digests(
        before=["a"], before_is_whole=True, batch=["c"], tail=["z", "a", "c"], window=3
    )
    assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.HISTORY_CHANGED)


def test_cutting_to_the_window_drops_the_evidence_of_a_whole_history():
    """A whole before with extra older items is refused even after the tail is cut."""
    verdict = classify_digests(
        before=["a"], before_is_whole=True, batch=["c"], tail=["z", "z", "z", "a", "c"], window=3
    )
    assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.HISTORY_CHANGED)
    assert verdict.evidence["observed"] == ["z", "a", "c"]


def test_without_a_window_the_tail_is_the_whole_history():
    """With ``window=None`` the tail is taken as the whole history, so whole-ness is checked."""
    fits = classify_digests(before=["a"], before_is_whole=True, batch=["c"], tail=["a", "c"])
    extra = classify_digests(before=["a"], before_is_whole=True, batch=["c"], tail=["z", "a", "c"])
    assert fits.outcome is COMMITTED
    assert (extra.outcome, extra.reason) == (AMBIGUOUS, Reason.HISTORY_CHANGED)


# -- counts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("observed", "count", "outcome", "reason"),
    [
        ("aaaa", 4, COMMITTED, Reason.BATCH_PRESENT),
        ("aaa", 3, UNCHANGED, Reason.BATCH_ABSENT),
        ("aaaaa", 5, AMBIGUOUS, Reason.HISTORY_CHANGED),
        ("aaaa", None, AMBIGUOUS, Reason.INDISTINGUISHABLE),
    ],
)
def test_count_resolves_repeated_content(observed, count, outcome, reason):
    """Where the store knows its count, repeats that fit both readings are told apart."""
    verdict = rule("aa", "a", observed, whole=False, count_before=3, count=count)
    assert (verdict.outcome, verdict.reason) == (outcome, reason)


@pytest.mark.parametrize(
    ("observed", "count", "outcome", "reason"),
    [
        ("xabc", 4, COMMITTED, Reason.BATCH_PRESENT),
        ("xabc", 7, AMBIGUOUS, Reason.HISTORY_CHANGED),
        ("xabc", 3, AMBIGUOUS, Reason.HISTORY_CHANGED),
        ("xab", 3, UNCHANGED, Reason.BATCH_ABSENT),
        ("xab", 2, AMBIGUOUS, Reason.HISTORY_CHANGED),
        ("xab", 9, AMBIGUOUS, Reason.HISTORY_CHANGED),
    ],
)
def test_count_that_does_not_add_up_is_a_changed_history(observed, count, outcome, reason):
    """A tail that fits but a count that does not is refused (items were added or removed)."""
    verdict = rule("ab", "c", observed, whole=False, count_before=3, count=count)
    assert (verdict.outcome, verdict.reason) == (outcome, reason)


def test_count_constrains_partial_commits():
    """A partial commit needs the count to grow by exactly the items that landed."""
    fits = rule("wabc", "def", "xwabcde", whole=False, count_before=5, count=7)
    off = rule("wabc", "def", "xwabcde", whole=False, count_before=5, count=8)
    assert (fits.reason, fits.evidence["landed"]) == (Reason.PARTIAL_COMMIT, 2)
    assert off.reason is Reason.HISTORY_CHANGED


@pytest.mark.parametrize(("count_before", "count"), [(None, 99), (99, None), (None, None)])
def test_a_half_known_count_is_ignored(count_before, count):
    """A count is compared only when both the recorded and the observed count are known."""
    committed = rule("ab", "c", "xabc", whole=False, count_before=count_before, count=count)
    unchanged = rule("ab", "c", "xab", whole=False, count_before=count_before, count=count)
    assert committed.outcome is COMMITTED
    assert unchanged.outcome is UNCHANGED


# -- classify over a PendingWrite ---------------------------------------------------------


def test_classify_reads_the_intent_and_the_observation():
    """``classify`` judges a real PendingWrite the way ``classify_digests`` judges its parts."""
    history = ["x", "a", "b"]
    intent = intent_for(history, ["c"], count=True)
    assert intent.before_digests == ("a", "b")
    assert intent.before_is_whole is False
    assert observe(intent, [*history, "c"], count=True).outcome is COMMITTED
    assert observe(intent, history, count=True).outcome is UNCHANGED
    assert observe(intent, [*history, "c", "c"], count=True).outcome is AMBIGUOUS


def test_classify_uses_the_recorded_count():
    """The intent's ``persisted_count`` is the count the observed count is compared with."""
    history = ["a", "a", "a"]
    counted = intent_for(history, ["a"], count=True)
    uncounted = intent_for(history, ["a"])
    assert observe(uncounted, [*history, "a"], count=True).reason is Reason.INDISTINGUISHABLE
    assert observe(counted, [*history, "a"], count=True).outcome is COMMITTED
    assert observe(counted, history, count=True).outcome is UNCHANGED


def test_classify_of_a_first_write_on_an_empty_session():
    """On an empty session the batch alone is a commit, and nothing else is."""
    intent = intent_for([], ["u"])
    assert intent.before_is_whole is True
    assert observe(intent, ["u"]).outcome is COMMITTED
    assert observe(intent, []).outcome is UNCHANGED
    assert observe(intent, ["u", "u"]).reason is Reason.HISTORY_CHANGED
    assert observe(intent, ["z", "u"]).reason is Reason.HISTORY_CHANGED


# -- properties ---------------------------------------------------------------------------

small = st.integers(min_value=0, max_value=3)
histories = st.lists(small, max_size=9).map(lambda ns: [digest(n) for n in ns])
batches = st.lists(small, min_size=1, max_size=4).map(lambda ns: [digest(n) for n in ns])
# Digests no history above can hold: ints from a disjoint range, each used once.
fresh_batches = st.lists(
    st.integers(min_value=100, max_value=199), min_size=1, max_size=4, unique=True
).map(lambda ns: [digest(n) for n in ns])
unrelated = st.lists(st.integers(min_value=200, max_value=203), min_size=1, max_size=4).map(
    lambda ns: [digest(n) for n in ns]
)

VALID_REASONS = {
    COMMITTED: {Reason.BATCH_PRESENT},
    UNCHANGED: {Reason.BATCH_ABSENT},
    AMBIGUOUS: {Reason.INDISTINGUISHABLE, Reason.HISTORY_CHANGED, Reason.PARTIAL_COMMIT},
}


@given(histories, batches)
def test_property_a_written_batch_is_never_unchanged(history, batch):
    """Observing H + B is COMMITTED or indistinguishable, never UNCHANGED (no duplicate)."""
    verdict = observe(intent_for(history, batch), history + batch)
    assert verdict.outcome is not UNCHANGED
    assert verdict.reason in {Reason.BATCH_PRESENT, Reason.INDISTINGUISHABLE}


@given(histories, batches)
def test_property_an_unwritten_batch_is_never_committed(history, batch):
    """Observing H alone is UNCHANGED or indistinguishable, never COMMITTED (no loss)."""
    verdict = observe(intent_for(history, batch), history)
    assert verdict.outcome is not COMMITTED
    assert verdict.reason in {Reason.BATCH_ABSENT, Reason.INDISTINGUISHABLE}


@given(histories, fresh_batches)
def test_property_a_distinct_batch_is_classified_exactly(history, batch):
    """With batch items unique and absent from H, H + B is COMMITTED and H is UNCHANGED."""
    intent = intent_for(history, batch)
    assert observe(intent, history + batch).outcome is COMMITTED
    assert observe(intent, history).outcome is UNCHANGED


@given(histories, batches, unrelated)
def test_property_unrelated_items_are_a_changed_history(history, batch, others):
    """H + X with X unrelated and non-empty (ours missing, theirs there) is history_changed."""
    verdict = observe(intent_for(history, batch), history + others)
    assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.HISTORY_CHANGED)


@given(histories, batches, unrelated)
def test_property_items_after_the_batch_are_a_changed_history(history, batch, others):
    """H + B + X (someone wrote after our batch) is never vouched for."""
    verdict = observe(intent_for(history, batch), history + batch + others)
    assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.HISTORY_CHANGED)


@given(histories, batches, unrelated)
def test_property_items_between_are_a_changed_history(history, batch, others):
    """H + X + B (someone wrote between before and our batch) is never vouched for."""
    verdict = observe(intent_for(history, batch), history + others + batch)
    assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.HISTORY_CHANGED)


@given(histories, fresh_batches, st.data())
def test_property_a_strict_prefix_is_a_partial_commit(history, batch, data):
    """H + a strict prefix of a distinct B is a partial commit naming the landed items."""
    landed = data.draw(st.integers(min_value=0, max_value=len(batch) - 1))
    verdict = observe(intent_for(history, batch), history + batch[:landed])
    if landed == 0:
        assert verdict.outcome is UNCHANGED
    else:
        assert verdict.outcome not in {COMMITTED, UNCHANGED}
        assert verdict.reason is Reason.PARTIAL_COMMIT
        assert verdict.evidence["landed"] == landed


@given(histories, batches, st.lists(small, min_size=1, max_size=5))
def test_property_with_counts_only_the_batch_itself_commits(history, batch, extra):
    """With exact counts, H + X (X non-empty) is COMMITTED iff X == B and never UNCHANGED."""
    others = [digest(n) for n in extra]
    intent = intent_for(history, batch, count=True)
    verdict = observe(intent, history + others, count=True)
    assert verdict.outcome is not UNCHANGED
    assert (verdict.outcome is COMMITTED) == (others == batch)


@given(histories, batches)
def test_property_with_counts_repeats_are_never_ambiguous(history, batch):
    """With exact counts, H is always UNCHANGED and H + B always COMMITTED."""
    intent = intent_for(history, batch, count=True)
    assert observe(intent, history, count=True).outcome is UNCHANGED
    assert observe(intent, history + batch, count=True).outcome is COMMITTED


@given(histories, batches, st.lists(small, max_size=12))
def test_property_verdicts_are_sound(history, batch, observed_ints):
    """Any verdict on any history fits the rule: reasons match outcomes, and a COMMITTED or
    UNCHANGED tail really ends with before + batch or before (exactly, when before was whole)."""
    observed = [digest(n) for n in observed_ints]
    intent = intent_for(history, batch)
    verdict = observe(intent, observed)
    before, batch_t = list(intent.before_digests), list(intent.batch_digests)
    tail = observed[-observation_window(intent) :]
    assert verdict.reason in VALID_REASONS[verdict.outcome]
    if verdict.outcome is COMMITTED:
        expected = before + batch_t
    elif verdict.outcome is UNCHANGED:
        expected = before
    else:
        return
    if intent.before_is_whole:
        assert observed == expected
    else:
        assert tail[len(tail) - len(expected) :] == expected


@given(histories, batches, st.lists(small, max_size=12))
def test_property_the_window_is_all_the_rule_needs(history, batch, observed_ints):
    """Passing the whole observed history or only its last window items gives one verdict."""
    observed = [digest(n) for n in observed_ints]
    intent = intent_for(history, batch)
    kwargs = {
        "before": intent.before_digests,
        "before_is_whole": intent.before_is_whole,
        "batch": intent.batch_digests,
        "window": observation_window(intent),
    }
    full = classify_digests(tail=observed, **kwargs)
    windowed = classify_digests(tail=observed[-observation_window(intent) :], **kwargs)
    assert full == windowed


# -- partial commits that repeated content disguises ------------------------------------


def test_a_partial_commit_indistinguishable_from_a_full_one_is_ambiguous():
    """When a partial commit leaves the same tail as a full one, the verdict fails closed."""
    history = list("babababa")
    batch = list("bab")
    intent = intent_for(history, batch)
    window = observation_window(intent)
    partial = [*history, *batch[:1]]
    assert partial[-window:] == (history + batch)[-window:]
    assert observe(intent, partial).outcome is AMBIGUOUS


def test_a_partial_commit_indistinguishable_from_none_is_ambiguous():
    """When a partial commit leaves the same tail as no commit, the verdict fails closed."""
    history = list("aaaaaa")
    batch = list("ab")
    intent = intent_for(history, batch)
    window = observation_window(intent)
    partial = [*history, *batch[:1]]
    assert partial[-window:] == history[-window:]
    assert observe(intent, partial).outcome is AMBIGUOUS


# -- stores that write a batch in requests (chunk) ------------------------------------------


@pytest.mark.parametrize(
    ("before", "batch", "observed", "outcome", "reason", "landed"),
    [
        ("x", "abcdef", "xab", Outcome.PARTIAL, Reason.CHUNKS_LANDED, 2),
        ("x", "abcdef", "xabcd", Outcome.PARTIAL, Reason.CHUNKS_LANDED, 4),
        ("x", "abcdef", "xabc", AMBIGUOUS, Reason.PARTIAL_COMMIT, 3),
        ("x", "abcdef", "xa", AMBIGUOUS, Reason.PARTIAL_COMMIT, 1),
        ("x", "abcdef", "xabcdef", COMMITTED, Reason.BATCH_PRESENT, None),
        ("x", "abcdef", "x", UNCHANGED, Reason.BATCH_ABSENT, None),
        ("x", "abcdef", "xabz", AMBIGUOUS, Reason.HISTORY_CHANGED, None),
        ("x", "abcdef", "xzab", AMBIGUOUS, Reason.HISTORY_CHANGED, None),
    ],
)
def test_a_chunked_write_that_stopped_at_a_request_boundary_is_partial(
    before: str,
    batch: str,
    observed: str,
    outcome: Outcome,
    reason: Reason,
    landed: int | None,
) -> None:
    """With requests of 2 items, whole requests from the batch's first item are a PARTIAL
    write (the rest may be appended once); a prefix that ends inside a request, or anything
    after it, is not."""
    verdict = classify_digests(
        before=list(before),
        before_is_whole=True,
        batch=list(batch),
        tail=list(observed),
        chunk=2,
    )
    assert (verdict.outcome, verdict.reason, verdict.evidence.get("landed")) == (
        outcome,
        reason,
        landed,
    )
    if outcome is Outcome.PARTIAL:
        assert verdict.evidence["chunk"] == 2


def test_without_a_chunk_a_whole_request_prefix_stays_ambiguous() -> None:
    """A store that writes a batch all or nothing never leaves a prefix: one is a changed or
    doubtful history, not a write to complete."""
    verdict = classify_digests(
        before=["x"], before_is_whole=True, batch=list("abcd"), tail=list("xab")
    )
    assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.PARTIAL_COMMIT)


@given(
    history=st.lists(st.integers(0, 3).map(digest), max_size=6),
    batch=st.lists(st.integers(10, 60).map(digest), min_size=1, max_size=9, unique=True),
    chunk=st.integers(1, 4),
    data=st.data(),
)
def test_property_a_chunked_write_stopped_anywhere_is_judged_by_whole_requests(
    history: list[str], batch: list[str], chunk: int, data: st.DataObject
) -> None:
    """A write of distinct items stopped after any number of its items: whole requests are
    PARTIAL with exactly those landed, no item is COMMITTED before all are, and a cut inside
    a request is never taken for anything to complete."""
    landed = data.draw(st.integers(0, len(batch)))
    intent = intent_for(history, batch)
    verdict = classify_digests(
        before=intent.before_digests,
        before_is_whole=intent.before_is_whole,
        batch=batch,
        tail=[*history, *batch[:landed]],
        window=observation_window(intent),
        chunk=chunk,
    )
    if landed == len(batch):
        assert verdict.outcome is COMMITTED
    elif landed == 0:
        assert verdict.outcome is UNCHANGED
    elif landed % chunk == 0:
        assert verdict.outcome is Outcome.PARTIAL
        assert verdict.evidence["landed"] == landed
    else:
        assert (verdict.outcome, verdict.reason) == (AMBIGUOUS, Reason.PARTIAL_COMMIT)
