"""The ``IntentJournal`` contracts: what the wrapper, its writers and its settlers rely on.
Here: recording and opening intents, counting writes, claims (transitions and fencing tokens)
and acknowledgements (``discard``); settling and noting decisions are in ``journal_decisions``,
reading, races, lost replies and schemas in ``journal_reads``.

Each check asks the subject's ``journal`` hook for a new, empty journal (once), and its
``another`` hook, where given, for other objects on the same data (workers); ``newer_schema``
stamps a newer schema version on a journal's storage and opens another journal on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Final

from .._backends.journal import (
    JOURNAL_COMPONENTS,
    JOURNAL_METHODS,
    IntentJournal,
    IntentState,
    JournalEntry,
    Opened,
)
from .._core.records import Action
from ..errors import IntentConflict, LeaseLost
from ._core import Subject, contract, fail, refused, require
from ._records import BACKEND, ME, OTHER_BACKEND, OTHER_KIND, STRANGER, make_decision, make_intent

__all__ = ["FAILED", "IN_FLIGHT", "JOURNAL_METHODS", "RECONCILING", "ids", "journal_of", "worker"]

FAILED: Final = IntentState.FAILED
IN_FLIGHT: Final = IntentState.IN_FLIGHT
RECONCILING: Final = IntentState.RECONCILING


def ids(entries: Sequence[JournalEntry]) -> list[str]:
    """Intent ids of journal entries, in order."""
    return [entry.intent.intent_id for entry in entries]


async def journal_of(subject: Subject) -> Any:
    """The subject's new, empty journal."""
    return await subject.make("journal")


async def worker(subject: Subject, journal: Any) -> Any:
    """Another journal object on ``journal``'s data, or ``journal`` itself when the subject
    offers none."""
    if not subject.offers("another"):
        return journal
    return await subject.make("another", journal)


async def _count(journal: Any, session_id: str = "session-a", backend: Any = BACKEND) -> int:
    found: int = await journal.write_count(session_id, backend)
    return found


async def _entry(journal: Any, intent_id: str) -> JournalEntry:
    entry: JournalEntry | None = await journal.get(intent_id)
    if entry is None:
        fail(f"get({intent_id!r}) found nothing where an unresolved intent should be")
    return entry


@contract("journal")
async def implements_the_intent_journal_protocol(subject: Subject) -> None:
    """The journal is an ``IntentJournal`` (the runtime-checkable protocol): every method the
    wrapper calls is there, and every component is an attribute (the component, or None)."""
    journal = await journal_of(subject)
    missing = [name for name in JOURNAL_METHODS if not callable(getattr(journal, name, None))]
    missing += [
        f"the attribute {name}" for name in JOURNAL_COMPONENTS if not hasattr(journal, name)
    ]
    require(not missing, f"it lacks {', '.join(missing)}")
    require(isinstance(journal, IntentJournal), "isinstance(journal, IntentJournal) is False")


@contract("journal")
async def a_recorded_intent_reads_back_as_written(subject: Subject) -> None:
    """An intent recorded comes back from ``pending()`` and ``get()`` with its content, state
    and owner, unsettled; an id never recorded has no entry, is not settled and has no
    decisions."""
    journal = await journal_of(subject)
    require(await journal.get("never") is None, "get() of an unknown id found an entry")
    require(not await journal.is_settled("never"), "is_settled() of an unknown id is True")
    require(await journal.pending("session-a") == [], "pending() of an empty journal lists some")
    require(await journal.decisions(intent_id="never") == [], "an unknown id has decisions stored")
    intent = make_intent("i-1")
    await journal.record(intent, state=FAILED, owner=ME)
    entries = await journal.pending("session-a")
    require(ids(entries) == ["i-1"], f"pending() lists {ids(entries)}, not ['i-1']")
    for how, entry in (("pending()", entries[0]), ("get()", await _entry(journal, "i-1"))):
        require(entry.intent == intent, f"{how} gives the intent back with other content")
        require(
            (entry.state, entry.owner) == (FAILED, ME),
            f"{how} gives state {entry.state} and owner {entry.owner}, not those recorded",
        )
    require(not await journal.is_settled("i-1"), "a recorded intent reads as settled")


@contract("journal")
async def record_is_idempotent_and_refuses_other_content(subject: Subject) -> None:
    """``record()`` of an id already recorded with the same content changes nothing (not even
    its state or owner), with other content raises ``IntentConflict`` and keeps the original,
    and of a settled id raises ``IntentConflict``."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    await journal.record(intent, state=IN_FLIGHT, owner=ME)
    before = await _entry(journal, "i-1")
    count = await _count(journal)
    await journal.record(make_intent("i-1"), state=FAILED, owner=STRANGER)
    after = await _entry(journal, "i-1")
    require(
        (after.state, after.owner) == (IN_FLIGHT, ME),
        f"record() again moved the intent to {after.state} under {after.owner}",
    )
    require(ids(await journal.pending("session-a")) == ["i-1"], "record() again added an intent")
    require(await _count(journal) == count, "record() again counted another write")
    changes: list[tuple[str, dict[str, Any]]] = [
        ("batch", {"text": "different"}),
        ("creation time", {"created_at": 1_700_000_001.0}),
        ("session", {"session_id": "session-b"}),
        ("backend", {"backend": OTHER_BACKEND}),
    ]
    for what, changed in changes:
        caught = await refused(
            IntentConflict,
            journal.record(make_intent("i-1", **changed), state=FAILED, owner=ME),
            f"record() of i-1 with another {what}",
        )
        require(
            getattr(caught, "intent_id", None) == "i-1",
            f"the IntentConflict names intent {getattr(caught, 'intent_id', None)!r}",
        )
        require(
            (await _entry(journal, "i-1")) == before, f"record() with another {what} changed it"
        )
    await journal.settle(make_decision(intent))
    await refused(
        IntentConflict,
        journal.record(intent, state=IN_FLIGHT, owner=ME),
        "record() of a settled id",
    )
    require(await journal.get("i-1") is None, "record() of a settled id revived it")


@contract("journal")
async def open_intent_is_idempotent_and_refuses_other_content(subject: Subject) -> None:
    """``open_intent()`` retried with the same intent, state and owner (its reply lost)
    answers ``recorded`` with the count the first call saw and counts once; with other content
    it raises ``IntentConflict`` and changes nothing; under another owner it is blocked by the
    intent; of a settled id it raises ``IntentConflict``."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    await journal.count_write("session-a", BACKEND)
    first = await journal.open_intent(intent, state=IN_FLIGHT, owner=ME, expect_write_count=1)
    require(first == Opened(recorded=True, write_count=1), f"the first opening answered {first}")
    await journal.count_write("session-a", BACKEND)
    again = await journal.open_intent(intent, state=IN_FLIGHT, owner=ME, expect_write_count=1)
    require(
        again == Opened(recorded=True, write_count=1),
        f"the retried opening answered {again}, not what the first did ({first})",
    )
    require(ids(await journal.pending("session-a")) == ["i-1"], "the retry added an intent")
    require(await _count(journal) == 3, f"the retry was counted (count {await _count(journal)})")
    for what, changed in (
        ("batch", {"text": "different"}),
        ("session", {"session_id": "session-b"}),
        ("backend", {"backend": OTHER_BACKEND}),
    ):
        await refused(
            IntentConflict,
            journal.open_intent(make_intent("i-1", **changed), state=IN_FLIGHT, owner=ME),
            f"open_intent() of i-1 with another {what}",
        )
        entry = await _entry(journal, "i-1")
        require(entry.intent == intent, f"open_intent() with another {what} changed the intent")
    counts = [
        await _count(journal),
        await _count(journal, "session-b"),
        await _count(journal, "session-a", OTHER_BACKEND),
    ]
    require(counts == [3, 0, 0], f"refused openings moved counts: {counts}, not [3, 0, 0]")
    stranger = await journal.open_intent(intent, state=IN_FLIGHT, owner=STRANGER)
    require(
        not stranger.recorded and ids(stranger.blocking) == ["i-1"],
        f"the same intent opened under another owner answered {stranger}, not blocked by it",
    )
    require(await journal.transition("i-1", state=RECONCILING, owner=ME), "a claim failed")
    await journal.settle(make_decision(intent), owner=ME)
    await refused(
        IntentConflict,
        journal.open_intent(intent, state=IN_FLIGHT, owner=ME),
        "open_intent() of a settled id",
    )
    require(await journal.pending("session-a") == [], "open_intent() revived a settled id")


@contract("journal")
async def open_intent_allows_one_unresolved_intent_per_session_and_backend(
    subject: Subject,
) -> None:
    """``open_intent()`` records an intent only while its session and backend have no other
    unresolved intent (in any state): otherwise it records and counts nothing, whatever count
    it expects, and reports those intents as blocking with the session's count."""
    journal = await journal_of(subject)
    first = await journal.open_intent(make_intent("i-1"), state=IN_FLIGHT, owner=ME)
    require(first == Opened(recorded=True, write_count=0), f"the first opening answered {first}")
    second = make_intent("i-2", created_at=1_700_000_001.0, text="more")
    for expected in (None, 0, 1):
        opened = await journal.open_intent(
            second, state=IN_FLIGHT, owner=ME, expect_write_count=expected
        )
        require(
            not opened.recorded and ids(opened.blocking) == ["i-1"] and opened.write_count == 1,
            f"a second opening of session-a (expecting count {expected}) answered {opened}, "
            "not blocked by i-1 at count 1",
        )
    require(await journal.get("i-2") is None, "a blocked opening recorded its intent")
    require(await _count(journal) == 1, "a blocked opening was counted")
    await journal.record(make_intent("f-1", session_id="session-f"), state=FAILED, owner=STRANGER)
    blocked = await journal.open_intent(
        make_intent("f-2", session_id="session-f", text="more"), state=IN_FLIGHT, owner=ME
    )
    require(
        not blocked.recorded and ids(blocked.blocking) == ["f-1"],
        f"an opening next to a failed intent answered {blocked}, not blocked by it",
    )
    for what, intent in (
        ("another session", make_intent("i-3", session_id="session-b")),
        ("another instance of the backend", make_intent("i-4", backend=OTHER_BACKEND)),
        ("another kind of backend", make_intent("i-5", backend=OTHER_KIND)),
    ):
        opened = await journal.open_intent(intent, state=IN_FLIGHT, owner=ME)
        require(
            opened == Opened(recorded=True, write_count=0),
            f"an opening on {what} answered {opened}: only its own session and backend count",
        )
    await journal.discard("i-1")
    opened = await journal.open_intent(second, state=IN_FLIGHT, owner=ME)
    require(
        opened == Opened(recorded=True, write_count=2),
        f"an opening after the first was acknowledged answered {opened}",
    )
    require(ids(await journal.pending("session-a", BACKEND)) == ["i-2"], "pending() is not ['i-2']")


@contract("journal")
async def an_opening_expecting_another_count_writes_nothing(subject: Subject) -> None:
    """``open_intent(expect_write_count=N)`` when the session's count is not N records
    nothing, counts nothing and answers the count as it is; expecting the right count, it
    records."""
    journal = await journal_of(subject)
    intent = make_intent("i-1")
    for _ in range(2):
        await journal.count_write("session-a", BACKEND)
    for stale in (0, 1, 3):
        opened = await journal.open_intent(
            intent, state=IN_FLIGHT, owner=ME, expect_write_count=stale
        )
        require(
            opened == Opened(recorded=False, write_count=2),
            f"an opening expecting count {stale} at count 2 answered {opened}",
        )
    require(await journal.get("i-1") is None, "a refused opening recorded its intent")
    require(await _count(journal) == 2, f"refused openings counted (count {await _count(journal)})")
    opened = await journal.open_intent(intent, state=IN_FLIGHT, owner=ME, expect_write_count=2)
    require(
        opened == Opened(recorded=True, write_count=2),
        f"the opening expecting the right count answered {opened}",
    )
    require(await _count(journal) == 3, "the opening was not counted")


@contract("journal")
async def writes_are_counted(subject: Subject) -> None:
    """A session's write count moves by one for each intent recorded or opened, each
    acknowledgement (``discard``), each settlement and each ``count_write`` (which returns the
    new count), and not for notes, claims, or other sessions and backends."""
    journal = await journal_of(subject)
    require(await _count(journal) == 0, "a new journal counts writes already")
    steps: list[tuple[str, int]] = []
    await journal.open_intent(make_intent("i-1"), state=IN_FLIGHT, owner=ME)
    steps.append(("open_intent", await _count(journal)))
    await journal.discard("i-1")
    steps.append(("discard", await _count(journal)))
    intent = make_intent("i-2", text="two")
    await journal.record(intent, state=FAILED, owner=ME)
    steps.append(("record", await _count(journal)))
    await journal.transition("i-2", state=RECONCILING, owner=ME)
    steps.append(("a claim", await _count(journal)))
    await journal.settle(make_decision(intent), owner=ME)
    steps.append(("settle", await _count(journal)))
    denied = make_intent("i-3", text="three")
    await journal.record(denied, state=FAILED, owner=ME)
    await journal.note(make_decision(denied, action=Action.DENIED))
    steps.append(("record and note", await _count(journal)))
    returned = await journal.count_write("session-a", BACKEND)
    steps.append(("count_write", await _count(journal)))
    wanted = [1, 2, 3, 3, 4, 5, 6]
    found = [count for _, count in steps]
    if found != wanted:
        wrong = next(i for i, (a, b) in enumerate(zip(found, wanted, strict=True)) if a != b)
        fail(
            f"after {steps[wrong][0]} the count is {found[wrong]}, not {wanted[wrong]} "
            f"(counts after each step: {found}, wanted {wanted})"
        )
    require(returned == 6, f"count_write() returned {returned}, not the new count 6")
    others = [await _count(journal, "session-b"), await _count(journal, "session-a", OTHER_BACKEND)]
    require(others == [0, 0], f"other sessions or backends were counted: {others}")


@contract("journal")
async def transition_is_a_compare_and_set(subject: Subject) -> None:
    """``transition()`` sets state and owner, answering True, only when every expectation given
    (``expect_state``, ``expect_owner``, ``expect_fence``, ``expect_updated_at``) matches the
    intent as it is, else answers False and changes nothing; ``updated_at`` moves forward."""
    journal = await journal_of(subject)
    await journal.open_intent(make_intent("i-1"), state=IN_FLIGHT, owner=ME)
    entry = await _entry(journal, "i-1")
    wrong: list[tuple[str, dict[str, Any]]] = [
        ("expect_state", {"expect_state": FAILED}),
        ("expect_owner", {"expect_owner": STRANGER}),
        (
            "expect_owner (the state matching)",
            {"expect_state": IN_FLIGHT, "expect_owner": STRANGER},
        ),
        ("expect_fence", {"expect_fence": entry.fence + 1}),
        ("expect_updated_at", {"expect_updated_at": entry.updated_at - 1.0}),
    ]
    for what, expectations in wrong:
        changed = await journal.transition("i-1", state=RECONCILING, owner=STRANGER, **expectations)
        require(changed is False, f"a transition with a wrong {what} answered {changed!r}")
        now = await _entry(journal, "i-1")
        require(now == entry, f"a transition with a wrong {what} changed the intent: {now}")
    claimed = await journal.transition(
        "i-1",
        state=RECONCILING,
        owner=STRANGER,
        expect_state=IN_FLIGHT,
        expect_owner=ME,
        expect_fence=entry.fence,
        expect_updated_at=entry.updated_at,
    )
    require(claimed is True, f"a transition whose expectations all match answered {claimed!r}")
    now = await _entry(journal, "i-1")
    require(
        (now.state, now.owner) == (RECONCILING, STRANGER),
        f"after a transition the intent is {now.state} under {now.owner}",
    )
    require(now.updated_at >= entry.updated_at, "updated_at went back on a transition")
    again = await journal.transition("i-1", state=RECONCILING, owner=ME, expect_state=IN_FLIGHT)
    require(again is False, "a second claim expecting the state before the first succeeded")
    await asyncio.sleep(0.02)
    renewed = await journal.transition(
        "i-1", state=RECONCILING, owner=STRANGER, expect_fence=now.fence
    )
    require(renewed is True, "a renewal by the holder under its token failed")
    later = await _entry(journal, "i-1")
    require(later.updated_at > now.updated_at, "a renewal did not move updated_at forward")
    stale = await journal.transition(
        "i-1", state=RECONCILING, owner=ME, expect_updated_at=now.updated_at
    )
    require(stale is False, "a claim expecting updated_at as it was before a renewal succeeded")


@contract("journal")
async def fencing_tokens_grow_only_on_claims(subject: Subject) -> None:
    """An intent's fencing token is its session's write count when opened, takes a new value on
    every claim (a move to reconciling without ``expect_fence``: above the last and at least the
    session's count) and keeps it on a renewal under it and on any other transition."""
    journal = await journal_of(subject)
    for _ in range(3):
        await journal.count_write("session-a", BACKEND)
    opened = await journal.open_intent(make_intent("i-1"), state=IN_FLIGHT, owner=ME)
    fence = (await _entry(journal, "i-1")).fence
    require(
        fence == opened.write_count == 3,
        f"an intent opened at count 3 holds token {fence} (opened at {opened.write_count})",
    )
    await journal.transition("i-1", state=FAILED, owner=ME)
    moved = (await _entry(journal, "i-1")).fence
    require(moved == fence, f"a move to failed changed the token from {fence} to {moved}")
    await journal.transition("i-1", state=RECONCILING, owner=STRANGER, expect_state=FAILED)
    claimed = (await _entry(journal, "i-1")).fence
    count = await _count(journal)
    require(
        claimed > fence and claimed >= count,
        f"a claim took token {claimed} after {fence}, at write count {count}",
    )
    await journal.transition("i-1", state=RECONCILING, owner=STRANGER, expect_fence=claimed)
    renewed = (await _entry(journal, "i-1")).fence
    require(renewed == claimed, f"a renewal under token {claimed} changed it to {renewed}")
    for _ in range(5):
        await journal.count_write("session-a", BACKEND)
    await journal.transition("i-1", state=RECONCILING, owner=ME, expect_owner=STRANGER)
    taken = (await _entry(journal, "i-1")).fence
    count = await _count(journal)
    require(
        taken > claimed and taken >= count,
        f"a second claim took token {taken} after {claimed}, at write count {count}",
    )


@contract("journal")
async def discard_with_an_owner_needs_its_hold(subject: Subject) -> None:
    """``discard(owner=...)`` (with ``fence``) forgets the intent only while that owner holds
    it in flight (under that token); otherwise it raises ``LeaseLost`` and changes nothing."""
    journal = await journal_of(subject)
    await journal.open_intent(make_intent("i-1"), state=IN_FLIGHT, owner=ME)
    entry = await _entry(journal, "i-1")
    for what, owner, fence in (
        ("another owner", STRANGER, None),
        ("a stale token", ME, entry.fence + 1),
    ):
        await refused(
            LeaseLost, journal.discard("i-1", owner=owner, fence=fence), f"discard() by {what}"
        )
        require(await _entry(journal, "i-1") == entry, f"discard() by {what} changed the intent")
        require(await _count(journal) == 1, f"discard() by {what} was counted")
    claimed = make_intent("c-1", session_id="session-c")
    await journal.open_intent(claimed, state=IN_FLIGHT, owner=ME)
    await journal.transition("c-1", state=RECONCILING, owner=ME)
    await refused(
        LeaseLost, journal.discard("c-1", owner=ME), "discard() of an intent no longer in flight"
    )
    require(await journal.get("c-1") is not None, "discard() of a claimed intent forgot it")
    await journal.discard("i-1", owner=ME, fence=entry.fence)
    require(await journal.get("i-1") is None, "discard() by its holder left the intent")
    require(await _count(journal) == 2, "discard() by its holder was not counted")


@contract("journal")
async def discard_by_an_owner_whose_intent_another_settled_is_refused(subject: Subject) -> None:
    """``discard(owner=...)`` of an intent that another worker claimed and settled meanwhile
    (the owner's lease ran out while it was stalled) raises ``LeaseLost`` and changes nothing:
    the intent stays settled and no write is counted. An owner that wakes never takes the new
    holder's settlement for its own acknowledgement, and so never writes the batch again."""
    journal = await journal_of(subject)
    other = await worker(subject, journal)
    await journal.open_intent(make_intent("i-1"), state=IN_FLIGHT, owner=ME)
    token = (await _entry(journal, "i-1")).fence
    require(
        await other.transition("i-1", state=RECONCILING, owner=STRANGER),
        "a claim of an intent in flight was refused",
    )
    taken = (await _entry(other, "i-1")).fence
    await other.settle(make_decision(make_intent("i-1")), owner=STRANGER, fence=taken)
    count = await _count(journal)
    for fence in (None, token):
        await refused(
            LeaseLost,
            journal.discard("i-1", owner=ME, fence=fence),
            "discard() by the owner of an intent another worker settled"
            + ("" if fence is None else ", under its token"),
        )
    require(await journal.is_settled("i-1"), "a refused discard() unsettled the intent")
    require(await journal.get("i-1") is None, "a refused discard() revived the intent")
    require(await _count(journal) == count, "a refused discard() counted a write")


@contract("journal")
async def transition_of_an_unknown_or_settled_id_changes_nothing(subject: Subject) -> None:
    """``transition()`` of an id never recorded, or of one settled, answers False and changes
    nothing (no intent appears, a settled one stays settled and off ``pending()``, no write is
    counted), and so does ``discard()`` of either (by an owner, of a settled one, refused with
    ``LeaseLost``): a late claim or acknowledgement never revives what a decision closed."""
    journal = await journal_of(subject)
    intent = make_intent("s-1")
    await journal.record(intent, state=FAILED, owner=ME)
    await journal.settle(make_decision(intent))
    count = await _count(journal)
    moves: list[tuple[str, dict[str, Any]]] = [
        ("a claim", {"state": RECONCILING, "owner": STRANGER}),
        ("a move to in flight", {"state": IN_FLIGHT, "owner": ME}),
        ("a claim expecting a state", {"state": RECONCILING, "owner": ME, "expect_state": FAILED}),
        ("a renewal under a token", {"state": RECONCILING, "owner": ME, "expect_fence": 0}),
    ]
    for name, what in (("never", "an unknown id"), ("s-1", "a settled id")):
        for how, move in moves:
            changed = await journal.transition(name, **move)
            require(changed is False, f"{how} of {what} answered {changed!r}, not False")
        await journal.discard(name)
        if name == "never":
            await journal.discard(name, owner=ME)
        else:
            await refused(
                LeaseLost, journal.discard(name, owner=ME), f"discard() by an owner of {what}"
            )
        require(await journal.get(name) is None, f"moving {what} made it an unresolved intent")
    require(await journal.pending(None) == [], "moving an unknown or settled id listed an intent")
    require(await journal.is_settled("s-1"), "moving a settled intent unsettled it")
    require(not await journal.is_settled("never"), "moving an unknown id settled it")
    require(await _count(journal) == count, "moving an unknown or settled id counted a write")


@contract("journal")
async def an_intents_age_is_seconds_by_the_journals_clock(subject: Subject) -> None:
    """An intent's age (``JournalEntry.held_for(now)``: its ``age`` where the journal gives
    one, else ``now`` less its ``updated_at``) counts seconds from when the journal last wrote
    it, by the journal's clock, never from the client's ``created_at``: recorded or opened now
    with a creation time long past, it reads as just written, a third of a second later as
    about that old, and a renewal starts it again; a live owner's intent is never taken for
    abandoned."""
    journal = await journal_of(subject)
    long_ago = 1_000_000_000.0
    await journal.record(make_intent("c-1", created_at=long_ago), state=IN_FLIGHT, owner=ME)
    opened = make_intent("c-2", session_id="session-b", created_at=long_ago)
    await journal.open_intent(opened, state=IN_FLIGHT, owner=ME)

    async def ages() -> dict[str, float]:
        now = time.time()
        found = {name: (await _entry(journal, name)).held_for(now) for name in ("c-1", "c-2")}
        for session in ("session-a", "session-b"):
            for entry in await journal.pending(session):
                found[f"{entry.intent.intent_id} in pending()"] = entry.held_for(now)
        return found

    def within(found: dict[str, float], low: float, high: float, when: str) -> None:
        for name, age in found.items():
            require(
                low <= age <= high,
                f"{when}, {name} reads as held for {age:.3f} s, not between {low} and {high} s "
                "(an age taken from the client's created_at, or not in seconds)",
            )

    within(await ages(), -1.0, 2.0, "right after it was recorded")
    await asyncio.sleep(0.35)
    within(await ages(), 0.25, 3.0, "0.35 s after it was recorded")
    renewed = await journal.transition("c-1", state=IN_FLIGHT, owner=ME, expect_owner=ME)
    require(renewed is True, "a renewal by the intent's owner failed")
    age = (await _entry(journal, "c-1")).held_for(time.time())
    require(-1.0 <= age < 0.25, f"right after a renewal the intent reads as held for {age:.3f} s")
