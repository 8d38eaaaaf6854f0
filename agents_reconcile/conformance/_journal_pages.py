"""The pages component's contracts (``JournalPages``): ``pages.intents`` and, where the journal
keeps effects, ``pages.started_effects``. Checked on a journal whose ``pages`` is one; skipped,
with the reason, on one whose ``pages`` is None (``status`` then pages in memory)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from .._backends.components import COUNT_LIMIT, Page
from .._core.effect_records import Effect
from .._core.records import Action, Decision, PendingWrite
from ._core import Subject, contract, refused, require, skip
from ._effects import _require_effects
from ._journal import FAILED, journal_of
from ._records import BACKEND, ME, OTHER_BACKEND, make_decision, make_effect, make_intent

__all__: list[str] = []

# Three sessions, two backends, creation times out of order, two intents made at one instant.
_INTENTS = (
    ("a-late", "session-a", BACKEND, 3000.0),
    ("a-early", "session-a", BACKEND, 1000.0),
    ("a-other-db", "session-a", OTHER_BACKEND, 2000.0),
    ("b-1", "session-b", BACKEND, 1500.0),
    ("b-2", "session-b", OTHER_BACKEND, 1500.0),
    ("c-tie-1", "session-c", BACKEND, 500.0),
    ("c-tie-2", "session-c", BACKEND, 500.0),
)


def _made() -> dict[str, PendingWrite]:
    return {
        name: make_intent(name, session_id=session, backend=backend, created_at=at, text=name)
        for name, session, backend, at in _INTENTS
    }


_NO_PAGES = (
    "the journal has no pages component (journal.pages is None; a JournalPages: intents, "
    "started_effects): status pages its whole listings itself"
)


async def _paged(subject: Subject) -> Any:
    journal = await journal_of(subject)
    if journal.pages is None:
        skip(_NO_PAGES)
    return journal


async def _paging_journal(subject: Subject) -> Any:
    journal = await _paged(subject)
    for intent in _made().values():
        await journal.record(intent, state=FAILED, owner=ME)
    return journal


def _seen(pages: list[Page[Any]], upto: int) -> set[str]:
    """The ids listed by the pages up to and including ``pages[upto]``."""
    return {_ident(row) for page in pages[: upto + 1] for row in page.rows}


async def _every_page(
    read: Any, limit: int, between: Any = None
) -> tuple[list[str], list[Page[Any]]]:
    """Every page ``read(limit=, after=)`` gives, following each page's cursor; the ids listed,
    in order. ``between(n)`` runs after page ``n`` (from 1)."""
    listed: list[str] = []
    pages: list[Page[Any]] = []
    after: str | None = None
    while True:
        page: Page[Any] = await read(limit=limit, after=after)
        pages.append(page)
        require(len(page.rows) <= limit, f"a page of limit={limit} holds {len(page.rows)} rows")
        listed += [_ident(row) for row in page.rows]
        require(
            (page.after is None) == (page.more == 0),
            f"a page says {page.more} rows follow it, yet its cursor is {page.after!r}",
        )
        if page.after is None:
            return listed, pages
        require(len(pages) < 50, f"paging with limit={limit} does not end")
        if between is not None:
            await between(len(pages))
        after = page.after


def _ident(row: Any) -> str:
    return row.key if isinstance(row, Effect) else str(row.intent.intent_id)


def _twice(listed: list[str]) -> list[str]:
    return sorted(ident for ident, seen in Counter(listed).items() if seen > 1)


@contract("pages")
async def pending_pages_list_every_intent_once_with_what_follows(subject: Subject) -> None:
    """``pages.intents()``, paged on with each page's cursor, lists every unresolved intent (of
    the session asked, when one is) exactly once, at most ``limit`` a page, each page counting
    the intents that follow it and giving a cursor exactly when some do; an intent settled
    between pages moves no other; a limit below 1 or a cursor it did not give is refused."""
    journal = await _paging_journal(subject)
    every = sorted(name for name, *_ in _INTENTS)
    for limit in (1, 2, 3, len(every), 100):
        listed, pages = await _every_page(journal.pages.intents, limit)
        require(
            sorted(listed) == every,
            f"pages.intents(limit={limit}) pages list {listed}, not each of {every} once",
        )
        counted = [page.more for page in pages]
        expected = [
            len(every) - sum(len(p.rows) for p in pages[: n + 1]) for n in range(len(pages))
        ]
        require(
            counted == expected, f"pages of limit={limit} count {counted} following, not {expected}"
        )
    for session in ("session-a", "session-c", "nobody"):
        wanted = sorted(name for name, owner, *_ in _INTENTS if owner == session)

        async def read(limit: int, after: str | None, session: str = session) -> Any:
            return await journal.pages.intents(limit=limit, after=after, session_id=session)

        listed, _ = await _every_page(read, 1)
        require(
            sorted(listed) == wanted,
            f"pages.intents(session_id={session!r}) pages list {listed}, not {wanted}",
        )
    first = await journal.pages.intents(limit=2)
    shown = [_ident(row) for row in first.rows]
    unseen = [name for name in every if name not in shown]
    gone = [shown[0], unseen[-1]]
    for name in gone:
        await journal.settle(make_decision(_made()[name], decided_at=2_000_000.0))

    async def rest(limit: int, after: str | None) -> Any:
        return await journal.pages.intents(limit=limit, after=after or first.after)

    listed, _ = await _every_page(rest, 2)
    wanted = sorted(name for name in unseen if name not in gone)
    require(
        sorted(listed) == wanted and not _twice(listed),
        f"after {gone} were settled, the pages that follow list {listed}, not {wanted}",
    )
    for limit in (0, -1):
        await refused(
            ValueError, journal.pages.intents(limit=limit), f"pages.intents(limit={limit})"
        )
    await refused(
        ValueError, journal.pages.intents(limit=1, after="not a cursor"), "pages.intents(after=...)"
    )


@contract("pages")
async def pending_pages_carry_each_intents_newest_decision(subject: Subject) -> None:
    """Each row of ``pages.intents()`` comes with the newest decision about it (none for one
    without), and ``more_waiting`` counts the intents after the page whose newest decision
    denied them or left them pending."""
    journal = await _paging_journal(subject)
    intents = _made()
    decided: dict[str, Decision] = {}
    # Newest last: a-late denied then left pending (waits); b-1 left pending then denied
    # (waits); c-tie-2 denied; a-early left pending; none for the others.
    for at, (name, action) in enumerate(
        (
            ("a-late", Action.DENIED),
            ("b-1", Action.LEFT_PENDING),
            ("a-late", Action.LEFT_PENDING),
            ("c-tie-2", Action.DENIED),
            ("b-1", Action.DENIED),
            ("a-early", Action.LEFT_PENDING),
        )
    ):
        decision = make_decision(intents[name], action=action, decided_at=1_000_000.0 + at)
        await journal.note(decision)
        decided[name] = decision
    _, pages = await _every_page(journal.pages.intents, 2)
    for at, page in enumerate(pages):
        names = [_ident(row) for row in page.rows]
        expected = {name: decided[name] for name in names if name in decided}
        require(
            page.newest == expected,
            f"a page of {names} gives newest decisions for {sorted(page.newest)}"
            + ("" if set(page.newest) != set(expected) else " that are not each one's newest"),
        )
        waiting = len(set(decided) - _seen(pages, at))
        require(
            page.more_waiting == waiting,
            f"after the page of {names}, more_waiting is {page.more_waiting}, not {waiting}",
        )


@contract("pages")
async def pending_pages_count_what_follows_up_to_a_bound(subject: Subject) -> None:
    """Of the unresolved intents that follow a page, a journal counts ``COUNT_LIMIT`` at most
    (``Page.more`` at the bound: at least that many, ``counted_all`` false), and
    ``more_waiting`` among those it counted; a page nearer the end counts every one."""
    journal = await _paged(subject)
    total = COUNT_LIMIT + 8
    made = [
        make_intent(f"m-{n:05d}", session_id=f"many-{n:05d}", created_at=1000.0 + n)
        for n in range(total)
    ]
    for intent in made:
        await journal.record(intent, state=FAILED, owner=ME)
    for intent in made[-3:]:  # last in every listing order: sessions sort by their number
        await journal.note(make_decision(intent, action=Action.DENIED, decided_at=1_000_000.0))
    first = await journal.pages.intents(limit=5)
    require(
        first.more == COUNT_LIMIT and not first.counted_all,
        f"with {total - 5} intents after a page, more is {first.more} (counted_all "
        f"{first.counted_all}), not the bound {COUNT_LIMIT}",
    )
    require(
        first.more_waiting == 0,
        f"the {first.more_waiting} waiting counted after the first page are not among the "
        f"first {COUNT_LIMIT} that follow it",
    )
    near = await journal.pages.intents(limit=COUNT_LIMIT)
    require(
        (near.more, near.more_waiting, near.counted_all) == (8, 3, True),
        f"after a page of {COUNT_LIMIT}, more is {near.more} and more_waiting "
        f"{near.more_waiting} (counted_all {near.counted_all}), not 8, 3 and every one",
    )


@contract("pages")
async def started_effect_pages_list_every_started_effect_once(subject: Subject) -> None:
    """``pages.started_effects()``, paged on with each page's cursor, lists every started effect
    without a receipt (of the session asked, when one is) exactly once, at most ``limit`` a
    page, counting those that follow and, of them, those begun before ``overdue_before``
    (every one for a time to come, none for a time long past or for None)."""
    journal = await _paged(subject)
    _require_effects(journal)
    made = [
        make_effect(f"call-{n}", session_id=session)
        for n, session in enumerate(("s-1", "s-2", "s-1", "s-2", "s-3"))
    ]
    for effect in made:
        await journal.effects.begin(effect)
    await journal.effects.finish(made[4].with_receipt("done", at=made[4].started_at + 1.0))
    started = sorted(effect.key for effect in made[:4])
    soon = time.time() + 3600.0
    for limit, overdue_before in ((1, soon), (2, 1.0), (3, None), (10, soon)):

        async def read(
            limit: int, after: str | None, overdue: float | None = overdue_before
        ) -> Any:
            return await journal.pages.started_effects(
                limit=limit, after=after, overdue_before=overdue
            )

        listed, pages = await _every_page(read, limit)
        require(
            sorted(listed) == started,
            f"pages.started_effects(limit={limit}) pages list {listed}, not each of {started}",
        )
        for page in pages:
            late = page.more if overdue_before == soon else 0
            require(
                page.more_waiting == late,
                f"with overdue_before={overdue_before}, a page followed by {page.more} counts "
                f"{page.more_waiting} of them overdue, not {late}",
            )
    for session in ("s-1", "s-3"):
        wanted = sorted(e.key for e in made[:4] if e.session_id == session)

        async def mine(limit: int, after: str | None, session: str = session) -> Any:
            return await journal.pages.started_effects(limit=limit, after=after, session_id=session)

        listed, _ = await _every_page(mine, 1)
        require(
            sorted(listed) == wanted,
            f"pages.started_effects(session_id={session!r}) pages list {listed}, not {wanted}",
        )
    await refused(
        ValueError, journal.pages.started_effects(limit=0), "pages.started_effects(limit=0)"
    )


@contract("pages")
async def pages_know_a_session_by_its_counted_writes(subject: Subject) -> None:
    """``pages.counts_writes_of()`` is true for a session with a write counted under any backend
    and false for a session never counted, even one whose name begins the same."""
    journal = await _paged(subject)
    pages = journal.pages
    require(
        not await pages.counts_writes_of("counted"),
        "an empty journal says it counts writes of session 'counted'",
    )
    await journal.count_write("counted", OTHER_BACKEND)
    require(
        await pages.counts_writes_of("counted"),
        "a session with a write counted under a backend is not said to be counted",
    )
    require(
        not await pages.counts_writes_of("count") and not await pages.counts_writes_of("other"),
        "a session never counted is said to be counted",
    )
