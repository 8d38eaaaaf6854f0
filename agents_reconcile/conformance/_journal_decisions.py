"""The ``IntentJournal`` contracts on decisions: settling an intent (only under its claim,
once, for the same decision) and noting a decision that leaves it unresolved. The others are in
``journal`` and ``journal_reads``."""

from __future__ import annotations

import dataclasses

from .._backends.journal import JournalEntry
from .._core.records import Action, Decision
from ..errors import IntentConflict, LeaseLost
from ._core import Subject, contract, refused, require
from ._journal import FAILED, RECONCILING, _count, _entry, ids, journal_of
from ._records import ME, STRANGER, make_decision, make_intent

__all__: list[str] = []


@contract("journal")
async def settle_with_an_owner_needs_its_claim(subject: Subject) -> None:
    """``settle(owner=...)`` (with ``fence``) settles only while that owner holds the intent's
    claim (reconciling, under that token); otherwise it raises ``LeaseLost`` and changes
    nothing."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    decision = make_decision(intent)
    await journal.record(intent, state=FAILED, owner=ME)

    async def unchanged(what: str, before: JournalEntry) -> None:
        require(not await journal.is_settled("i-1"), f"settle() by {what} settled it")
        require(await _entry(journal, "i-1") == before, f"settle() by {what} changed the intent")
        require(await journal.decisions(intent_id="i-1") == [], f"settle() by {what} stored")
        require(await _count(journal) == 1, f"settle() by {what} was counted")

    before = await _entry(journal, "i-1")
    await refused(
        LeaseLost, journal.settle(decision, owner=ME), "settle() of an intent nobody claimed"
    )
    await unchanged("an owner without a claim", before)
    await journal.transition("i-1", state=RECONCILING, owner=STRANGER, expect_state=FAILED)
    held = await _entry(journal, "i-1")
    for what, owner, fence in (
        ("another owner", ME, None),
        ("a stale token", STRANGER, held.fence + 1),
    ):
        await refused(
            LeaseLost, journal.settle(decision, owner=owner, fence=fence), f"settle() by {what}"
        )
        await unchanged(what, held)
    await journal.settle(decision, owner=STRANGER, fence=held.fence)
    require(await journal.is_settled("i-1"), "settle() by the claim's holder did not settle it")


@contract("journal")
async def settle_closes_the_intent_and_keeps_the_decision(subject: Subject) -> None:
    """``settle()`` removes the intent from ``pending()`` and ``get()``, marks its id settled
    and stores the decision, for every settling action, leaving other intents alone."""
    journal = await journal_of(subject)
    kept = make_intent("k-1", text="kept")
    await journal.record(kept, state=FAILED, owner=ME)
    for action in (Action.SETTLED, Action.REPLAYED, Action.DROPPED):
        intent = make_intent(f"i-{action.value}", created_at=1_700_000_005.0)
        await journal.record(intent, state=RECONCILING, owner=ME)
        decision = make_decision(intent, action=action)
        await journal.settle(decision)
        name = intent.intent_id
        require(await journal.is_settled(name), f"a {action.value} decision left it unsettled")
        require(await journal.get(name) is None, f"a {action.value} decision left its entry")
        stored = await journal.decisions(intent_id=name)
        require(stored == [decision], f"a {action.value} decision was stored as {stored}")
    require(ids(await journal.pending("session-a")) == ["k-1"], "settling touched another intent")
    require(not await journal.is_settled("k-1"), "settling settled another intent")


@contract("journal")
async def settle_is_idempotent_for_the_same_decision(subject: Subject) -> None:
    """``settle()`` again with the very decision that settled the intent (its reply lost, or a
    decoded copy) is a no-op, neither counted nor stored twice; another decision for a settled
    intent raises ``IntentConflict`` and changes nothing."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    await journal.record(intent, state=RECONCILING, owner=ME)
    decision = make_decision(intent)
    await journal.settle(decision, owner=ME)
    await journal.settle(decision, owner=ME)
    await journal.settle(Decision.decode(decision.encode()))
    stored = await journal.decisions(intent_id="i-1")
    require(stored == [decision], f"settling again stored {len(stored)} decisions, not 1")
    require(await _count(journal) == 2, f"settling again was counted ({await _count(journal)})")
    other = make_decision(intent, action=Action.REPLAYED, decided_at=1_700_000_200.0)
    await refused(IntentConflict, journal.settle(other, owner=ME), "settle() with another decision")
    require(
        await journal.decisions(intent_id="i-1") == [decision],
        "settle() with another decision stored it",
    )
    require(await _count(journal) == 2, "settle() with another decision was counted")


@contract("journal")
async def note_keeps_the_intent_unresolved(subject: Subject) -> None:
    """``note()`` stores a decision that leaves its intent unresolved (pending, unchanged,
    unsettled, its session's count unmoved), and settling it later keeps both decisions."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    await journal.record(intent, state=FAILED, owner=ME)
    before = await _entry(journal, "i-1")
    for action, at in ((Action.DENIED, 1_700_000_100.0), (Action.LEFT_PENDING, 1_700_000_110.0)):
        await journal.note(make_decision(intent, action=action, decided_at=at))
    require(await _entry(journal, "i-1") == before, "note() changed the intent")
    require(not await journal.is_settled("i-1"), "note() settled the intent")
    require(ids(await journal.pending("session-a")) == ["i-1"], "note() took it off pending()")
    require(await _count(journal) == 1, "note() was counted as a write")
    replay = make_decision(intent, action=Action.REPLAYED, decided_at=1_700_000_120.0)
    await journal.settle(replay)
    actions = [found.action for found in await journal.decisions(intent_id="i-1")]
    require(
        actions == [Action.REPLAYED, Action.LEFT_PENDING, Action.DENIED],
        f"after notes and a settlement the decisions are {[a.value for a in actions]}",
    )


@contract("journal")
async def settle_and_note_take_only_their_kind_of_decision(subject: Subject) -> None:
    """``settle()`` refuses a decision that leaves its intent unresolved and ``note()`` one
    that settles it (``ValueError``), writing nothing."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    await journal.record(intent, state=FAILED, owner=ME)
    before = await _entry(journal, "i-1")
    for action in (Action.DENIED, Action.LEFT_PENDING):
        await refused(
            ValueError,
            journal.settle(make_decision(intent, action=action)),
            f"settle() of a {action.value} decision",
        )
    for action in (Action.SETTLED, Action.REPLAYED, Action.DROPPED):
        await refused(
            ValueError,
            journal.note(make_decision(intent, action=action)),
            f"note() of a {action.value} decision",
        )
    require(not await journal.is_settled("i-1"), "a refused decision settled the intent")
    require(await _entry(journal, "i-1") == before, "a refused decision changed the intent")
    require(await journal.decisions() == [], "a refused decision was stored")
    require(await _count(journal) == 1, "a refused decision was counted")


@contract("journal")
async def note_again_counts_the_newest_decision_in_place(subject: Subject) -> None:
    """``note_again(previous, again)`` replaces the newest decision about an intent with
    ``again`` (the same decision counted once more) only while that newest decision is still
    ``previous``, and answers whether it did: one stored decision, not one per repeat."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    await journal.record(intent, state=FAILED, owner=ME)
    denial = make_decision(intent, action=Action.DENIED)
    await journal.note(denial)
    twice = dataclasses.replace(denial, repeats=2, last_seen=1_700_000_200.0)
    require(await journal.note_again(denial, twice) is True, "note_again() did not count it")
    found = await journal.decisions(intent_id="i-1")
    require(found == [twice], f"after note_again() the decisions are {found}, not [the count]")
    thrice = dataclasses.replace(denial, repeats=3, last_seen=1_700_000_300.0)
    require(
        await journal.note_again(denial, thrice) is False,
        "note_again() counted over a decision that is no longer the one read",
    )
    other = make_decision(intent, action=Action.LEFT_PENDING, decided_at=1_700_000_400.0)
    await journal.note(other)
    require(
        await journal.note_again(twice, thrice) is False,
        "note_again() counted over a decision that is no longer the newest",
    )
    found = await journal.decisions(intent_id="i-1")
    require(found == [other, twice], f"after the refused counts the decisions are {found}")
    stranger = make_decision(make_intent("i-9"), action=Action.DENIED)
    require(
        await journal.note_again(stranger, thrice) is False,
        "note_again() of an intent without decisions answered True",
    )
    require(await journal.decisions(intent_id="i-9") == [], "note_again() stored a decision")
