"""The agents-reconcile command: the demo, and reading a journal without changing it."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._cli import main
from agents_reconcile._core.crashpoints import CrashPoint
from agents_reconcile._selftest import command
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import closed_port


def test_demo_runs_offline_and_passes_its_own_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agents-reconcile demo` shows a replay, a committed write and a denial, and exits 0."""
    assert main(["demo", "--dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "unchanged / batch_absent -> replayed" in out
    assert "committed / batch_present -> settled" in out
    assert "ambiguous / history_changed -> denied" in out
    assert "3 of 3 scenes" in out


def test_the_demo_ends_with_the_operator_s_commands_for_its_denied_session_which_run_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's closing lines name `status` and the `show` of scene c's denied intent (then
    `decisions`); each runs as printed: `status` finds the intent waiting (exit 1), `show`
    gives its evidence and the resolve commands, `decisions` lists the trail."""
    assert main(["demo", "--dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    tail = out.split("3 of 3 scenes behaved as described.", 1)[1]
    commands = [line.strip() for line in tail.splitlines() if line.startswith("  agents-")]
    assert [shlex.split(line)[1] for line in commands] == ["status", "show", "decisions"]
    codes = {}
    for line in commands:
        argv = shlex.split(line)[1:]
        codes[argv[0]] = main(argv)
        printed = capsys.readouterr().out
        if argv[0] == "show":
            assert "history_changed" in printed and "agents-reconcile resolve" in printed
    assert codes == {"status": 1, "show": 0, "decisions": 0}


async def failed_journal(tmp_path: Path) -> Path:
    journal = tmp_path / "journal.db"
    faulty = FaultInjectingSession(SQLiteSession("s1", tmp_path / "chat.db"))
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([{"role": "user", "content": "card 4242 4242 4242 4242"}])
    return journal


def test_pending_lists_intents_without_their_contents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pending` lists the unresolved intent (id, session, state) and never its payload."""
    journal = asyncio.run(failed_journal(tmp_path))
    assert main(["pending", "--journal", str(journal)]) == 0
    out = capsys.readouterr().out
    assert "s1" in out and "failed" in out
    assert "4242 4242" not in out  # the card number (an id or pid may hold "4242")


def test_decisions_show_the_trail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`decisions` shows what reconciliation decided, payload-free."""
    journal = asyncio.run(failed_journal(tmp_path))

    async def settle() -> None:
        session = ReconcilingSession(
            SQLiteSession("s1", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
        )
        await session.reconcile()

    asyncio.run(settle())
    assert main(["decisions", "--journal", str(journal), "--session", "s1"]) == 0
    out = capsys.readouterr().out
    assert "replayed" in out and "unchanged" in out
    assert "4242 4242" not in out  # the card number (an id or pid may hold "4242")


def test_a_damaged_journal_is_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing or damaged journal file gives one clear line on stderr and exit code 2."""
    assert main(["pending", "--journal", str(tmp_path / "missing.db")]) == 2
    (tmp_path / "junk.db").write_bytes(b"not a database" * 64)
    assert main(["decisions", "--journal", str(tmp_path / "junk.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("agents-reconcile") for line in err)


def test_module_entry_point_reports_its_version() -> None:
    """`python -m agents_reconcile --version` prints the version."""
    done = subprocess.run(
        [sys.executable, "-m", "agents_reconcile", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "agents-reconcile" in done.stdout


def test_inspecting_never_creates_or_changes_a_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pending` on a mistyped path creates nothing; on a real journal it changes no byte."""
    assert main(["pending", "--journal", str(tmp_path / "typo.db")]) == 2
    assert not (tmp_path / "typo.db").exists()
    journal = asyncio.run(failed_journal(tmp_path))
    before = journal.read_bytes()
    assert main(["pending", "--journal", str(journal)]) == 0
    assert journal.read_bytes() == before


def test_migrate_checks_then_creates_then_finds_current(tmp_path: Path) -> None:
    """``migrate --check`` touches nothing and says what is missing (exit 1); ``migrate``
    applies it; a second check is clean (exit 0)."""
    journal, store = str(tmp_path / "journal.db"), str(tmp_path / "store.db")
    args = ["migrate", "--journal", journal, "--store", store]
    assert main([*args, "--check"]) == 1
    assert not (tmp_path / "journal.db").exists()
    assert main(args) == 0
    assert main([*args, "--check"]) == 0


def test_migrate_needs_a_target(capsys: pytest.CaptureFixture[str]) -> None:
    """migrate with neither --journal nor --store is a usage error naming them."""
    assert main(["migrate"]) == 2
    assert "--journal" in capsys.readouterr().err


def test_selftest_runs_a_slice_of_the_matrix_and_prints_its_tables(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agents-reconcile selftest`` kills real runs and prints the outcome and totals tables,
    then cancels real runs and prints theirs; every promise holds (exit 0). The command's
    selection is cut to one crash point of each matrix (each at every append, the
    cancellation in every way): every cell of both runs in ``tests/faults``."""
    point = CrashPoint.AFTER_COMMIT_BEFORE_ACK
    kill_cells, cancel_cells = command.cells, command.cancel_cells
    monkeypatch.setattr(
        command, "cells", lambda *a, **k: [c for c in kill_cells(*a, **k) if c.point is point]
    )
    monkeypatch.setattr(
        command,
        "cancel_cells",
        lambda *a, **k: [c for c in cancel_cells(*a, **k) if c.point is point],
    )
    argv = ["selftest", "--store", "sqlite", "--path", "run", "--no-foreign", "--workers", "1"]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Running 3 scenarios" in out and "Running 15 cancellation scenarios" in out
    row = next(line for line in out.splitlines() if "after_commit_before_ack @ tool_turn" in line)
    assert "committed" in row
    assert "Every promise held." in out
    assert "| **all**" in out
    assert "Every cancellation promise held." in out


def test_addresses_are_printed_without_their_password(capsys: pytest.CaptureFixture[str]) -> None:
    """`pending` on a server's address and `migrate --check` on one nobody listens at fail on
    one line each that names the server without the password."""
    secret = "hunter2-not-shown"
    assert main(["pending", "--journal", f"redis://agent:{secret}@127.0.0.1:6390/0"]) == 2
    address = f"postgresql://agent:{secret}@127.0.0.1:{closed_port()}/db"
    assert main(["migrate", "--check", "--journal", address]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("127.0.0.1" in line for line in err)
    assert all(secret not in line for line in err)


@pytest.mark.parametrize("command", ["status", "trail", "decisions", "show 0123456789abcdef"])
def test_reading_a_journal_never_loads_the_sdk(tmp_path: Path, command: str) -> None:
    """The commands that read a journal start without importing the Agents SDK (which takes
    over a second on its own): an operator's ``status`` answers in a fraction of that."""
    journal = tmp_path / "journal.db"
    asyncio.run(_one_failed_append(tmp_path, journal))
    script = (
        "import contextlib, io, sys\n"
        "from agents_reconcile._cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(sys.argv[1:])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m == 'agents' or m.startswith('agents.')))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script, *command.split(), "--journal", str(journal)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert ran.stdout.strip().splitlines()[-1] == "[]", ran.stdout


async def _one_failed_append(tmp_path: Path, journal: Path) -> None:
    inner = FaultInjectingSession(SQLiteSession("s1", str(tmp_path / "chat.db")))
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    inner.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([{"role": "user", "content": "hello"}])
    await session.journal.close()


async def test_status_reads_the_newest_decisions_of_every_pending_intent_in_one_step() -> None:
    """However many intents are pending, ``status`` reads their newest decisions in one step
    (``newest_decisions``, which every journal has) from a journal that does not page itself
    (each journal of this package pages, its page carrying them), never once per intent, and
    shows the same as reading them one by one."""
    from agents_reconcile import MemoryJournal
    from agents_reconcile._backends.journal import IntentState
    from agents_reconcile._core.ownership import current_owner
    from agents_reconcile._core.records import Action
    from agents_reconcile._operator import views

    from ..support.journal_support import make_decision, make_intent

    class Counting(MemoryJournal):
        def __init__(self) -> None:
            super().__init__()
            self.pages = None  # type: ignore[assignment]
            self.reads: list[str] = []

        async def decisions(self, **asked: Any) -> list[Any]:
            self.reads.append("decisions")
            return await super().decisions(**asked)

        async def newest_decisions(self, intent_ids: Any) -> dict[str, Any]:
            self.reads.append("newest_decisions")
            return await super().newest_decisions(intent_ids)

    journal = Counting()
    for n in range(20):
        intent = make_intent(f"i-{n}", session_id=f"s-{n}", created_at=1_700_000_000.0 + n)
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
        if n % 2:
            await journal.note(make_decision(intent, action=Action.DENIED))
    found = await views.status(journal, session_id=None, lease_seconds=30.0)
    assert journal.reads == ["newest_decisions"]
    assert len(found["pending"]) == 20
    decided = [row["intent_id"] for row in found["pending"] if row["last_decision"]]
    assert sorted(decided) == sorted(f"i-{n}" for n in range(20) if n % 2)
