"""``status`` a page at a time, on every journal: each pending intent and started effect shown
exactly once across the pages, ``--session`` narrowing them, the next page named by a token
that the command prints as a command to run, the same fields under ``--json``, and an exit
code that still sees what waits for an operator after the page shown."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import orjson
import pytest

from agents_reconcile._backends.components import COUNT_LIMIT
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.sqlite.journal import SQLiteJournal
from agents_reconcile._cli import main
from agents_reconcile._core.records import Action
from agents_reconcile._operator import views

from ..support.backends import Place
from ..support.journal_support import STRANGER, make_decision, make_effect, make_intent

LEASE = 30.0


async def fill(
    journal: Any, count: int, *, sessions: int = 7, denied: tuple[int, ...] = ()
) -> list[str]:
    """``count`` failed intents of a gone owner spread over ``sessions`` sessions (two
    made at one instant, to break ties), the ``denied`` ones denied; their ids."""
    made = []
    for n in range(count):
        intent = make_intent(
            f"intent-{n:03d}",
            session_id=f"user-{n % sessions}",
            created_at=1_700_000_000.0 + (n // 2),
            text=f"item {n}",
        )
        await journal.record(intent, state=IntentState.FAILED, owner=STRANGER)
        if n in denied:
            await journal.note(make_decision(intent, action=Action.DENIED))
        made.append(intent.intent_id)
    return made


async def every_page(journal: Any, **asked: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Every page ``views.status`` shows, following each page's token; the ids shown."""
    shown: list[str] = []
    pages: list[dict[str, Any]] = []
    after = None
    while True:
        found = await views.status(journal, lease_seconds=LEASE, after=after, **asked)
        pages.append(found)
        shown += [row["intent_id"] for row in found["pending"]]
        shown += [row["effect"] for row in found["effects"]]
        after = found["page"]["next"]
        if after is None:
            return shown, pages
        assert len(pages) < 100, "the pages do not end"


async def test_paging_through_status_shows_every_pending_intent_exactly_once(place: Place) -> None:
    journal = place.journal()
    made = await fill(journal, 23)
    shown, pages = await every_page(journal, session_id=None, limit=5)
    assert sorted(shown) == sorted(made)
    assert [len(page["pending"]) for page in pages] == [5, 5, 5, 5, 3]
    assert [page["page"]["pending_more"] for page in pages] == [18, 13, 8, 3, 0]
    # Intents settled between two pages move no other from one page to the next.
    first = await views.status(journal, session_id=None, lease_seconds=LEASE, limit=5)
    seen = [row["intent_id"] for row in first["pending"]]
    unseen = sorted(set(made) - set(seen))
    for ident in (seen[0], unseen[3], unseen[-1]):
        entry = await journal.get(ident)
        await journal.settle(make_decision(entry.intent))
    rest, _ = await every_page_from(journal, first["page"]["next"], limit=5)
    assert sorted(rest) == sorted(set(unseen) - {unseen[3], unseen[-1]})


async def every_page_from(journal: Any, after: str, **asked: Any) -> tuple[list[str], int]:
    shown: list[str] = []
    pages = 0
    while after is not None:
        found = await views.status(
            journal, session_id=None, lease_seconds=LEASE, after=after, **asked
        )
        shown += [row["intent_id"] for row in found["pending"]]
        after, pages = found["page"]["next"], pages + 1
    return shown, pages


async def test_status_narrowed_to_a_session_shows_only_that_sessions_intents(place: Place) -> None:
    journal = place.journal()
    made = await fill(journal, 30, sessions=3)
    mine = [ident for n, ident in enumerate(made) if n % 3 == 1]
    shown, pages = await every_page(journal, session_id="user-1", limit=4)
    assert sorted(shown) == sorted(mine)
    assert {row["session_id"] for page in pages for row in page["pending"]} == {"user-1"}
    assert len(pages) == 3
    nobody, _ = await every_page(journal, session_id="nobody", limit=4)
    assert nobody == []


async def test_paging_through_status_shows_every_started_effect_exactly_once(
    place: Place,
) -> None:
    journal = place.journal()
    started = []
    for n in range(9):
        effect = make_effect(f"call-{n}", session_id=f"user-{n % 4}", owner="gone-host#1/2/3")
        await journal.effects.begin(effect)
        started.append(effect.key)
    shown, pages = await every_page(journal, session_id=None, limit=4)
    assert sorted(shown) == sorted(started)
    assert [page["page"]["effects_more"] for page in pages] == [5, 1, 0]
    mine, _ = await every_page(journal, session_id="user-1", limit=1)
    assert sorted(mine) == sorted(key for n, key in enumerate(started) if n % 4 == 1)


async def test_a_denied_intent_after_the_page_still_makes_status_need_an_operator(
    place: Place,
) -> None:
    journal = place.journal()
    await fill(journal, 12, sessions=12, denied=(11,))
    first = await views.status(journal, session_id=None, lease_seconds=LEASE, limit=3)
    assert not any(row["needs_operator"] for row in first["pending"])
    assert first["page"]["pending_more_waiting"] == 1
    assert first["needs_operator"]
    clean = await views.status(journal, session_id="user-0", lease_seconds=LEASE, limit=3)
    assert not clean["needs_operator"]


# -- the command line -------------------------------------------------------------------------


def sqlite_journal(tmp_path: Path, count: int, **kwargs: Any) -> Path:
    path = tmp_path / "journal.db"

    async def make() -> None:
        journal = SQLiteJournal(path)
        await fill(journal, count, **kwargs)
        await journal.close()

    asyncio.run(make())
    return path


def test_status_json_carries_the_page_fields_and_the_token_of_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sqlite_journal(tmp_path, 12, denied=(6,))
    shown: list[str] = []
    after: list[str] = []
    mores = []
    while True:
        code = main(["status", "--journal", str(path), "--limit", "5", "--json", *after])
        found = orjson.loads(capsys.readouterr().out)
        page = found["page"]
        assert page["limit"] == 5 and page["after"] == (after[1] if after else None)
        shown += [row["intent_id"] for row in found["pending"]]
        mores.append((page["pending_more"], page["pending_more_waiting"], code))
        if page["next"] is None:
            break
        after = ["--after", page["next"]]
    assert len(shown) == len(set(shown)) == 12
    # The denied intent is on the last page: the pages before it still exit 1 for it.
    assert mores == [(7, 1, 1), (2, 1, 1), (0, 0, 1)]


def test_the_next_page_command_status_prints_runs_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sqlite_journal(tmp_path, 9, sessions=3)
    assert main(["status", "--journal", str(path), "--session", "user-2", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "... and 1 more pending intent after these" in out
    [line] = [line for line in out.splitlines() if line.startswith("the next page: ")]
    argv = shlex.split(line.removeprefix("the next page: "))
    assert argv[:2] == ["agents-reconcile", "status"]
    assert argv[argv.index("--session") + 1] == "user-2" and "--limit" in argv
    assert main(argv[1:]) == 0
    out = capsys.readouterr().out
    assert out.count("user-2") == 1 and "the next page" not in out and "more" not in out


def test_status_refuses_a_token_it_did_not_print_or_printed_for_another_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sqlite_journal(tmp_path, 6, sessions=2)
    assert main(["status", "--journal", str(path), "--limit", "1", "--json"]) == 0
    token = orjson.loads(capsys.readouterr().out)["page"]["next"]
    for argv, said in (
        (["--after", "not-a-token"], "is not a page token"),
        (["--after", token, "--session", "user-0"], "give the --session it was printed with"),
    ):
        assert main(["status", "--journal", str(path), *argv]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
    assert main(["status", "--journal", str(path), "--limit", "0"]) == 2


def test_the_command_lines_default_page_is_the_views() -> None:
    """``--limit``'s default (kept in the option builder, which imports nothing heavy) is the
    page ``status`` shows without it."""
    from agents_reconcile._operator import options, paging

    assert options._PAGE == paging.DEFAULT_LIMIT


def test_past_the_count_bound_status_says_at_least_and_asks_for_an_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal counts at most ``COUNT_LIMIT`` intents after a page: ``status`` says "at
    least", and since what lies past the bound was not judged, exits 1 (an operator looks)."""
    path = sqlite_journal(tmp_path, COUNT_LIMIT + 12, sessions=40)
    assert main(["status", "--journal", str(path), "--limit", "5"]) == 1
    out = capsys.readouterr().out
    assert f"... and at least {COUNT_LIMIT:,} more pending intents after these (counted to" in out
    assert main(["status", "--journal", str(path), "--limit", "5", "--json"]) == 1
    page = orjson.loads(capsys.readouterr().out)["page"]
    assert (page["pending_more"], page["pending_counted_all"]) == (COUNT_LIMIT, False)
    assert page["effects_counted_all"] is True
    # A page whose followers fit under the bound counts them all, and judges them.
    assert main(["status", "--journal", str(path), "--limit", "100", "--json"]) == 0
    page = orjson.loads(capsys.readouterr().out)["page"]
    assert (page["pending_more"], page["pending_counted_all"]) == (COUNT_LIMIT - 88, True)
