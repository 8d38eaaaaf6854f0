"""``MemoryJournal`` is a test double: it fails loudly when a caller breaks an invariant."""

from __future__ import annotations

from typing import Any

import pytest

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.memory.journal import InvariantViolation, MemoryJournal
from agents_reconcile._core.fingerprint import digest_items
from agents_reconcile._core.ownership import Owner, current_owner
from agents_reconcile._core.records import (
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
)

pytestmark = pytest.mark.memory

BACKEND = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/data/chat.db")
STRANGER = Owner(host="elsewhere#0badc0de", pid=4242, started="987654")


def make_intent(intent_id: str, *, text: str = "hello") -> PendingWrite:
    """A well-formed pending write of one user item."""
    batch: tuple[dict[str, Any], ...] = ({"role": "user", "content": text},)
    return PendingWrite(
        intent_id=intent_id,
        session_id="session-a",
        backend=BACKEND,
        batch=batch,
        batch_digests=digest_items(batch),
        before_digests=(),
        before_is_whole=True,
        created_at=1_700_000_000.0,
        persisted_count=0,
    )


def make_decision(intent_id: str, action: Action) -> Decision:
    """A decision about ``intent_id`` with the given action."""
    settling = action in (Action.SETTLED, Action.REPLAYED, Action.DROPPED)
    return Decision(
        intent_id=intent_id,
        session_id="session-a",
        backend=BACKEND,
        outcome=Outcome.COMMITTED if settling else Outcome.AMBIGUOUS,
        reason=Reason.BATCH_PRESENT if settling else Reason.HISTORY_CHANGED,
        action=action,
        decided_at=1_700_000_100.0,
    )


@pytest.fixture
async def settled_journal() -> MemoryJournal:
    """A journal holding one settled intent ``done`` and one pending intent ``open``."""
    journal = MemoryJournal()
    await journal.record(make_intent("done"), state=IntentState.FAILED, owner=current_owner())
    await journal.record(
        make_intent("open", text="x"), state=IntentState.FAILED, owner=current_owner()
    )
    await journal.settle(make_decision("done", Action.SETTLED))
    return journal


async def test_settling_twice_is_a_violation(settled_journal: MemoryJournal) -> None:
    """Settling an already settled intent raises InvariantViolation and stores no second
    decision."""
    with pytest.raises(InvariantViolation, match="settled twice"):
        await settled_journal.settle(make_decision("done", Action.REPLAYED))

    assert [d.action for d in await settled_journal.decisions(intent_id="done")] == [Action.SETTLED]


async def test_transition_of_settled_intent_is_a_violation(
    settled_journal: MemoryJournal,
) -> None:
    """Moving a settled intent raises InvariantViolation and does not revive it."""
    with pytest.raises(InvariantViolation, match="settled"):
        await settled_journal.transition("done", state=IntentState.RECONCILING, owner=STRANGER)

    assert await settled_journal.get("done") is None


async def test_transition_of_unknown_intent_is_a_violation() -> None:
    """Moving an intent that was never recorded raises InvariantViolation instead of returning
    False."""
    journal = MemoryJournal()

    with pytest.raises(InvariantViolation, match="unknown"):
        await journal.transition("ghost", state=IntentState.RECONCILING, owner=STRANGER)

    assert await journal.get("ghost") is None


async def test_discard_of_settled_intent_is_a_violation(settled_journal: MemoryJournal) -> None:
    """Discarding a settled intent raises InvariantViolation and leaves it settled."""
    with pytest.raises(InvariantViolation, match="settled"):
        await settled_journal.discard("done")

    assert await settled_journal.is_settled("done")


async def test_discard_of_unknown_intent_is_a_violation(settled_journal: MemoryJournal) -> None:
    """Discarding an intent that was never recorded raises InvariantViolation and leaves the
    others."""
    with pytest.raises(InvariantViolation, match="unknown"):
        await settled_journal.discard("ghost")

    assert [e.intent.intent_id for e in await settled_journal.pending("session-a")] == ["open"]


async def test_discarding_twice_is_a_violation() -> None:
    """A second discard of the same intent raises InvariantViolation (it is unknown by then)."""
    journal = MemoryJournal()
    await journal.record(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner())
    await journal.discard("i-1")

    with pytest.raises(InvariantViolation):
        await journal.discard("i-1")


@pytest.mark.parametrize("action", [Action.DENIED, Action.LEFT_PENDING], ids=lambda a: a.value)
async def test_note_on_settled_intent_is_a_violation(
    settled_journal: MemoryJournal, action: Action
) -> None:
    """Noting a decision on a settled intent raises InvariantViolation and stores nothing."""
    with pytest.raises(InvariantViolation, match="settled"):
        await settled_journal.note(make_decision("done", action))

    assert len(await settled_journal.decisions(intent_id="done")) == 1


@pytest.mark.parametrize("action", [Action.DENIED, Action.LEFT_PENDING], ids=lambda a: a.value)
async def test_settle_with_non_settling_decision_is_a_violation(
    settled_journal: MemoryJournal, action: Action
) -> None:
    """settle() with a decision that does not close its intent raises InvariantViolation and
    leaves the intent pending and unsettled."""
    before = await settled_journal.get("open")

    with pytest.raises(InvariantViolation, match=action.value):
        await settled_journal.settle(make_decision("open", action))

    assert await settled_journal.get("open") == before
    assert not await settled_journal.is_settled("open")
    assert await settled_journal.decisions(intent_id="open") == []


@pytest.mark.parametrize(
    "action", [Action.SETTLED, Action.REPLAYED, Action.DROPPED], ids=lambda a: a.value
)
async def test_note_with_settling_decision_is_a_violation(
    settled_journal: MemoryJournal, action: Action
) -> None:
    """note() with a settling decision raises InvariantViolation, so a settlement cannot slip
    past settle()."""
    with pytest.raises(InvariantViolation, match="settle"):
        await settled_journal.note(make_decision("open", action))

    assert not await settled_journal.is_settled("open")
    assert await settled_journal.decisions(intent_id="open") == []
