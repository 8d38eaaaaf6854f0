"""``MemoryJournal`` is a test double: it fails loudly when a caller breaks an invariant."""

from __future__ import annotations

import pytest

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.memory.journal import InvariantViolation, MemoryJournal
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action

from ..support.journal_support import STRANGER, make_decision, make_intent

pytestmark = pytest.mark.memory

DONE, OPEN = make_intent("done"), make_intent("open", text="x")


@pytest.fixture
async def settled_journal() -> MemoryJournal:
    """A journal holding one settled intent ``done`` and one pending intent ``open``."""
    journal = MemoryJournal()
    for intent in (DONE, OPEN):
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(DONE))
    return journal


async def test_settling_twice_is_a_violation(settled_journal: MemoryJournal) -> None:
    """Settling an already settled intent raises InvariantViolation and stores no second
    decision."""
    with pytest.raises(InvariantViolation, match="settled twice"):
        await settled_journal.settle(make_decision(DONE, action=Action.REPLAYED))

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
        await settled_journal.note(make_decision(DONE, action=action))

    assert len(await settled_journal.decisions(intent_id="done")) == 1


@pytest.mark.parametrize("action", [Action.DENIED, Action.LEFT_PENDING], ids=lambda a: a.value)
async def test_settle_with_non_settling_decision_is_a_violation(
    settled_journal: MemoryJournal, action: Action
) -> None:
    """settle() with a decision that does not close its intent raises InvariantViolation and
    leaves the intent pending and unsettled."""
    before = await settled_journal.get("open")

    with pytest.raises(InvariantViolation, match=action.value):
        await settled_journal.settle(make_decision(OPEN, action=action))

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
        await settled_journal.note(make_decision(OPEN, action=action))

    assert not await settled_journal.is_settled("open")
    assert await settled_journal.decisions(intent_id="open") == []
