"""One convention each, in every command's output: positions count from 1 in text and from 0
in ``--json``; times are UTC in text and seconds since the epoch in ``--json``; every operator
write records the same default actor (user@host); every printed hint puts its options first,
then ``--``, then the id or session; ``migrate`` answers ``--json`` like every other command;
and ``--help`` says so."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import orjson
import pytest
from agents import SQLiteSession

from agents_reconcile._backends.registry import backend_named
from agents_reconcile._core.ownership import default_actor
from agents_reconcile.testing import Fault

from .test_operator_cli import PROG, SECRET, Case, cli, denied, filled, stranded_effect

UTC_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@pytest.fixture
def sqlite_case(tmp_path: Path) -> Case:
    return Case(backend_named("sqlite"), tmp_path)


def twice_stored(store: Path, session_id: str = "user-7") -> None:
    """A history whose tool turn was stored twice: positions 4 and 5 (from 1) repeat 2 and 3."""
    call = {"type": "function_call", "call_id": "c1", "name": "charge_card", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": SECRET}

    async def write() -> None:
        session = SQLiteSession(session_id, store)
        await session.add_items([{"role": "user", "content": SECRET}, call, output, call, output])
        session.close()

    asyncio.run(write())


def repaired(sqlite_case: Case, capsys: pytest.CaptureFixture[str], *more: str) -> None:
    twice_stored(sqlite_case.store)
    assert cli(capsys, "migrate", "--journal", sqlite_case.journal)[0] == 0
    where = ["--store", str(sqlite_case.store), "--journal", sqlite_case.journal]
    code, out = cli(capsys, "check", *where, "--repair", "--reason", "ticket 81", *more, "user-7")
    assert code == 0, out


def test_positions_count_from_1_in_text_and_from_0_in_json_the_trail_s_evidence_too(
    sqlite_case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repair that removed the 4th and 5th items: ``check`` says positions 4, 5; ``trail``
    and ``decisions`` printed its evidence as ``removed=[3, 4]`` (from 0, as stored), and now
    print ``removed=[4, 5]``, while ``--json`` keeps ``[3, 4]``."""
    twice_stored(sqlite_case.store)
    code, out = cli(capsys, "check", "--store", str(sqlite_case.store), "--", "user-7")
    assert code == 1 and "a repair would remove positions 4, 5" in out, out
    code, out = cli(capsys, "check", "--store", str(sqlite_case.store), "--json", "--", "user-7")
    report = orjson.loads(out)
    assert [removal["position"] for removal in report["plan"]["removals"]] == [3, 4]
    sqlite_case.store.unlink()
    repaired(sqlite_case, capsys)
    journal = ["--journal", sqlite_case.journal]
    for argv in (["trail", *journal, "--", "user-7"], ["decisions", *journal]):
        code, out = cli(capsys, *argv)
        assert code == 0, out
        assert "removed=[4, 5]" in out and "removed=[3, 4]" not in out, out
    code, out = cli(capsys, "trail", *journal, "--json", "--", "user-7")
    [repair] = [d for d in orjson.loads(out)["decisions"] if d["action"] == "repaired"]
    assert repair["evidence"]["removed"] == [3, 4]


def test_a_refusals_batch_positions_count_from_1_in_text() -> None:
    """The evidence of a refused write names batch positions from 0 (``refused`` a range
    ``[first, end)``, ``item`` one position); the text counts them from 1."""
    from agents_reconcile._operator.output import evidence_line

    line = evidence_line({"landed": 20, "refused": [20, 40], "item": 23, "dropped": 20})
    assert "refused=21-40" in line and "item=24" in line and "landed=20" in line, line


def test_a_repair_records_the_same_default_actor_as_a_resolution(
    sqlite_case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repair without ``--actor`` recorded ``actor=None`` while a resolution recorded
    user@host; now both record this user and host, from the same helper."""
    repaired(sqlite_case, capsys)
    code, out = cli(capsys, "trail", "--journal", sqlite_case.journal, "--json", "--", "user-7")
    [repair] = [d for d in orjson.loads(out)["decisions"] if d["action"] == "repaired"]
    assert repair["evidence"]["actor"] == default_actor()
    intent_id = denied(sqlite_case, Fault.CONCURRENT_WRITER)
    resolve = ["--as", "abandon", "--reason", "r", *sqlite_case.args()]
    assert cli(capsys, "resolve", *resolve, "--", intent_id)[0] == 0
    code, out = cli(capsys, "trail", *sqlite_case.args(), "--json", "--", "user-42")
    assert code == 0, out
    resolution = orjson.loads(out)["decisions"][-1]
    assert resolution["evidence"]["actor"] == default_actor() == repair["evidence"]["actor"]


def test_times_are_utc_in_text_and_seconds_since_the_epoch_in_json(
    sqlite_case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` of a tool effect printed its ``started_at`` as a raw epoch number; now every
    time in text is UTC (``2026-12-01 10:20:51``), and ``--json`` gives seconds since the
    epoch, as every other JSON document does."""
    key = stranded_effect(sqlite_case)
    code, out = cli(capsys, "show", *sqlite_case.args(), "--", key)
    assert code == 0, out
    [started] = [line for line in out.splitlines() if line.startswith("started_at")]
    assert UTC_TIME.search(started) and not re.search(r"\d{9,}", started), started
    assert not re.search(r"\b\d{10}\.\d+", out), out
    code, out = cli(capsys, "show", *sqlite_case.args(), "--json", "--", key)
    shown = orjson.loads(out)
    assert isinstance(shown["started_at"], float)
    assert all(isinstance(d["decided_at"], float) for d in shown["decisions"])
    code, out = cli(capsys, "trail", *sqlite_case.args(), "--", "user-42")
    assert not re.search(r"\b\d{10}\.\d+", out), out


def ends_with_the_id(line: str, ident: str) -> bool:
    """Whether a printed command line has its options first, then ``--``, then ``ident``."""
    argv = shlex.split(line)
    return argv[-2:] == ["--", ident] and "--" not in argv[:-2]


def test_every_printed_hint_puts_its_options_first_then_double_dash_then_the_id(
    sqlite_case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` printed ``resolve ID --journal ...``, against the documented form; now every
    hint (``status``'s ``show``, ``show``'s ``resolve`` lines, a settled intent's ``trail``,
    a denial's message) has its options first, then ``--``, then the id, and runs as
    printed."""
    intent_id = denied(sqlite_case, Fault.CONCURRENT_WRITER)
    code, out = cli(capsys, "status", *sqlite_case.args())
    [show] = [line.strip() for line in out.splitlines() if line.strip().startswith(f"{PROG} show")]
    assert ends_with_the_id(show, intent_id), show
    code, shown = cli(capsys, *shlex.split(show)[1:])
    offered = [
        line.strip() for line in shown.splitlines() if line.strip().startswith(f"{PROG} resolve")
    ]
    assert offered and all(ends_with_the_id(line, intent_id) for line in offered), offered
    [abandon] = [line for line in offered if "--as abandon" in line]
    code, out = cli(capsys, *shlex.split(filled(abandon))[1:])
    assert code == 0, out
    code, settled = cli(capsys, "show", *sqlite_case.args(), "--", intent_id)
    [trail] = [line.split(": ", 1)[1] for line in settled.splitlines() if f"{PROG} trail" in line]
    assert ends_with_the_id(trail, "user-42"), trail
    code, out = cli(capsys, *shlex.split(trail)[1:])
    assert code == 0 and "operator_resolved" in out, out


def test_migrate_answers_json_like_every_other_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``migrate --json`` was a usage error; now it is one JSON document of what it found or
    did per target (exit 1 while something needs migrating), and its errors are JSON too."""
    journal, store = str(tmp_path / "journal.db"), str(tmp_path / "store.db")
    targets = ["--journal", journal, "--store", store]
    code, out = cli(capsys, "migrate", "--check", *targets, "--json")
    assert code == 1, out
    found = orjson.loads(out)
    assert found["check"] is True and found["current"] is False
    assert [(t["kind"], t["current"]) for t in found["targets"]] == [
        ("journal", False),
        ("store", False),
    ]
    assert not (tmp_path / "journal.db").exists()
    code, out = cli(capsys, "migrate", *targets, "--json")
    assert code == 0, out
    done = orjson.loads(out)
    assert done["current"] is True and all(t["result"] for t in done["targets"])
    code, out = cli(capsys, "migrate", "--json")
    assert code == 2
    assert orjson.loads(out.split("\nagents-reconcile", 1)[0])["kind"] == "usage"


def test_help_says_the_conventions(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` states where ids go, how positions count and how times are written, and the
    exit codes; each operator command's ``--help`` says what it answers of a name not
    there."""
    from agents_reconcile._cli import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "then --, then the id" in out and "--json from 0" in out and "UTC" in out, out
    assert "not" in out and "found" in out, out
    for command, said in (
        ("show", "settled"),
        ("trail", "exit 1"),
        ("check", "no such session"),
        ("decisions", "exit 1"),
        ("status", "not found, exit 1"),
        ("resolve", "placeholder is refused"),
    ):
        assert main([command, "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert said in out and "positions count from 0" in out, (command, out)
