"""The operator's commands on every journal address (an SQLite path, ``redis://``,
``postgresql://``): ``status`` finds what needs a person (exit 1), ``show`` puts the evidence
side by side, ``resolve`` settles it with a reason, ``trail`` shows the resolution, and the next
run goes on. A damaged row hides no other; nothing printed holds an item's content."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession
from agents.testing import assistant_message

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile.cli import main
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from .backends import address, namespace, registered
from .runner_support import first_run_steps, run, summarize

SECRET = "card-number-SECRET-zeta"
JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]


class Case:
    """A journal address (and namespace) and a store file: what an operator is given."""

    def __init__(self, backend: Any, directory: Path) -> None:
        self.backend = backend
        self.directory = directory
        self.journal = address(backend, directory, "journal")
        self.space = namespace()
        self.store = directory / "chat.db"
        self.charges: list[int] = []

    def args(self) -> list[str]:
        found = ["--journal", self.journal]
        return [*found, "--namespace", self.space] if self.backend.server else found

    def config(self, **options: Any) -> ReconcileConfig:
        journal = self.backend.open_journal(self.journal, namespace=self.space)
        return ReconcileConfig(journal=journal, **options)

    def session(self, session_id: str = "user-42", **options: Any) -> ReconcilingSession:
        return ReconcilingSession(
            SQLiteSession(session_id, self.store), config=self.config(**options)
        )

    def agent(self, steps: list[Any]) -> Any:
        from agents import Agent, function_tool
        from agents.testing import ScriptedModel

        charges = self.charges

        @function_tool
        def charge_card(amount: int) -> str:
            """Charge the customer's card."""
            charges.append(amount)
            return f"charged {amount} for {SECRET}"

        return Agent(name="assistant", model=ScriptedModel(steps), tools=[charge_card])

    def history(self, session_id: str = "user-42") -> list[str]:
        async def read() -> list[Any]:
            return await SQLiteSession(session_id, self.store).get_items()

        return [summarize(item) for item in asyncio.run(read())]


@pytest.fixture(params=JOURNALS)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    found = Case(request.param, tmp_path)
    yield found
    if found.backend.server:

        async def drop() -> None:
            journal: Any = found.backend.open_journal(found.journal, namespace=found.space)
            await journal.drop()
            await journal.close()

        asyncio.run(drop())


def denied(case: Case, fault: Fault, **options: Any) -> str:
    """A run whose tool turn's save fails with ``fault``; then a next run is denied (or not,
    when the rule can settle it). Returns the intent id."""

    async def go() -> str:
        faulty = FaultInjectingSession(SQLiteSession("user-42", case.store))
        session = ReconcilingSession(faulty, config=case.config(**options))
        faulty.plan(fault, at=2)
        with pytest.raises(BackendFailure):
            await run(case.agent(first_run_steps()), f"hi {SECRET}", session, streamed=False)
        [pending] = await session.pending()
        again = case.session(**options)
        with pytest.raises(ContinuationDenied):
            await run(case.agent([[assistant_message("ok")]]), "next", again, streamed=False)
        return pending.intent_id

    return asyncio.run(go())


def next_run(case: Case) -> None:
    async def go() -> None:
        await run(case.agent([[assistant_message("ok")]]), "next", case.session(), streamed=True)

    asyncio.run(go())


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert SECRET not in out and SECRET not in err
    return code, out + err


def test_status_show_resolve_trail_then_the_next_run(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    intent_id = denied(case, Fault.CONCURRENT_WRITER)
    code, out = cli(capsys, "status", *case.args())
    assert code == 1, out
    assert intent_id in out and "NEEDS OPERATOR" in out and "history_changed" in out
    code, out = cli(capsys, "status", *case.args(), "--json")
    found = orjson.loads(out)
    assert found["needs_operator"] is True
    assert [i["intent_id"] for i in found["pending"]] == [intent_id]

    code, out = cli(capsys, "show", intent_id, *case.args(), "--store", str(case.store), "--json")
    assert code == 0, out
    shown = orjson.loads(out)
    assert shown["store_now"]["outcome"] == "ambiguous"
    assert len(shown["expected"]["batch_digests"]) == 2
    assert shown["resolutions"]["replay"].startswith("refused (history_changed)")
    code, out = cli(capsys, "show", intent_id, *case.args(), "--store", str(case.store))
    assert "what each resolution would do" in out and "--as abandon" in out

    code, out = cli(
        capsys,
        "resolve",
        intent_id,
        "--as",
        "replay",
        "--reason",
        "x",
        *case.args(),
        "--store",
        str(case.store),
    )
    assert code == 1 and "refused" in out, "the rule does not see the pre-write history"
    code, out = cli(
        capsys,
        "resolve",
        intent_id,
        "--as",
        "abandon",
        "--reason",
        "customer confirmed the retry",
        "--actor",
        "ops:ana",
        *case.args(),
    )
    assert code == 0, out
    assert cli(capsys, "status", *case.args())[0] == 0
    code, out = cli(capsys, "trail", "user-42", *case.args(), "--json")
    timeline = orjson.loads(out)["decisions"]
    assert [(d["action"], d["reason"]) for d in timeline] == [
        ("denied", "history_changed"),
        ("dropped", "operator_resolved"),
    ]
    assert timeline[-1]["evidence"]["actor"] == "ops:ana"
    assert timeline[-1]["evidence"]["operator_reason"] == "customer confirmed the retry"
    next_run(case)
    assert case.history() == [
        f"user:hi {SECRET}",
        "user:written by someone else",
        "user:next",
        "assistant:ok",
    ]


def test_resolve_replay_through_the_store(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """``on_unchanged="fail"`` leaves the missing tool turn to an operator; ``resolve --as
    replay --store`` appends it once and the next run goes on after it."""
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")
    code, out = cli(
        capsys, "resolve", intent_id, "--as", "replay", "--reason", "checked", *case.args()
    )
    assert code == 1 and "--store" in out, "replaying needs the store"
    code, out = cli(
        capsys,
        "resolve",
        intent_id,
        "--as",
        "replay",
        "--reason",
        "payment provider shows one charge",
        *case.args(),
        "--store",
        f"sqlite:///{case.store}",
        "--json",
    )
    assert code == 0, out
    assert orjson.loads(out)["action"] == "replayed"
    next_run(case)
    assert case.history() == [
        f"user:hi {SECRET}",
        "call:c1",
        "output:c1",
        "user:next",
        "assistant:ok",
    ]
    assert case.charges == [5]


def test_a_store_of_another_identity_is_refused(
    case: Case, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")
    other = tmp_path / "other.db"
    asyncio.run(SQLiteSession("user-42", other).get_items())
    code, out = cli(
        capsys,
        "resolve",
        intent_id,
        "--as",
        "replay",
        "--reason",
        "r",
        *case.args(),
        "--store",
        str(other),
    )
    assert code == 1 and "belongs to" in out
    assert case.history() == [f"user:hi {SECRET}"]


def test_a_damaged_row_hides_no_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One edited intent row: ``status`` still lists every other session's intent, names the
    damaged one, and exits 1; the denial its own session meets names its real id."""
    journal = tmp_path / "journal.db"

    async def two_failed() -> list[str]:
        ids = []
        for session_id in ("alice", "bob"):
            faulty = FaultInjectingSession(SQLiteSession(session_id, tmp_path / "chat.db"))
            session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
            faulty.plan(Fault.REJECT)
            with pytest.raises(BackendFailure):
                await session.add_items([{"role": "user", "content": SECRET}])
            [pending] = await session.pending()
            ids.append(pending.intent_id)
        return ids

    alice, bob = asyncio.run(two_failed())
    conn = sqlite3.connect(journal)
    [(record,)] = conn.execute("SELECT record FROM intents WHERE intent_id = ?", (alice,))
    edited = bytes(record).replace(b'"created_at":', b'"created_at":1')
    conn.execute("UPDATE intents SET record = ? WHERE intent_id = ?", (edited, alice))
    conn.commit()
    conn.close()
    code, out = cli(capsys, "status", "--journal", str(journal), "--json")
    assert code == 1
    found = orjson.loads(out)
    assert [i["intent_id"] for i in found["pending"]] == [bob]
    assert [(d["kind"], d["id"], d["session_id"]) for d in found["damaged"]] == [
        ("intent", alice, "alice")
    ]

    async def alice_denied() -> Any:
        session = ReconcilingSession(
            SQLiteSession("alice", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
        )
        with pytest.raises(ContinuationDenied) as refusal:
            await session.get_items()
        return refusal.value

    refusal = asyncio.run(alice_denied())
    assert refusal.intent_id == alice
    assert refusal.decision.reason.value == "record_untrusted"


def test_help_answers_well_under_a_second() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agents_reconcile", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    took = time.monotonic() - started
    assert "resolve" in done.stdout and "status" in done.stdout
    assert took < 1.0, f"--help took {took:.2f} s"
    imported = subprocess.run(
        [sys.executable, "-c", "import agents_reconcile.cli, sys; print('agents' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.strip() == "False", "the CLI imports the SDK only for a command"


def test_check_reports_then_repairs_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check`` finds a batch stored twice and an orphan output (positions and digests, exit
    1, nothing written); ``check --repair --reason`` removes them under an intent of its own,
    records the repair in the trail, and a second check is clean (exit 0)."""
    store = tmp_path / "chat.db"
    journal = tmp_path / "journal.db"
    call = {"type": "function_call", "call_id": "c1", "name": "charge_card", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": SECRET}
    orphan = {"type": "function_call_output", "call_id": "gone", "output": SECRET}
    items = [{"role": "user", "content": SECRET}, call, output, call, output, orphan]

    async def write() -> None:
        session = SQLiteSession("user-42", store)
        await session.add_items(items)
        session.close()

    asyncio.run(write())
    before = store.read_bytes()
    code, out = cli(capsys, "check", "user-42", "--store", str(store), "--json")
    assert code == 1, out
    report = orjson.loads(out)
    assert report and before == store.read_bytes(), "a check writes nothing"
    code, out = cli(capsys, "check", "user-42", "--store", str(store))
    assert code == 1 and "3" in out and "5" in out, out
    code, out = cli(
        capsys,
        "check",
        "user-42",
        "--store",
        str(store),
        "--journal",
        str(journal),
        "--repair",
        "--reason",
        "ticket 81: orphan after an outage",
        "--actor",
        "ops:ana",
    )
    assert code == 0, out
    assert [summarize(i) for i in asyncio.run(SQLiteSession("user-42", store).get_items())] == [
        f"user:{SECRET}",
        "call:c1",
        "output:c1",
    ]
    assert cli(capsys, "check", "user-42", "--store", str(store))[0] == 0
    code, out = cli(capsys, "trail", "user-42", "--journal", str(journal), "--json")
    [repair] = [d for d in orjson.loads(out)["decisions"] if d["action"] == "repaired"]
    assert repair["reason"] == "history_repaired"
    assert repair["evidence"]["actor"] == "ops:ana"


def test_refusals_are_one_line_and_leave_the_intent_untouched(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` of an unknown intent and ``resolve --as replay`` without a store are refused
    with a sentence (exit 1), and the intent's row is as it was: not even claimed."""
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")

    async def row() -> Any:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            return await journal.get(intent_id)
        finally:
            await journal.close()

    before = asyncio.run(row())
    code, out = cli(capsys, "show", "f" * 32, *case.args())
    assert code == 1 and "Traceback" not in out and "no pending intent" in out
    code, out = cli(capsys, "resolve", intent_id, "--as", "replay", "--reason", "r", *case.args())
    assert code == 1 and "--store" in out
    assert asyncio.run(row()) == before
    code, out = cli(
        capsys, "check", "user-42", "--store", str(case.store), "--repair", "--reason", "r"
    )
    assert code == 1 and "journal" in out, "a repair needs the application's journal"


def test_the_operating_page_explains_every_reason_and_action() -> None:
    """docs/operating.md has a row for every Reason (with its explanation) and every Action."""
    from agents_reconcile.records import Action, Reason

    page = (Path(__file__).parent.parent / "docs" / "operating.md").read_text()
    for reason in Reason:
        assert f"| `{reason.value}` | {reason.explanation} |" in page, reason
    for action in Action:
        assert f"| `{action.value}` |" in page, action
