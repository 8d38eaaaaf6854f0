"""``agents-reconcile prune`` on every journal address: a dry run counts what would go and
removes nothing; a prune removes only what the retention lets go (never a denial of an
unresolved intent), in steps, and says so as a table or one JSON document; durations are read
strictly; a journal that does not prune is trouble (exit 2), not an empty success."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._cli import main
from agents_reconcile._core.records import Action
from agents_reconcile._operator.durations import FOREVER, duration
from agents_reconcile.conformance._records import ME, make_decision, make_intent

from ..support.backends import Place, registered

JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]
DAY = 86_400.0


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def fill(journal: Any) -> None:
    """Three settled decisions of 40 days ago, one of an hour ago, and a 40-day-old denial of
    an intent still unresolved."""
    now = time.time()
    for n, age in enumerate((40 * DAY, 40 * DAY, 40 * DAY, 3600.0)):
        intent = make_intent(f"settled-{n}", session_id=f"s-{n}", created_at=now - age)
        await journal.record(intent, state=IntentState.FAILED, owner=ME)
        await journal.settle(make_decision(intent, decided_at=now - age))
    waiting = make_intent("waiting", session_id="s-waiting", created_at=now - 41 * DAY)
    await journal.record(waiting, state=IntentState.FAILED, owner=ME)
    await journal.note(make_decision(waiting, action=Action.DENIED, decided_at=now - 40 * DAY))


@pytest.mark.parametrize("backend", JOURNALS)
def test_a_dry_run_counts_and_a_prune_removes_only_what_is_due(
    backend: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    place = Place(backend, tmp_path, "journal")
    try:
        asyncio.run(fill(place.journal()))
        where = ["--journal", place.address, "--namespace", place.space]
        keep = [
            "--keep-decisions",
            "30d",
            "--keep-receipts",
            "30d",
            "--keep-idle-sessions",
            "forever",
        ]
        code, out, _ = cli(capsys, "prune", *where, *keep, "--dry-run", "--json")
        dry = orjson.loads(out)
        assert code == 0 and dry["dry_run"] and dry["decisions"] == 3 and dry["write_counts"] == 0
        assert dry["kept_seconds"] == {
            "decisions": 30 * DAY,
            "receipts": 30 * DAY,
            "idle_sessions": None,
        }
        code, out, _ = cli(capsys, "prune", *where, *keep, "--batch", "2")
        assert code == 0
        assert "Removed, in" in out and "decisions" in out and "3" in out
        code, out, _ = cli(capsys, "prune", *where, *keep, "--json")
        assert orjson.loads(out)["decisions"] == 0

        async def left() -> tuple[list[str], list[str]]:
            journal = place.journal()
            decided = [d.intent_id for d in await journal.decisions(limit=100)]
            pending = [e.intent.intent_id for e in await journal.pending(None)]
            return sorted(decided), pending

        assert asyncio.run(left()) == (["settled-3", "waiting"], ["waiting"])
    finally:
        asyncio.run(place.cleanup())


def test_durations_are_read_strictly() -> None:
    assert duration("30d") == timedelta(days=30)
    assert duration("1d12h") == timedelta(days=1, hours=12)
    assert duration("90m") == timedelta(minutes=90)
    assert duration("Forever") == FOREVER
    for bad in ("30", "d", "3 days", "1d-2h", "-1d", ""):
        with pytest.raises(Exception, match="not a duration"):
            duration(bad)


def test_a_bad_duration_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "prune", "--keep", "a month")
    assert code == 2 and "not a duration" in err


@pytest.mark.parametrize("keep", ["99999999999d", "36526d", "5300000w", "3155760001s"])
def test_a_duration_longer_than_a_retention_may_be_is_a_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], keep: str
) -> None:
    """Past 100 years, ``--keep`` is refused as argparse refuses any bad value: the usage and
    one error line naming the option, exit 2, no traceback, nothing opened."""
    journal = tmp_path / "journal.db"
    code, out, err = cli(capsys, "prune", "--keep", keep, "--journal", str(journal))
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and out == "" and "Traceback" not in err
    assert errors == [
        f"agents-reconcile prune: error: argument --keep: {keep!r} is longer than a retention "
        "may be (100 years, 36,525d): write forever to keep for good"
    ]
    assert not journal.exists()
    code, out, _ = cli(capsys, "prune", "--keep-receipts", keep, "--json")
    assert code == 2 and orjson.loads(out)["kind"] == "usage"


def test_a_duration_of_a_hundred_years_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The longest retention a journal takes, 100 years, prunes (nothing that young)."""
    assert duration("36525d") == timedelta(days=36_525)
    journal = tmp_path / "journal.db"
    asyncio.run(_fill_at(journal))
    code, out, err = cli(capsys, "prune", "--keep", "36525d", "--journal", str(journal), "--json")
    assert code == 0, err
    found = orjson.loads(out)
    assert (found["decisions"], found["kept_seconds"]["receipts"]) == (0, 36_525 * DAY)


async def _fill_at(path: Path) -> None:
    from agents_reconcile import SQLiteJournal

    journal = SQLiteJournal(path)
    try:
        await fill(journal)
    finally:
        await journal.close()


def test_a_journal_that_is_not_there_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.db"
    code, _, err = cli(capsys, "prune", "--journal", str(missing))
    assert code == 2 and not missing.exists() and "agents-reconcile:" in err
