"""Conformance suite for the ``IntentJournal`` contract (intents, and the effects kept beside
them), run against every implementation."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import pytest

from agents_reconcile._backends.journal import IntentJournal, IntentState, Opened
from agents_reconcile._backends.memory.journal import InvariantViolation, MemoryJournal
from agents_reconcile._backends.opening import open_journal
from agents_reconcile._backends.schema import Unversioned
from agents_reconcile._core.effect_records import Effect, EffectState
from agents_reconcile._core.fingerprint import journal_batch
from agents_reconcile._core.ownership import Owner, current_owner
from agents_reconcile._core.records import Action, BackendIdentity, Decision, Outcome, Reason
from agents_reconcile._core.sealing import PayloadKey
from agents_reconcile.errors import (
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
    RecordError,
    RecordMalformed,
    RecordTampered,
    UnsupportedRecordVersion,
)

from ..support.backends import Place, closed_port
from ..support.journal_support import (
    BACKEND,
    SETTLING,
    STRANGER,
    make_decision,
    make_effect,
    make_intent,
)

OTHER_DB = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/data/other.db")
OTHER_KIND = BackendIdentity("tests.custom.ListSession", "/srv/data/chat.db")

NOT_SETTLING = (Action.DENIED, Action.LEFT_PENDING)


def ids(entries: Sequence[Any]) -> list[str]:
    """Intent ids of journal entries, in order."""
    return [entry.intent.intent_id for entry in entries]


def workers(place: Place, journal: IntentJournal, count: int) -> list[Any]:
    """``journal`` and other journal objects on its data (where the backend's data outlives
    an object; otherwise ``journal`` again), ``count`` in all."""
    others = [place.journal() if place.backend.durable else journal for _ in range(count - 1)]
    return [journal, *others]


async def test_implements_protocol(journal: IntentJournal) -> None:
    """Every implementation satisfies the runtime-checkable ``IntentJournal`` protocol."""
    assert isinstance(journal, IntentJournal)


async def test_record_then_pending_lists_it(journal: IntentJournal) -> None:
    """A recorded intent comes back from pending() and get() with its content, state and owner."""
    intent = make_intent("i-1")
    owner = current_owner()
    await journal.record(intent, state=IntentState.IN_FLIGHT, owner=owner)

    entries = await journal.pending("session-a")
    assert len(entries) == 1
    entry = entries[0]
    assert entry.intent == intent
    assert entry.intent.same_content(intent)
    assert entry.state is IntentState.IN_FLIGHT
    assert entry.owner == owner
    assert await journal.get("i-1") == entry
    assert not await journal.is_settled("i-1")


async def test_unknown_intent_is_absent(journal: IntentJournal) -> None:
    """An id never recorded has no entry, is not settled, and has no decisions."""
    assert await journal.get("nope") is None
    assert not await journal.is_settled("nope")
    assert await journal.pending("session-a") == []
    assert await journal.decisions(intent_id="nope") == []


async def test_pending_filters_by_session(journal: IntentJournal) -> None:
    """pending() returns only the intents of the session it is asked about."""
    owner = current_owner()
    await journal.record(make_intent("a-1"), state=IntentState.FAILED, owner=owner)
    await journal.record(
        make_intent("b-1", session_id="session-b"), state=IntentState.FAILED, owner=owner
    )
    await journal.record(make_intent("a-2", text="more"), state=IntentState.FAILED, owner=owner)

    assert sorted(ids(await journal.pending("session-a"))) == ["a-1", "a-2"]
    assert ids(await journal.pending("session-b")) == ["b-1"]
    assert await journal.pending("session-c") == []


async def test_pending_filters_by_backend_identity(journal: IntentJournal) -> None:
    """pending() with a backend returns only that backend's intents (kind and namespace both
    count); without one it returns them all."""
    owner = current_owner()
    await journal.record(make_intent("same"), state=IntentState.FAILED, owner=owner)
    await journal.record(
        make_intent("other-db", backend=OTHER_DB), state=IntentState.FAILED, owner=owner
    )
    await journal.record(
        make_intent("other-kind", backend=OTHER_KIND), state=IntentState.FAILED, owner=owner
    )

    assert ids(await journal.pending("session-a", BACKEND)) == ["same"]
    assert ids(await journal.pending("session-a", OTHER_DB)) == ["other-db"]
    assert ids(await journal.pending("session-a", OTHER_KIND)) == ["other-kind"]
    assert await journal.pending("session-a", BackendIdentity("unknown.Kind")) == []
    assert sorted(ids(await journal.pending("session-a"))) == ["other-db", "other-kind", "same"]


async def test_pending_is_oldest_first(journal: IntentJournal) -> None:
    """pending() orders intents by creation time, not by the order they were recorded."""
    owner = current_owner()
    await journal.record(
        make_intent("middle", created_at=2000.0, text="m"), state=IntentState.FAILED, owner=owner
    )
    await journal.record(
        make_intent("newest", created_at=3000.0, text="n"), state=IntentState.FAILED, owner=owner
    )
    await journal.record(
        make_intent("oldest", created_at=1000.0, text="o"), state=IntentState.FAILED, owner=owner
    )

    assert ids(await journal.pending("session-a")) == ["oldest", "middle", "newest"]


async def test_record_same_intent_twice_is_a_noop(journal: IntentJournal) -> None:
    """Recording the same intent again changes nothing, not even its state or owner."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.IN_FLIGHT, owner=current_owner())
    before = await journal.get("i-1")

    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=STRANGER)

    assert await journal.get("i-1") == before
    assert ids(await journal.pending("session-a")) == ["i-1"]


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"text": "different"}, id="batch"),
        pytest.param({"created_at": 1_700_000_001.0}, id="created_at"),
        pytest.param({"session_id": "session-b"}, id="session"),
        pytest.param({"backend": OTHER_DB}, id="backend"),
    ],
)
async def test_record_same_id_other_content_conflicts(
    journal: IntentJournal, changed: dict[str, Any]
) -> None:
    """Recording an id again with different content raises IntentConflict and keeps the
    original."""
    original = make_intent("i-1")
    await journal.record(original, state=IntentState.IN_FLIGHT, owner=current_owner())

    with pytest.raises(IntentConflict) as caught:
        await journal.record(
            make_intent("i-1", **changed), state=IntentState.FAILED, owner=current_owner()
        )

    assert caught.value.intent_id == "i-1"
    entry = await journal.get("i-1")
    assert entry is not None
    assert entry.intent == original
    assert entry.state is IntentState.IN_FLIGHT


async def test_transition_without_expectations_sets_state_and_owner(
    journal: IntentJournal,
) -> None:
    """An unconditional transition returns True and get() shows the new state and owner."""
    await journal.record(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner())

    changed = await journal.transition("i-1", state=IntentState.RECONCILING, owner=STRANGER)

    assert changed is True
    entry = await journal.get("i-1")
    assert entry is not None
    assert (entry.state, entry.owner) == (IntentState.RECONCILING, STRANGER)


async def test_transition_with_wrong_expected_state_changes_nothing(
    journal: IntentJournal,
) -> None:
    """A transition whose expect_state does not match returns False and leaves the entry."""
    me = current_owner()
    await journal.record(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=me)
    before = await journal.get("i-1")

    changed = await journal.transition(
        "i-1", state=IntentState.RECONCILING, owner=STRANGER, expect_state=IntentState.FAILED
    )

    assert changed is False
    assert await journal.get("i-1") == before


async def test_transition_with_wrong_expected_owner_changes_nothing(
    journal: IntentJournal,
) -> None:
    """A transition whose expect_owner does not match returns False, even if the state
    matches."""
    me = current_owner()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=me)
    before = await journal.get("i-1")

    changed = await journal.transition(
        "i-1",
        state=IntentState.RECONCILING,
        owner=STRANGER,
        expect_state=IntentState.FAILED,
        expect_owner=STRANGER,
    )

    assert changed is False
    assert await journal.get("i-1") == before


async def test_transition_with_matching_expectations_claims_the_intent(
    journal: IntentJournal,
) -> None:
    """A transition whose expectations match returns True, and a second claim expecting the
    old state then fails."""
    me = current_owner()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=STRANGER)

    first = await journal.transition(
        "i-1",
        state=IntentState.RECONCILING,
        owner=me,
        expect_state=IntentState.FAILED,
        expect_owner=Owner(STRANGER.host, STRANGER.pid, STRANGER.started),
    )
    second = await journal.transition(
        "i-1", state=IntentState.RECONCILING, owner=STRANGER, expect_state=IntentState.FAILED
    )

    assert (first, second) == (True, False)
    entry = await journal.get("i-1")
    assert entry is not None
    assert (entry.state, entry.owner) == (IntentState.RECONCILING, me)
    assert entry.intent == make_intent("i-1")


async def test_discard_removes_without_a_decision(journal: IntentJournal) -> None:
    """discard() forgets the intent and records no decision, so it is not settled."""
    await journal.record(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner())
    await journal.record(make_intent("i-2", text="x"), state=IntentState.FAILED, owner=STRANGER)

    await journal.discard("i-1")

    assert await journal.get("i-1") is None
    assert ids(await journal.pending("session-a")) == ["i-2"]
    assert not await journal.is_settled("i-1")
    assert await journal.decisions() == []


@pytest.mark.parametrize("action", SETTLING, ids=[a.value for a in SETTLING])
async def test_settle_closes_the_intent_and_stores_the_decision(
    journal: IntentJournal, action: Action
) -> None:
    """settle() with any settling action removes the intent, stores the decision, and marks
    the id settled."""
    intent = make_intent("i-1")
    keep = make_intent("i-2", text="kept")
    await journal.record(intent, state=IntentState.RECONCILING, owner=current_owner())
    await journal.record(keep, state=IntentState.FAILED, owner=current_owner())
    decision = make_decision(intent, action=action)

    await journal.settle(decision)

    assert await journal.is_settled("i-1")
    assert await journal.get("i-1") is None
    assert ids(await journal.pending("session-a")) == ["i-2"]
    assert await journal.decisions(intent_id="i-1") == [decision]
    assert not await journal.is_settled("i-2")


@pytest.mark.parametrize("same_content", [True, False], ids=["same", "different"])
async def test_record_after_settle_conflicts(journal: IntentJournal, same_content: bool) -> None:
    """Recording a settled id again, with the same or other content, raises IntentConflict and
    revives nothing."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(intent))

    again = intent if same_content else make_intent("i-1", text="other")
    with pytest.raises(IntentConflict) as caught:
        await journal.record(again, state=IntentState.IN_FLIGHT, owner=current_owner())

    assert caught.value.intent_id == "i-1"
    assert await journal.get("i-1") is None
    assert await journal.pending("session-a") == []


@pytest.mark.parametrize("action", NOT_SETTLING, ids=[a.value for a in NOT_SETTLING])
async def test_note_keeps_the_intent_pending(journal: IntentJournal, action: Action) -> None:
    """note() stores a non-settling decision while the intent stays pending and unsettled."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    before = await journal.get("i-1")
    denial = make_decision(
        intent, action=action, outcome=Outcome.AMBIGUOUS, reason=Reason.HISTORY_CHANGED
    )

    await journal.note(denial)

    assert await journal.decisions(intent_id="i-1") == [denial]
    assert not await journal.is_settled("i-1")
    assert await journal.get("i-1") == before
    assert ids(await journal.pending("session-a")) == ["i-1"]
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())


async def test_noted_intent_can_still_be_settled(journal: IntentJournal) -> None:
    """After a denial is noted, settling the intent keeps both decisions, newest first."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    denial = make_decision(
        intent,
        action=Action.DENIED,
        outcome=Outcome.UNCHANGED,
        reason=Reason.OPERATOR_REQUIRED,
        decided_at=10.0,
    )
    replay = make_decision(
        intent,
        action=Action.REPLAYED,
        outcome=Outcome.UNCHANGED,
        reason=Reason.BATCH_ABSENT,
        decided_at=20.0,
    )

    await journal.note(denial)
    await journal.settle(replay)

    assert await journal.decisions(intent_id="i-1") == [replay, denial]
    assert await journal.is_settled("i-1")


async def test_decisions_filter_order_and_limit(journal: IntentJournal) -> None:
    """decisions() filters by session and by intent, returns newest first, and honours limit."""
    owner = current_owner()
    a1 = make_intent("a-1", created_at=1.0)
    a2 = make_intent("a-2", created_at=2.0, text="two")
    b1 = make_intent("b-1", session_id="session-b", created_at=3.0)
    for intent in (a1, a2, b1):
        await journal.record(intent, state=IntentState.FAILED, owner=owner)

    d1 = make_decision(
        a1,
        action=Action.DENIED,
        outcome=Outcome.AMBIGUOUS,
        reason=Reason.INDISTINGUISHABLE,
        decided_at=101.0,
    )
    d2 = make_decision(b1, decided_at=102.0)
    d3 = make_decision(a2, decided_at=103.0)
    d4 = make_decision(
        a1,
        action=Action.REPLAYED,
        outcome=Outcome.UNCHANGED,
        reason=Reason.BATCH_ABSENT,
        decided_at=104.0,
    )
    await journal.note(d1)
    await journal.settle(d2)
    await journal.settle(d3)
    await journal.settle(d4)

    assert await journal.decisions() == [d4, d3, d2, d1]
    assert await journal.decisions(session_id="session-a") == [d4, d3, d1]
    assert await journal.decisions(session_id="session-b") == [d2]
    assert await journal.decisions(intent_id="a-1") == [d4, d1]
    assert await journal.decisions(session_id="session-b", intent_id="a-1") == []
    assert await journal.decisions(session_id="session-a", intent_id="a-2") == [d3]
    assert await journal.decisions(limit=2) == [d4, d3]
    assert await journal.decisions(session_id="session-a", limit=1) == [d4]
    assert await journal.decisions(session_id="nobody") == []


async def test_updated_at_moves_forward_on_transition(journal: IntentJournal) -> None:
    """A transition refreshes updated_at to the present, never to an earlier time."""
    await journal.record(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner())
    first = await journal.get("i-1")
    assert first is not None
    start = time.time()

    assert await journal.transition("i-1", state=IntentState.FAILED, owner=current_owner())

    second = await journal.get("i-1")
    assert second is not None
    assert first.updated_at <= start <= second.updated_at


async def test_open_intent_records_only_when_the_session_is_clear(journal: IntentJournal) -> None:
    """open_intent records (and counts) an intent when its session and backend have none
    pending, and otherwise returns the pending ones and records nothing."""
    owner = current_owner()
    first = make_intent("i-1")
    opened = await journal.open_intent(first, state=IntentState.IN_FLIGHT, owner=owner)
    assert opened == Opened(recorded=True, write_count=0)
    assert ids(await journal.pending("session-a")) == ["i-1"]

    second = make_intent("i-2", created_at=1_700_000_001.0)
    opened = await journal.open_intent(second, state=IntentState.IN_FLIGHT, owner=owner)
    assert not opened.recorded and ids(opened.blocking) == ["i-1"] and opened.write_count == 1
    assert await journal.get("i-2") is None

    elsewhere = make_intent("i-3", session_id="session-b")
    opened = await journal.open_intent(elsewhere, state=IntentState.IN_FLIGHT, owner=owner)
    assert opened == Opened(recorded=True, write_count=0)
    other_backend = make_intent("i-4", backend=BackendIdentity("other.Store", "x"))
    opened = await journal.open_intent(other_backend, state=IntentState.IN_FLIGHT, owner=owner)
    assert opened == Opened(recorded=True, write_count=0)

    await journal.discard("i-1")
    opened = await journal.open_intent(second, state=IntentState.IN_FLIGHT, owner=owner)
    assert opened == Opened(recorded=True, write_count=2)
    assert ids(await journal.pending("session-a", BACKEND)) == ["i-2"]
    assert await journal.write_count("session-a", BACKEND) == 3


async def test_an_acknowledged_intent_counts_a_write_when_cleared(
    journal: IntentJournal,
) -> None:
    """discard() moves its session's count (the write has landed: a tail read while it was in
    flight is out of date) and changes nothing for an id it does not hold."""
    owner = current_owner()
    await journal.open_intent(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner)
    assert await journal.write_count("session-a", BACKEND) == 1
    await journal.discard("i-1")
    assert await journal.write_count("session-a", BACKEND) == 2
    assert await journal.pending("session-a") == []
    if not isinstance(journal, MemoryJournal):  # the test double refuses an unknown id loudly
        await journal.discard("i-1")
        await journal.discard("never-opened")
        assert await journal.write_count("session-a", BACKEND) == 2


async def test_writes_count_settlements_and_other_writes(journal: IntentJournal) -> None:
    """Every intent recorded, every settlement (a replay wrote; a committed batch may have come
    from one) and every count_write add one write; denials do not."""
    owner = current_owner()
    replayed, landed = make_intent("r"), make_intent("c", created_at=1_700_000_005.0)
    for intent in (replayed, landed):
        await journal.record(intent, state=IntentState.RECONCILING, owner=owner)
    await journal.settle(make_decision(replayed, action=Action.REPLAYED), owner=owner)
    await journal.settle(make_decision(landed, action=Action.SETTLED), owner=owner)
    denied = make_intent("d", created_at=1_700_000_009.0)
    await journal.record(denied, state=IntentState.FAILED, owner=owner)
    await journal.note(make_decision(denied, action=Action.DENIED))
    assert await journal.write_count("session-a", BACKEND) == 5
    assert await journal.count_write("session-a", BACKEND) == 6
    assert await journal.write_count("session-b", BACKEND) == 0


async def test_settling_needs_the_claim_when_an_owner_is_given(
    place: Place, journal: IntentJournal
) -> None:
    """settle(owner=...) refuses an intent that owner does not hold: never claimed, or claimed
    since by another worker (the intent stays pending); the new holder settles it, and the id
    cannot be recorded again."""
    _, other = workers(place, journal, 2)
    owner = current_owner()
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=owner)
    with pytest.raises(IntentConflict):
        await journal.settle(make_decision(intent), owner=owner)
    assert await journal.transition(
        "i-1", state=IntentState.RECONCILING, owner=owner, expect_state=IntentState.FAILED
    )
    assert await other.transition(
        "i-1", state=IntentState.RECONCILING, owner=STRANGER, expect_owner=owner
    )
    with pytest.raises(IntentConflict):
        await journal.settle(make_decision(intent), owner=owner)
    assert ids(await journal.pending(None)) == ["i-1"]
    await other.settle(make_decision(intent, action=Action.REPLAYED), owner=STRANGER)
    assert await journal.is_settled("i-1")
    with pytest.raises(IntentConflict):
        await journal.record(intent, state=IntentState.FAILED, owner=owner)


async def test_pending_without_a_session_lists_every_session(
    place: Place, journal: IntentJournal
) -> None:
    """pending(None) on one worker lists the unresolved intents of all sessions, those other
    workers recorded too, oldest first (with a backend, that backend's), and forgets them once
    they are discarded or settled."""
    _, other = workers(place, journal, 2)
    owner = current_owner()
    late = make_intent("c", session_id="s-3", created_at=3.0)
    await other.record(
        make_intent("b", session_id="s-2", created_at=2.0), state=IntentState.FAILED, owner=owner
    )
    await other.record(late, state=IntentState.FAILED, owner=owner)
    await journal.record(
        make_intent("a", session_id="s-1", created_at=1.0), state=IntentState.FAILED, owner=owner
    )
    assert ids(await journal.pending(None)) == ["a", "b", "c"]
    assert ids(await journal.pending(None, BACKEND)) == ["a", "b", "c"]

    await journal.discard("b")
    await journal.settle(make_decision(late))
    assert ids(await other.pending(None)) == ["a"]
    assert await other.get("b") is None


async def test_settle_and_note_take_only_their_kind_of_decision(journal: IntentJournal) -> None:
    """settle() refuses a decision that does not close the intent, note() one that does."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    with pytest.raises((ValueError, AssertionError)):
        await journal.settle(make_decision(intent, action=Action.DENIED))
    with pytest.raises((ValueError, AssertionError)):
        await journal.note(make_decision(intent, action=Action.SETTLED))
    assert ids(await journal.pending("session-a")) == ["i-1"]
    with pytest.raises(ValueError):
        await journal.decisions(limit=0)


async def test_open_intent_with_a_stale_expected_count_writes_nothing(
    journal: IntentJournal,
) -> None:
    """open_intent expecting another count than the session's records and counts nothing and
    returns the count as it is; expecting the right one, it records."""
    owner = current_owner()
    intent = make_intent("i-1")
    for _ in range(2):
        await journal.count_write("session-a", BACKEND)

    for stale in (0, 1, 3):
        opened = await journal.open_intent(
            intent, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=stale
        )
        assert opened == Opened(recorded=False, write_count=2)
    assert await journal.get("i-1") is None
    assert await journal.write_count("session-a", BACKEND) == 2

    opened = await journal.open_intent(
        intent, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=2
    )
    assert opened == Opened(recorded=True, write_count=2)
    assert ids(await journal.pending("session-a")) == ["i-1"]
    assert await journal.write_count("session-a", BACKEND) == 3


async def test_a_blocked_opening_reports_the_blocking_intent_whatever_count_it_expects(
    journal: IntentJournal,
) -> None:
    """An unresolved intent in the way is reported as blocking even when the count expected
    is stale too: the caller has something to settle, not a tail to read again."""
    owner = current_owner()
    await journal.open_intent(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner)
    second = make_intent("i-2", created_at=1_700_000_001.0)

    opened = await journal.open_intent(
        second, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=0
    )

    assert not opened.recorded and ids(opened.blocking) == ["i-1"] and opened.write_count == 1
    assert await journal.get("i-2") is None
    assert await journal.write_count("session-a", BACKEND) == 1


async def test_a_retried_open_intent_answers_as_the_first_did(journal: IntentJournal) -> None:
    """open_intent again with the same intent, state and owner (its first reply lost) answers
    recorded with the count the first saw, even against a count expected then; the intent is
    stored and counted once."""
    owner = current_owner()
    await journal.count_write("session-a", BACKEND)
    first = await journal.open_intent(
        make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=1
    )
    await journal.count_write("session-a", BACKEND)

    again = await journal.open_intent(
        make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=1
    )

    assert first == again == Opened(recorded=True, write_count=1)
    assert ids(await journal.pending("session-a")) == ["i-1"]
    assert await journal.write_count("session-a", BACKEND) == 3


async def test_a_retried_open_intent_after_a_claim_is_blocked_by_it(
    journal: IntentJournal,
) -> None:
    """open_intent retried after another owner claimed the intent (or its state moved) is not
    recorded: the intent as it now stands is reported as blocking, with the current count."""
    me = current_owner()
    intent = make_intent("i-1")
    await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)
    assert await journal.transition(
        "i-1", state=IntentState.RECONCILING, owner=STRANGER, expect_state=IntentState.IN_FLIGHT
    )

    opened = await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)

    assert not opened.recorded and opened.write_count == 1
    [entry] = opened.blocking
    assert (entry.intent, entry.state, entry.owner) == (intent, IntentState.RECONCILING, STRANGER)

    assert await journal.transition("i-1", state=IntentState.FAILED, owner=me)
    opened = await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)
    assert not opened.recorded and ids(opened.blocking) == ["i-1"]
    assert await journal.write_count("session-a", BACKEND) == 1


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"text": "different"}, id="batch"),
        pytest.param({"session_id": "session-b"}, id="session"),
        pytest.param({"backend": OTHER_DB}, id="backend"),
    ],
)
async def test_a_retried_open_intent_with_other_content_conflicts(
    journal: IntentJournal, changed: dict[str, Any]
) -> None:
    """open_intent of an unresolved id with other content raises IntentConflict and changes
    neither the intent nor the counts."""
    owner = current_owner()
    original = make_intent("i-1")
    await journal.open_intent(original, state=IntentState.IN_FLIGHT, owner=owner)

    with pytest.raises(IntentConflict) as caught:
        await journal.open_intent(
            make_intent("i-1", **changed), state=IntentState.IN_FLIGHT, owner=owner
        )

    assert caught.value.intent_id == "i-1"
    entry = await journal.get("i-1")
    assert entry is not None and entry.intent == original
    assert await journal.write_count("session-a", BACKEND) == 1
    assert await journal.write_count("session-b", BACKEND) == 0
    assert await journal.write_count("session-a", OTHER_DB) == 0


async def test_open_intent_of_a_settled_id_conflicts(journal: IntentJournal) -> None:
    """open_intent of an id already settled raises IntentConflict and revives nothing."""
    owner = current_owner()
    intent = make_intent("i-1")
    await journal.open_intent(intent, state=IntentState.RECONCILING, owner=owner)
    await journal.settle(make_decision(intent), owner=owner)

    with pytest.raises(IntentConflict):
        await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=owner)

    assert await journal.pending("session-a") == []
    assert await journal.write_count("session-a", BACKEND) == 2


async def test_settling_with_the_same_decision_again_is_a_noop(journal: IntentJournal) -> None:
    """settle() again with the very decision that settled the intent (its reply lost) neither
    fails, nor counts, nor stores it twice; another decision is refused."""
    owner = current_owner()
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.RECONCILING, owner=owner)
    decision = make_decision(intent)
    await journal.settle(decision, owner=owner)

    await journal.settle(decision, owner=owner)
    await journal.settle(Decision.decode(decision.encode()))

    assert await journal.decisions(intent_id="i-1") == [decision]
    assert await journal.write_count("session-a", BACKEND) == 2
    other = make_decision(intent, action=Action.REPLAYED, outcome=Outcome.UNCHANGED)
    # The in-memory double treats settling twice as the caller's bug.
    refusal = InvariantViolation if isinstance(journal, MemoryJournal) else IntentConflict
    with pytest.raises(refusal):
        await journal.settle(other, owner=owner)
    assert await journal.decisions(intent_id="i-1") == [decision]
    assert await journal.write_count("session-a", BACKEND) == 2


async def test_a_batch_with_lone_surrogates_round_trips(journal: IntentJournal) -> None:
    """An intent whose batch holds lone surrogates (in a value and in a key) comes back equal,
    and recording it again is the no-op a retried record is."""
    lone = b"\xff\xfe binary".decode("utf-8", "surrogateescape")
    batch, digests = journal_batch(
        [
            {"type": "function_call_output", "call_id": "c1", "output": lone},
            {"role": "user", "content": [{"\ud800": lone, "n": 1.5}]},
        ]
    )
    intent = dataclasses.replace(make_intent("i-1"), batch=batch, batch_digests=digests)
    owner = current_owner()
    await journal.record(intent, state=IntentState.IN_FLIGHT, owner=owner)
    await journal.record(intent, state=IntentState.FAILED, owner=STRANGER)
    [entry] = await journal.pending("session-a")
    assert entry.intent == intent
    assert entry.intent.batch[0]["output"] == lone
    assert entry.intent.batch[1]["content"][0]["\ud800"] == lone
    assert (entry.state, entry.owner) == (IntentState.IN_FLIGHT, owner)


# -- what every backend's own suite used to check for itself ------------------------------------


def forged(record: bytes, edit: str) -> bytes:
    """The stored record of make_intent("i-1"), edited as ``edit`` says."""
    body = orjson.loads(record)
    if edit == "stale_digest":
        body["batch"] = [{"role": "user", "content": "transfer everything"}]
        return orjson.dumps(body)
    if edit == "recomputed_digest":
        batch = ({"role": "user", "content": "transfer everything"},)
        return dataclasses.replace(make_intent("i-1"), batch=batch).encode()
    if edit == "future_version":
        return orjson.dumps(dict(body, v=99))
    return b"\x00 not a record"


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        ("stale_digest", RecordTampered),
        ("recomputed_digest", RecordTampered),
        ("future_version", UnsupportedRecordVersion),
        ("garbage", RecordMalformed),
    ],
)
async def test_a_record_edited_behind_the_journals_back_is_refused(
    place: Place, journal: IntentJournal, edit: str, error: type[RecordError]
) -> None:
    """An intent record edited in storage raises the same record error from get(), pending()
    and a record() that has to compare with it, on every backend."""
    storage = place.storage()
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    stored = await storage.intent_record("session-a", "i-1")
    await storage.replace_intent_record("session-a", "i-1", forged(stored, edit))
    with pytest.raises(error):
        await journal.get("i-1")
    with pytest.raises(error):
        await journal.pending("session-a")
    with pytest.raises(error):
        await journal.pending(None)
    with pytest.raises(error):
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())


async def test_check_and_migrate_an_empty_journal(place: Place, journal: IntentJournal) -> None:
    """check() says what is missing and creates nothing; migrate() applies the schema once and
    says so; then check() is satisfied and schema_version() is this release's."""
    if isinstance(journal, Unversioned):
        pytest.skip(f"{place.backend.name}: its storage has no schema")
    problem = await journal.check()
    assert problem is not None and "migrate" in problem
    assert await journal.schema_version() is None
    # Every step, in order: the intents, decisions, counts, effects and set-aside entries,
    # then what pruning needs (when each count was last raised, the floor).
    version = sys.modules[type(journal).__module__].SCHEMA_VERSION
    assert version >= 2
    assert await journal.migrate() == [f"journal schema {n}" for n in range(1, version + 1)]
    assert await journal.check() is None
    assert await journal.migrate() == []
    assert await journal.schema_version() == version


async def test_a_newer_schema_is_refused_and_left_alone(
    place: Place, journal: IntentJournal
) -> None:
    """A schema stamped with a newer version is refused by a journal opened afterwards (its
    operations and migrate() raise JournalCorrupt naming the version; check() says it is
    newer), and nothing changes it."""
    storage = place.storage()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await journal.close()
    future = 42
    await storage.stamp("journal", future)

    fresh = place.journal()
    with pytest.raises(JournalCorrupt, match=rf"\b{future}\b"):
        await fresh.pending("session-a")
    with pytest.raises(JournalCorrupt):
        await fresh.record(make_intent("i-2"), state=IntentState.FAILED, owner=current_owner())
    with pytest.raises(JournalCorrupt, match=rf"\b{future}\b"):
        await fresh.migrate()
    problem = await fresh.check()
    assert problem is not None and str(future) in problem and "newer" in problem
    assert await fresh.schema_version() == future
    assert await storage.intent_record("session-a", "i-1") == make_intent("i-1").encode()


async def test_racing_open_intent_from_two_workers_records_exactly_one(
    place: Place, journal: IntentJournal
) -> None:
    """Four open_intent calls on one session, from two journal objects (two workers, where the
    backend's data outlives an object), race twenty times: each time exactly one records,
    and the others are blocked by it and see the count it left."""
    other = place.journal() if place.backend.durable else journal
    owner = current_owner()
    rounds = 20
    for round_ in range(rounds):
        contenders = [
            make_intent(f"r{round_}-{n}", created_at=1_000.0 + n, text=f"{round_}/{n}")
            for n in range(4)
        ]
        results = await asyncio.gather(
            *(
                (journal if n % 2 else other).open_intent(
                    intent, state=IntentState.IN_FLIGHT, owner=owner
                )
                for n, intent in enumerate(contenders)
            )
        )
        winners = [c for c, opened in zip(contenders, results, strict=True) if opened.recorded]
        assert len(winners) == 1, f"round {round_}: {len(winners)} recorded"
        for opened in results:
            # Each earlier round counted its opening and its acknowledgement.
            if opened.blocking:
                assert ids(opened.blocking) == [winners[0].intent_id]
                assert opened.write_count == 2 * round_ + 1
            else:
                assert opened.write_count == 2 * round_
        assert ids(await other.pending("session-a")) == [winners[0].intent_id]
        await journal.discard(winners[0].intent_id)
    assert await other.write_count("session-a", BACKEND) == 2 * rounds


async def test_a_closed_journal_opens_again_and_another_sees_its_data(
    place: Place, journal: IntentJournal
) -> None:
    """After close() a journal opens what it needs on its next use and still holds its data;
    another journal object on the same place sees it and settles it."""
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await journal.close()
    assert ids(await journal.pending("session-a")) == ["i-1"]
    other = place.journal() if place.backend.durable else journal
    await other.settle(make_decision(make_intent("i-1")))
    await other.close()
    assert await journal.is_settled("i-1")
    assert await journal.pending(None) == []


def test_a_journal_works_from_one_event_loop_to_the_next(place: Place) -> None:
    """A journal used by successive asyncio.run calls (each closing its loop) keeps working,
    and keeps its data."""
    journal = place.journal()

    async def finish() -> list[str]:
        entries = await journal.pending("session-a")
        await journal.close()
        return ids(entries)

    with warnings.catch_warnings():
        # Each loop's connections die with it unclosed, as any asyncio client's do when its
        # loop ends first: collect them here, where their warnings are expected.
        warnings.simplefilter("ignore", ResourceWarning)
        asyncio.run(journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=STRANGER))
        entry = asyncio.run(journal.get("i-1"))
        assert entry is not None and entry.owner == STRANGER
        assert asyncio.run(finish()) == ["i-1"]
        gc.collect()


async def test_no_message_or_repr_shows_the_servers_password(place: Place) -> None:
    """A journal at an address with a password, on a server nobody listens at: its repr, and
    every error its operations raise, name the server without the password."""
    if not place.backend.server:
        pytest.skip(f"{place.backend.name}: its address holds no credentials")
    secret = "hunter2-not-shown"
    parts = urlsplit(place.address)
    address = urlunsplit(parts._replace(netloc=f"agent:{secret}@127.0.0.1:{closed_port()}"))
    journal = place.backend.open_journal(address, namespace=place.space)
    assert secret not in repr(journal)
    intent = make_intent("i-1")
    operations = [
        lambda: journal.pending("session-a"),
        lambda: journal.pending(None),
        lambda: journal.record(intent, state=IntentState.IN_FLIGHT, owner=current_owner()),
        lambda: journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner()),
        lambda: journal.settle(make_decision(intent)),
        lambda: journal.check(),
        lambda: journal.migrate(),
    ]
    for operation in operations:
        with pytest.raises(JournalUnavailable) as caught:
            await operation()
        assert secret not in str(caught.value)
        assert "127.0.0.1" in str(caught.value)
    await journal.close()


# -- clearing an acknowledged intent in the next opening ---------------------------------------


async def test_open_intent_clears_the_acknowledged_intent_first(journal: IntentJournal) -> None:
    """``clearing`` forgets the earlier intent and counts it, as discard() does, before the
    opening is checked: one step, one commit where the journal folds it."""
    owner = current_owner()
    first = await journal.open_intent(make_intent("a-1"), state=IntentState.IN_FLIGHT, owner=owner)
    assert first == Opened(recorded=True, write_count=0)
    second = await journal.open_intent(
        make_intent("b-1", text="more"),
        state=IntentState.IN_FLIGHT,
        owner=owner,
        expect_write_count=2,
        clearing="a-1",
    )
    assert second == Opened(recorded=True, write_count=2)
    assert ids(await journal.pending("session-a")) == ["b-1"]
    assert await journal.write_count("session-a", BACKEND) == 3
    assert not await journal.is_settled("a-1")
    assert await journal.decisions(intent_id="a-1") == []


async def test_clearing_leaves_claimed_foreign_and_unknown_intents_alone(
    journal: IntentJournal,
) -> None:
    owner = current_owner()
    await journal.open_intent(make_intent("a-1"), state=IntentState.IN_FLIGHT, owner=owner)
    assert await journal.transition("a-1", state=IntentState.RECONCILING, owner=owner)
    blocked = await journal.open_intent(
        make_intent("b-1", text="more"), state=IntentState.IN_FLIGHT, owner=owner, clearing="a-1"
    )
    assert not blocked.recorded and ids(blocked.blocking) == ["a-1"]

    await journal.open_intent(
        make_intent("f-1", session_id="session-f"), state=IntentState.IN_FLIGHT, owner=STRANGER
    )
    held = await journal.open_intent(
        make_intent("f-2", session_id="session-f", text="more"),
        state=IntentState.IN_FLIGHT,
        owner=owner,
        clearing="f-1",
    )
    assert not held.recorded and ids(held.blocking) == ["f-1"]

    # Another session's in-flight intent of the same owner is not this opening's to clear.
    await journal.open_intent(
        make_intent("o-1", session_id="session-o"), state=IntentState.IN_FLIGHT, owner=owner
    )
    fresh = await journal.open_intent(
        make_intent("n-1", session_id="session-n"),
        state=IntentState.IN_FLIGHT,
        owner=owner,
        clearing="o-1",
    )
    assert fresh == Opened(recorded=True, write_count=0)
    assert ids(await journal.pending("session-o")) == ["o-1"]
    unknown = await journal.open_intent(
        make_intent("u-1", session_id="session-u"),
        state=IntentState.IN_FLIGHT,
        owner=owner,
        clearing="never-recorded",
    )
    assert unknown == Opened(recorded=True, write_count=0)


async def test_a_refused_opening_still_clears(journal: IntentJournal) -> None:
    owner = current_owner()
    await journal.open_intent(make_intent("a-1"), state=IntentState.IN_FLIGHT, owner=owner)
    await journal.record(make_intent("x-1", text="failed"), state=IntentState.FAILED, owner=owner)
    refused = await journal.open_intent(
        make_intent("b-1", text="more"), state=IntentState.IN_FLIGHT, owner=owner, clearing="a-1"
    )
    assert not refused.recorded and ids(refused.blocking) == ["x-1"]
    assert ids(await journal.pending("session-a")) == ["x-1"]


# -- several workers on one journal's data -----------------------------------------------------


async def test_an_id_one_session_holds_is_refused_to_another_worker_for_another_session(
    place: Place, journal: IntentJournal
) -> None:
    """An id held by one session cannot be recorded or opened for another session by another
    worker, and that session stays empty."""
    _, other = workers(place, journal, 2)
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    elsewhere = make_intent("i-1", session_id="session-b")
    with pytest.raises(IntentConflict):
        await other.record(elsewhere, state=IntentState.FAILED, owner=current_owner())
    with pytest.raises(IntentConflict):
        await other.open_intent(elsewhere, state=IntentState.FAILED, owner=current_owner())
    assert await other.pending("session-b") == []


async def test_racing_records_of_one_intent_store_and_count_it_once(
    place: Place, journal: IntentJournal
) -> None:
    """Four workers recording one intent at once all succeed; it is stored and counted once;
    while an intent of the session is unresolved, records of others still go in."""
    racing = workers(place, journal, 4)
    await journal.migrate()
    owner = current_owner()
    for round_ in range(20):
        intent = make_intent(f"r{round_}", created_at=1_000.0 + round_, text=str(round_))
        await asyncio.gather(
            *(each.record(intent, state=IntentState.FAILED, owner=owner) for each in racing)
        )
        assert await racing[1].write_count("session-a", BACKEND) == round_ + 1
    assert ids(await racing[2].pending("session-a")) == [f"r{n}" for n in range(20)]


@pytest.mark.parametrize("same", [False, True], ids=["different", "same"])
async def test_racing_settlements_settle_once(
    place: Place, journal: IntentJournal, same: bool
) -> None:
    """Two workers settling one intent at once store one decision and count one write: with
    different decisions the loser's is refused; with the very same decision (a retry racing
    its first attempt) both succeed."""
    first, second = workers(place, journal, 2)
    # The in-memory double treats settling twice as the caller's bug.
    refusal = "InvariantViolation" if isinstance(journal, MemoryJournal) else "IntentConflict"
    owner = current_owner()
    for round_ in range(15):
        intent = make_intent(f"s{round_}", text=str(round_))
        await first.record(intent, state=IntentState.RECONCILING, owner=owner)
        decisions = [make_decision(intent, decided_at=100.0 + n * (not same)) for n in range(2)]
        results = await asyncio.gather(
            first.settle(decisions[0], owner=owner),
            second.settle(decisions[1], owner=owner),
            return_exceptions=True,
        )
        outcomes = sorted(type(result).__name__ for result in results)
        assert outcomes == (["NoneType", "NoneType"] if same else sorted([refusal, "NoneType"]))
        stored = await second.decisions(intent_id=intent.intent_id)
        assert stored == [decisions[results.index(None)]]
    assert await first.pending(None) == []
    assert await first.write_count("session-a", BACKEND) == 30


async def test_a_record_filed_under_another_id_is_refused(place: Place, journal: Any) -> None:
    """A valid record copied over another intent's or another effect's (its digest matches,
    its id or key does not) is refused instead of passing as that intent or effect."""
    storage = place.storage()
    owner = current_owner()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=owner)
    await journal.record(make_intent("i-2", text="other"), state=IntentState.FAILED, owner=owner)
    copied = await storage.intent_record("session-a", "i-1")
    await storage.replace_intent_record("session-a", "i-2", copied)
    with pytest.raises(RecordTampered):
        await journal.get("i-2")

    first, second = make_effect("c1"), make_effect("c2")
    await journal.effects.begin(first)
    await journal.effects.begin(second)
    copied = await storage.effect_record("session-a", first.key)
    await storage.replace_effect_record("session-a", second.key, copied)
    with pytest.raises(RecordTampered):
        await journal.effects.get(second.key)
    assert await journal.effects.get(first.key) == first


def test_open_journal_passes_a_journal_object_through(journal: IntentJournal) -> None:
    """open_journal() of a journal object, whatever its backend, returns that very object."""
    assert open_journal(journal) is journal


# -- effects beside the intents ----------------------------------------------------------------


def taken_by(effect: Effect, owner: str) -> Effect:
    """``effect`` started again under ``owner``, one attempt more."""
    return dataclasses.replace(effect, owner=owner, attempts=effect.attempts + 1)


async def test_effects_count_no_write_of_their_session(journal: Any) -> None:
    """Beginning, restarting and finishing effects count no write of the session and list no
    intent."""
    effect = make_effect()
    await journal.effects.begin(effect)
    mine = taken_by(effect, "me/3/3")
    assert await journal.effects.restart(mine, expect_owner=effect.owner)
    await journal.effects.finish(mine.with_receipt("ok", at=2.0))
    assert await journal.write_count("session-a", BACKEND) == 0
    assert await journal.pending(None) == []


@pytest.mark.parametrize("same", [False, True], ids=["different", "same"])
async def test_racing_receipts_store_one(place: Place, journal: Any, same: bool) -> None:
    """Two workers storing a receipt for one started effect at once: with different receipts
    one wins and the other gets IntentConflict; with the very same receipt (a retry racing
    its first attempt) both succeed. The record stored is the winner's."""
    first, second = workers(place, journal, 2)
    await first.migrate()
    for round_ in range(15):
        effect = make_effect(f"c{round_}")
        await first.effects.begin(effect)
        receipts = [effect.with_receipt(f"ok {n * (not same)}", at=10.0) for n in range(2)]
        results = await asyncio.gather(
            first.effects.finish(receipts[0]),
            second.effects.finish(receipts[1]),
            return_exceptions=True,
        )
        kinds = sorted(type(result).__name__ for result in results)
        assert kinds == (["Effect", "Effect"] if same else ["Effect", "IntentConflict"])
        winner = next(result for result in results if isinstance(result, Effect))
        assert await second.effects.get(effect.key) == winner


async def test_racing_restarts_take_the_effect_once(place: Place, journal: Any) -> None:
    """Workers restarting one started effect from the same owner at once: exactly one takes
    it, and its record is the one stored."""
    racing = workers(place, journal, 4)
    await journal.migrate()
    for round_ in range(15):
        effect = make_effect(f"c{round_}")
        await journal.effects.begin(effect)
        mine = [taken_by(effect, f"worker/{n}/1") for n in range(4)]
        taken = await asyncio.gather(
            *(
                each.effects.restart(record, expect_owner=effect.owner)
                for each, record in zip(racing, mine, strict=True)
            )
        )
        assert sum(taken) == 1
        assert await racing[1].effects.get(effect.key) == mine[taken.index(True)]


async def test_a_receipt_sealed_anew_is_the_same_receipt(place: Place, journal: Any) -> None:
    """A sealed output is sealed with a new nonce on every encoding: the same receipt again is
    still a no-op returning the stored one, another output conflicts, and a worker holding
    the key reads the receipt back."""
    key = PayloadKey(os.urandom(32))
    journal.keyring.add([key])
    effect = make_effect(seal_key=key)
    await journal.effects.begin(effect)
    done = effect.with_receipt("charged 5 (SECRET)", at=10.0)
    assert done.encode() != done.encode()
    assert await journal.effects.finish(done) == done
    assert await journal.effects.finish(done) == done
    with pytest.raises(IntentConflict):
        await journal.effects.finish(effect.with_receipt("charged 6", at=10.0))
    _, reader = workers(place, journal, 2)
    reader.keyring.add([key])
    stored = await reader.effects.get(effect.key)
    assert stored == done and stored is not None and stored.state is EffectState.DONE
    assert stored.output == "charged 5 (SECRET)"


async def test_a_sealed_receipt_is_stored_sealed_and_left_by_its_retry(
    place: Place, journal: Any
) -> None:
    """The stored record of a sealed receipt does not show its output, and the same receipt
    again leaves the stored bytes as they are."""
    storage = place.storage()
    key = PayloadKey(os.urandom(32))
    journal.keyring.add([key])
    effect = make_effect(seal_key=key)
    await journal.effects.begin(effect)
    done = effect.with_receipt("charged 5 (SECRET-sealed-output)", at=3.0)
    await journal.effects.finish(done)
    stored = await storage.effect_record("session-a", effect.key)
    assert b"SECRET-sealed-output" not in stored
    assert await journal.effects.finish(done) == done
    assert await storage.effect_record("session-a", effect.key) == stored
