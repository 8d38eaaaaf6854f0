"""The ``IntentJournal`` contracts on reading (ordering, filters, ``limit``), on an opening's
clearing, on races and lost replies, and on schemas. The others are in ``journal`` and
``journal_decisions``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .._backends.journal import Opened
from .._core.records import Action, Decision
from ..errors import JournalError
from ._core import Subject, contract, refused, require, skip
from ._journal import FAILED, IN_FLIGHT, RECONCILING, _count, _entry, ids, journal_of, worker
from ._records import BACKEND, ME, OTHER_BACKEND, OTHER_KIND, STRANGER, make_decision, make_intent

__all__ = ["newer_schema_refused", "schema_holds"]


@contract("journal")
async def pending_is_oldest_first(subject: Subject) -> None:
    """``pending()`` lists intents by creation time, oldest first, whatever order they were
    recorded in, for one session and for every session (``None``)."""
    journal = await journal_of(subject)
    for name, at, session in (
        ("middle", 2000.0, "session-a"),
        ("newest", 3000.0, "session-a"),
        ("other", 1500.0, "session-b"),
        ("oldest", 1000.0, "session-a"),
    ):
        intent = make_intent(name, created_at=at, session_id=session, text=name)
        await journal.record(intent, state=FAILED, owner=ME)
    one = ids(await journal.pending("session-a"))
    require(one == ["oldest", "middle", "newest"], f"pending('session-a') lists {one}")
    every = ids(await journal.pending(None))
    require(every == ["oldest", "other", "middle", "newest"], f"pending(None) lists {every}")


@contract("journal")
async def pending_filters_by_session_and_backend(subject: Subject) -> None:
    """``pending(session_id, backend)`` lists only that session's intents, and only that
    backend's when one is given (its kind and its namespace both count)."""
    journal = await journal_of(subject)
    for name, session, backend in (
        ("same", "session-a", BACKEND),
        ("other-db", "session-a", OTHER_BACKEND),
        ("other-kind", "session-a", OTHER_KIND),
        ("b-1", "session-b", BACKEND),
    ):
        intent = make_intent(name, session_id=session, backend=backend, text=name)
        await journal.record(intent, state=FAILED, owner=ME)
    wanted: list[tuple[str, Any, list[str]]] = [
        ("session-a", None, ["other-db", "other-kind", "same"]),
        ("session-b", None, ["b-1"]),
        ("session-c", None, []),
        ("session-a", BACKEND, ["same"]),
        ("session-a", OTHER_BACKEND, ["other-db"]),
        ("session-a", OTHER_KIND, ["other-kind"]),
        ("session-b", OTHER_BACKEND, []),
    ]
    for session, backend, expected in wanted:
        found = sorted(ids(await journal.pending(session, backend)))
        require(
            found == expected,
            f"pending({session!r}, {backend}) lists {found}, not {expected}",
        )


async def _four_decisions(journal: Any) -> list[Decision]:
    """Decisions d1..d4 stored in that order (newest last) about three intents of two
    sessions: d1 a denial of a-1, then settlements of b-1, a-2 and a-1."""
    a1 = make_intent("a-1", created_at=1.0)
    a2 = make_intent("a-2", created_at=2.0, text="two")
    b1 = make_intent("b-1", session_id="session-b", created_at=3.0)
    for intent in (a1, a2, b1):
        await journal.record(intent, state=FAILED, owner=ME)
    d1 = make_decision(a1, action=Action.DENIED, decided_at=101.0)
    d2 = make_decision(b1, decided_at=102.0)
    d3 = make_decision(a2, decided_at=103.0)
    d4 = make_decision(a1, action=Action.REPLAYED, decided_at=104.0)
    await journal.note(d1)
    for decision in (d2, d3, d4):
        await journal.settle(decision)
    return [d1, d2, d3, d4]


def _names(decisions: Sequence[Decision], every: Sequence[Decision]) -> list[str]:
    return [f"d{every.index(d) + 1}" if d in every else "?" for d in decisions]


@contract("journal")
async def decisions_are_newest_first_and_filtered(subject: Subject) -> None:
    """``decisions()`` lists the stored decisions newest first, only those of a session or of
    an intent when asked."""
    journal = await journal_of(subject)
    every = await _four_decisions(journal)
    d1, d2, d3, d4 = every
    asked: list[tuple[str, dict[str, Any], list[Decision]]] = [
        ("decisions()", {}, [d4, d3, d2, d1]),
        ("decisions(session_id='session-a')", {"session_id": "session-a"}, [d4, d3, d1]),
        ("decisions(session_id='session-b')", {"session_id": "session-b"}, [d2]),
        ("decisions(intent_id='a-1')", {"intent_id": "a-1"}, [d4, d1]),
        (
            "decisions(session 'session-b', intent 'a-1')",
            {"session_id": "session-b", "intent_id": "a-1"},
            [],
        ),
        ("decisions(session_id='nobody')", {"session_id": "nobody"}, []),
    ]
    for call, filters, expected in asked:
        found = await journal.decisions(**filters)
        require(
            found == expected,
            f"{call} gives {_names(found, every)}, not {_names(expected, every)} "
            "(d1..d4 stored oldest to newest)",
        )


@contract("journal")
async def decisions_honour_limit(subject: Subject) -> None:
    """``decisions(limit=N)`` returns the N newest decisions at most (filtered ones too), and a
    limit below 1 raises ``ValueError``."""
    journal = await journal_of(subject)
    every = await _four_decisions(journal)
    d1, d2, d3, d4 = every
    for filters, limit, expected in (
        ({}, 2, [d4, d3]),
        ({}, 1, [d4]),
        ({}, 10, [d4, d3, d2, d1]),
        ({"session_id": "session-a"}, 1, [d4]),
        ({"intent_id": "a-1"}, 1, [d4]),
    ):
        found = await journal.decisions(**filters, limit=limit)
        call = ", ".join(f"{key}={value!r}" for key, value in {**filters, "limit": limit}.items())
        require(
            found == expected,
            f"decisions({call}) gives {_names(found, every)}, not "
            f"{_names(expected, every)} (d1..d4 stored oldest to newest)",
        )
    for limit in (0, -1):
        await refused(ValueError, journal.decisions(limit=limit), f"decisions(limit={limit})")


@contract("journal")
async def newest_decisions_are_each_intents_newest(subject: Subject) -> None:
    """``newest_decisions(ids)`` gives the newest decision of each intent named that has one,
    and leaves out those that have none."""
    journal = await journal_of(subject)
    d1, d2, d3, d4 = await _four_decisions(journal)
    asked: list[tuple[list[str], dict[str, Decision]]] = [
        (["a-1", "a-2", "b-1", "none"], {"a-1": d4, "a-2": d3, "b-1": d2}),
        (["b-1"], {"b-1": d2}),
        (["none"], {}),
        ([], {}),
    ]
    every = [d1, d2, d3, d4]

    def named(by_intent: dict[str, Decision]) -> dict[str, str]:
        return dict(zip(by_intent, _names(list(by_intent.values()), every), strict=True))

    for ids_asked, expected in asked:
        found = await journal.newest_decisions(ids_asked)
        require(
            found == expected,
            f"newest_decisions({ids_asked}) gives {named(found)}, not {named(expected)} "
            "(d1..d4 stored oldest to newest)",
        )


@contract("journal")
async def open_intent_clears_only_its_owners_acknowledged_intent(subject: Subject) -> None:
    """``open_intent(clearing=id)`` first forgets that intent and counts it, as ``discard()``
    does, whatever the answer, but only while it is in flight under the same owner, session and
    backend: a claimed, foreign or unknown one is left alone."""
    journal = await journal_of(subject)
    await journal.open_intent(make_intent("a-1"), state=IN_FLIGHT, owner=ME)
    second = await journal.open_intent(
        make_intent("b-1", text="more"),
        state=IN_FLIGHT,
        owner=ME,
        expect_write_count=2,
        clearing="a-1",
    )
    require(
        second == Opened(recorded=True, write_count=2),
        f"an opening clearing the acknowledged a-1 answered {second}",
    )
    require(ids(await journal.pending("session-a")) == ["b-1"], "the cleared intent is pending")
    require(await _count(journal) == 3, f"clearing and opening counted {await _count(journal)}")
    require(not await journal.is_settled("a-1"), "clearing settled the intent")
    await journal.record(make_intent("x-1", text="x"), state=FAILED, owner=ME)
    refused_opening = await journal.open_intent(
        make_intent("c-1", text="c"), state=IN_FLIGHT, owner=ME, clearing="b-1"
    )
    require(
        not refused_opening.recorded and ids(refused_opening.blocking) == ["x-1"],
        f"an opening blocked by a failed intent answered {refused_opening}",
    )
    require(await journal.get("b-1") is None, "a blocked opening did not clear first")
    for what, session, held, owner in (
        ("claimed", "session-k", RECONCILING, ME),
        ("foreign", "session-f", IN_FLIGHT, STRANGER),
    ):
        name = f"{what}-1"
        await journal.open_intent(
            make_intent(name, session_id=session), state=IN_FLIGHT, owner=owner
        )
        if held is RECONCILING:
            await journal.transition(name, state=RECONCILING, owner=owner)
        opened = await journal.open_intent(
            make_intent(f"{what}-2", session_id=session, text="more"),
            state=IN_FLIGHT,
            owner=ME,
            clearing=name,
        )
        require(
            not opened.recorded and ids(opened.blocking) == [name],
            f"an opening clearing a {what} intent answered {opened}, not blocked by it",
        )
    await journal.open_intent(make_intent("o-1", session_id="session-o"), state=IN_FLIGHT, owner=ME)
    fresh = await journal.open_intent(
        make_intent("n-1", session_id="session-n"), state=IN_FLIGHT, owner=ME, clearing="o-1"
    )
    require(fresh == Opened(recorded=True, write_count=0), f"an opening answered {fresh}")
    require(
        ids(await journal.pending("session-o")) == ["o-1"],
        "an opening cleared another session's intent",
    )
    unknown = await journal.open_intent(
        make_intent("u-1", session_id="session-u"), state=IN_FLIGHT, owner=ME, clearing="never"
    )
    require(unknown == Opened(recorded=True, write_count=0), f"clearing an unknown id: {unknown}")


@contract("journal")
async def racing_openings_record_exactly_one(subject: Subject) -> None:
    """Openings of one session racing (from several journal objects on the same data, where
    the subject offers them) record exactly one intent, and the others are blocked by it."""
    journal = await journal_of(subject)
    journals = [journal, await worker(subject, journal)]
    for round_ in range(5):
        contenders = [
            make_intent(f"r{round_}-{n}", created_at=1_000.0 + n, text=f"{round_}/{n}")
            for n in range(4)
        ]
        answers = await asyncio.gather(
            *(
                journals[n % 2].open_intent(intent, state=IN_FLIGHT, owner=ME)
                for n, intent in enumerate(contenders)
            )
        )
        winners = [c.intent_id for c, a in zip(contenders, answers, strict=True) if a.recorded]
        require(len(winners) == 1, f"round {round_}: {len(winners)} racing openings recorded")
        for answer in answers:
            if not answer.recorded:
                require(
                    ids(answer.blocking) == winners,
                    f"round {round_}: a losing opening was blocked by {ids(answer.blocking)}",
                )
        require(
            ids(await journals[1].pending("session-a")) == winners,
            f"round {round_}: pending() does not list the one winner",
        )
        await journal.discard(winners[0])


@contract("journal")
async def retried_calls_after_a_lost_reply_are_no_ops(subject: Subject) -> None:
    """A call made again after its reply was lost (``record``, ``open_intent``, a held
    ``discard``, a held ``settle``) changes nothing the first did not: no second intent, write
    or decision."""
    journal = await journal_of(subject)

    async def twice(what: str, call: Any, *, wanted: int, session: str) -> None:
        await call()
        await call()
        count = await _count(journal, session)
        require(count == wanted, f"{what} made twice counted {count} writes, not {wanted}")

    record = make_intent("r-1", session_id="session-r")
    await twice(
        "record()",
        lambda: journal.record(record, state=FAILED, owner=ME),
        wanted=1,
        session="session-r",
    )
    require(ids(await journal.pending("session-r")) == ["r-1"], "record() twice: not one intent")
    opening = make_intent("o-1", session_id="session-o")
    await twice(
        "open_intent()",
        lambda: journal.open_intent(opening, state=IN_FLIGHT, owner=ME),
        wanted=1,
        session="session-o",
    )
    fence = (await _entry(journal, "o-1")).fence
    await twice(
        "a held discard()",
        lambda: journal.discard("o-1", owner=ME, fence=fence),
        wanted=2,
        session="session-o",
    )
    settled = make_intent("s-1", session_id="session-s")
    await journal.open_intent(settled, state=IN_FLIGHT, owner=ME)
    await journal.transition("s-1", state=RECONCILING, owner=ME)
    claim = (await _entry(journal, "s-1")).fence
    decision = make_decision(settled)
    await twice(
        "a held settle()",
        lambda: journal.settle(decision, owner=ME, fence=claim),
        wanted=2,
        session="session-s",
    )
    stored = await journal.decisions(intent_id="s-1")
    require(stored == [decision], f"settle() twice stored {len(stored)} decisions")


@contract("journal")
async def a_write_through_one_journal_object_is_read_at_once_through_another(
    subject: Subject,
) -> None:
    """What one journal object wrote, another on the same data (a second worker: the
    ``another`` hook) reads at once, though it read before: an intent recorded, opened,
    claimed, acknowledged or settled, a decision noted or stored, a write counted. A journal
    that reads from a cache or a lagging replica lets a worker answer without a write another
    finished, then replay it after its own."""
    if not subject.offers("another"):
        skip(
            "no way to open a second journal object on the same data was given (the another "
            "hook): reads across workers are not checked"
        )
    one = await journal_of(subject)
    two = await subject.make("another", one)

    async def seen(what: str, session: str, wanted: list[str], count: int) -> None:
        listed = ids(await two.pending(session))
        require(listed == wanted, f"after {what}, the other object's pending() lists {listed}")
        for name in wanted:
            require(await two.get(name) is not None, f"after {what}, its get({name!r}) is None")
        found = await _count(two, session)
        require(found == count, f"after {what}, the other object counts {found}, not {count}")

    # Read first through the second object, so that whatever it keeps is of the state before.
    await seen("nothing", "session-a", [], 0)
    require(await two.get("x-1") is None, "a new journal's get() found an intent")
    require(await two.decisions(intent_id="x-1") == [], "a new journal holds decisions")
    require(not await two.is_settled("x-1"), "a new journal reads an intent as settled")
    intent = make_intent("x-1")
    await one.record(intent, state=FAILED, owner=ME)
    await seen("a record", "session-a", ["x-1"], 1)
    await one.transition("x-1", state=RECONCILING, owner=STRANGER)
    entry = await two.get("x-1")
    require(
        entry is not None and (entry.state, entry.owner) == (RECONCILING, STRANGER),
        f"after a claim, the other object reads {entry}",
    )
    denial = make_decision(intent, action=Action.DENIED)
    await one.note(denial)
    require(await two.decisions(intent_id="x-1") == [denial], "the other misses a noted decision")
    decision = make_decision(intent, decided_at=1_700_000_200.0)
    await one.settle(decision, owner=STRANGER)
    await seen("a settlement", "session-a", [], 2)
    require(await two.get("x-1") is None, "after a settlement, the other object still gets it")
    require(await two.is_settled("x-1"), "after a settlement, the other reads it unsettled")
    found = await two.newest_decisions(["x-1"])
    require(found == {"x-1": decision}, "the other object's newest_decisions() miss the settlement")
    opened = await two.open_intent(make_intent("x-2", text="two"), state=IN_FLIGHT, owner=ME)
    require(
        opened == Opened(recorded=True, write_count=2),
        f"an opening through the other object answered {opened}",
    )
    blocked = await one.open_intent(make_intent("x-3", text="three"), state=IN_FLIGHT, owner=ME)
    require(
        not blocked.recorded and ids(blocked.blocking) == ["x-2"],
        f"an opening through the first object, next to the other's intent, answered {blocked}",
    )
    await one.discard("x-2")
    await seen("an acknowledgement", "session-a", [], 4)
    await one.count_write("session-a", BACKEND)
    await seen("a counted write", "session-a", [], 5)


# -- schemas ------------------------------------------------------------------------------------


async def schema_holds(thing: Any, what: str) -> None:
    """The schema contract of a journal or store never used yet (see the contracts)."""
    methods = ("schema_version", "check", "migrate")
    if not all(callable(getattr(thing, name, None)) for name in methods):
        skip(f"the {what} has no schema methods (schema_version, check, migrate)")
    version = await thing.schema_version()
    problem = await thing.check()
    after = await thing.schema_version()
    require(
        after == version,
        f"check() moved schema_version() from {version!r} to {after!r}: it wrote",
    )
    again = await thing.check()
    require(again == problem, f"asked again, check() answered {again!r}, not {problem!r}")
    if version is None and problem is None:
        skip(f"the {what}'s storage has no schema: schema_version() and check() need none")
    require(
        problem is None or (isinstance(problem, str) and problem.strip()),
        f"check() answered {problem!r}, not None or a sentence",
    )
    applied = await thing.migrate()
    require(
        isinstance(applied, list) and all(isinstance(step, str) for step in applied),
        f"migrate() answered {applied!r}, not a list of the steps applied",
    )
    require(
        problem is not None or applied == [], f"migrate() of a current schema applied {applied}"
    )
    require(await thing.check() is None, "after migrate(), check() still finds a problem")
    current = await thing.schema_version()
    require(isinstance(current, int), f"after migrate(), schema_version() is {current!r}")
    require(await thing.migrate() == [], "migrate() again applied steps")
    require(await thing.schema_version() == current, "migrate() again changed the version")


async def newer_schema_refused(
    subject: Subject, thing: Any, what: str, refusal: type[Exception], operation: Any
) -> None:
    """The newer-schema contract: ``operation(later)`` is a write that must be refused."""
    if not callable(getattr(thing, "migrate", None)):
        skip(f"the {what} has no schema methods (schema_version, check, migrate)")
    if await thing.schema_version() is None and await thing.check() is None:
        skip(f"the {what}'s storage has no schema: schema_version() and check() need none")
    if not subject.offers("newer_schema"):
        skip("no way to stamp a newer schema version was given (the newer_schema hook)")
    await thing.migrate()
    version = await thing.schema_version()
    require(isinstance(version, int), f"after migrate(), schema_version() is {version!r}")
    later = await subject.make("newer_schema", thing)
    found = await later.schema_version()
    require(
        isinstance(found, int) and found > version,
        f"the hook stamped no newer version (schema_version() is {found!r}, was {version})",
    )
    problem = await later.check()
    require(problem is not None, f"check() of a schema at version {found} (newer) found no problem")
    await refused(refusal, later.migrate(), f"migrate() of a newer schema (version {found})")
    await refused(refusal, operation(later), f"a write to a newer schema (version {found})")
    require(await later.schema_version() == found, "the newer schema's version was changed")


@contract("journal")
async def schema_check_writes_nothing_and_migrate_is_idempotent(subject: Subject) -> None:
    """Where the journal's storage has a schema, ``check()`` and ``schema_version()`` write
    nothing, ``migrate()`` leaves ``check()`` satisfied with a version in place, and
    ``migrate()`` again applies nothing."""
    await schema_holds(await journal_of(subject), "journal")


@contract("journal", last=True)
async def a_newer_schema_is_refused(subject: Subject) -> None:
    """A journal whose storage holds a newer schema version than it knows refuses it:
    ``check()`` says so, and ``migrate()`` and writes raise ``JournalError`` without changing
    it."""
    journal = await journal_of(subject)

    def write(later: Any) -> Any:
        return later.record(make_intent("i-2"), state=FAILED, owner=ME)

    await newer_schema_refused(subject, journal, "journal", JournalError, write)
