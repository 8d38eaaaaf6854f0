"""The operator's commands on every journal address (an SQLite path, ``redis://``,
``postgresql://``): ``status`` finds what needs a person (exit 1), ``show`` puts the evidence
side by side, ``resolve`` settles it with a reason, ``trail`` shows the resolution, and the next
run goes on. A damaged row hides no other; nothing printed holds an item's content."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import resource
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
from agents_reconcile._cli import main
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import address, namespace, redis_client, registered
from ..support.runner_support import first_run_steps, run, summarize

SECRET = "card-number-SECRET-zeta"
PROG = "agents-reconcile"
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


def filled(line: str, reason: str = "ticket 12") -> str:
    """A printed ``resolve`` line with its placeholders replaced, as an operator runs it (as
    printed, ``resolve`` refuses them: ``test_dead_ends``)."""
    from agents_reconcile._operator.placeholders import OUTPUT, REASON

    return line.replace(REASON, reason).replace(OUTPUT, "charged 5")


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
    [(record,)] = conn.execute("SELECT record FROM unresolved WHERE intent_id = ?", (alice,))
    edited = bytes(record).replace(b'"created_at":', b'"created_at":1')
    conn.execute("UPDATE live SET record = ? WHERE intent_id = ?", (edited, alice))
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
    """``--help`` takes well under a second of processor time (counted, unlike the time on
    the clock, the same on a machine busy with other work): it loads no SDK."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "agents_reconcile", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert "resolve" in done.stdout and "status" in done.stdout
    assert took < 1.0, f"--help took {took:.2f} s of processor time"
    imported = subprocess.run(
        [sys.executable, "-c", "import agents_reconcile._cli, sys; print('agents' in sys.modules)"],
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
    assert cli(capsys, "migrate", "--journal", str(journal))[0] == 0  # a repair makes none
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
    """``show`` of an unknown intent and ``resolve --as replay`` without a store (the file
    its record names is gone) are refused with a sentence (exit 1), and the intent's row is
    as it was: not even claimed."""
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")
    case.store.rename(case.store.with_name("moved.db"))

    async def row() -> Any:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            return await journal.get(intent_id)
        finally:
            await journal.close()

    before = asyncio.run(row())
    code, out = cli(capsys, "show", "f" * 32, *case.args())
    assert code == 1 and "Traceback" not in out and "nothing by the id" in out
    code, out = cli(capsys, "resolve", intent_id, "--as", "replay", "--reason", "r", *case.args())
    assert code == 1 and "--store" in out
    assert asyncio.run(row()) == before
    case.store.with_name("moved.db").rename(case.store)
    code, out = cli(
        capsys, "check", "user-42", "--store", str(case.store), "--repair", "--reason", "r"
    )
    assert code == 1 and "journal" in out, "a repair needs the application's journal"


def test_the_operating_page_explains_every_reason_and_action() -> None:
    """docs/operating.md has a row for every Reason (with its explanation) and every Action."""
    from agents_reconcile._core.records import Action, Reason

    page = (Path(__file__).parents[2] / "docs" / "operating.md").read_text()
    for reason in Reason:
        assert f"| `{reason.value}` | {reason.explanation} |" in page, reason
    for action in Action:
        assert f"| `{action.value}` |" in page, action


# -- tool effects that wait for an operator (issue 23, item 9) ---------------------------------

_KILLED_BEFORE_THE_RECEIPT = """
import asyncio, sys
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core import crashpoints
from agents_reconcile._backends.registry import backend_named
from agents_reconcile._effects.tool import effect_tool

name, journal, space, store = sys.argv[1:5]
backend = backend_named(name)
config = ReconcileConfig(journal=backend.open_journal(journal, namespace=space or None))
session = ReconcilingSession(SQLiteSession("user-42", store), config=config)

@effect_tool
def charge_card(amount: int) -> str:
    '''Charge the customer's card.'''
    return f"charged {amount}"

steps = [[function_call("charge_card", {"amount": 5}, call_id="c1")], [assistant_message("ok")]]
agent = Agent(name="assistant", model=ScriptedModel(steps), tools=[charge_card])
crashpoints.arm(crashpoints.CrashPoint.BEFORE_RECEIPT)
asyncio.run(Runner.run(agent, "pay", session=session, run_config=session.run_config()))
"""


def stranded_effect(case: Case) -> str:
    """A worker charges the card and is killed (SIGKILL) before the receipt is durable; the
    next run on the session meets the effect and is refused (``effect_unknown``). Returns the
    effect's key."""
    from agents import Agent
    from agents.testing import ScriptedModel, function_call

    from agents_reconcile._effects.tool import effect_tool
    from agents_reconcile.errors import EffectUnknown

    space = case.space if case.backend.server else ""
    argv = [case.backend.name, case.journal, space, str(case.store)]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_THE_RECEIPT, *argv], capture_output=True, text=True
    )
    assert killed.returncode == -9, killed.stderr

    @effect_tool
    def charge_card(amount: int) -> str:
        """Charge the customer's card."""
        case.charges.append(amount)
        return f"charged {amount}"

    async def again() -> str:
        steps = [[function_call("charge_card", {"amount": 5}, call_id="c1")]]
        agent = Agent(name="assistant", model=ScriptedModel(steps), tools=[charge_card])
        with pytest.raises(EffectUnknown) as refused:
            await run(agent, "pay", case.session(), streamed=False)
        return refused.value.intent_id

    key = asyncio.run(again())
    assert case.charges == [], "the body is not run again"
    return key


def test_status_names_a_stranded_effect_and_a_hint_that_runs_as_printed(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """A started effect whose owner was killed before its receipt waits for an operator:
    ``status`` (table and JSON) lists it as needing one and exits 1; the ``show`` it prints
    runs as printed; ``trail`` mentions it; once resolved, ``status`` exits 0."""
    import shlex

    key = stranded_effect(case)
    code, out = cli(capsys, "status", *case.args())
    assert code == 1, out
    [row] = [line for line in out.splitlines() if key in line and "NEEDS OPERATOR" in line]
    assert "charge_card" in row and "gone" in row and "denied: effect_unknown" in row
    [show] = [line.strip() for line in out.splitlines() if line.strip().startswith(f"{PROG} show")]
    assert key in show
    code, shown = cli(capsys, *shlex.split(show)[1:])
    assert code == 0, shown
    assert "charge_card" in shown and "started" in shown and "effect_unknown" in shown
    offered = [
        line.strip()
        for line in shown.splitlines()
        if line.strip().startswith(f"{PROG} resolve ") and line.endswith(f" -- {key}")
    ]
    assert [shlex.split(line)[shlex.split(line).index("--as") + 1] for line in offered] == [
        "committed",
        "retry",
        "abandon",
    ]

    code, out = cli(capsys, "status", *case.args(), "--json")
    assert code == 1
    found = orjson.loads(out)
    assert found["needs_operator"] is True
    [effect] = found["effects"]
    assert (effect["effect"], effect["session_id"], effect["tool"]) == (
        key,
        "user-42",
        "charge_card",
    )
    assert (effect["owner_live"], effect["needs_operator"], effect["refused"]) == (
        False,
        True,
        True,
    )

    # Another session the journal knows, with nothing pending: the effect is not its.
    async def someone_else() -> None:
        session = case.session("someone-else")
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.journal.close()

    asyncio.run(someone_else())
    assert cli(capsys, "status", *case.args(), "--session", "someone-else")[0] == 0

    code, out = cli(capsys, "trail", "user-42", *case.args())
    [line] = [line for line in out.splitlines() if "waits for an operator" in line]
    shown_again = shlex.split(line.split("for the evidence: ", 1)[1])
    assert shown_again == shlex.split(show)

    resolve_args = ["--as", "abandon", "--reason", "no charge at the processor"]
    code, out = cli(capsys, "resolve", key, *resolve_args, *case.args())
    assert code == 0, out
    code, out = cli(capsys, "status", *case.args())
    assert code == 0 and key not in out, out


def test_a_started_effect_of_a_live_owner_is_listed_but_waits_for_no_one(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker elsewhere within its lease, and an effect an operator left for a retry, are
    listed without a call for an operator (exit 0); a gone owner's effect is called for."""
    from agents_reconcile._effects.resolve_effect import RETRY_OWNER

    from ..support.journal_support import STRANGER, make_effect

    live = dataclasses.replace(make_effect("c1", owner=str(STRANGER)), started_at=time.time())
    retry = make_effect("c2", owner=RETRY_OWNER)
    # Its lease (1 ms, stamped with its claim) runs out by the journal's clock once begun.
    gone = make_effect("c3", session_id="session-b", owner=str(STRANGER.leased(0.001)))

    async def begin(*effects: Any) -> None:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            for effect in effects:
                await journal.effects.begin(effect)
        finally:
            await journal.close()

    asyncio.run(begin(live, retry))
    code, out = cli(capsys, "status", *case.args(), "--json")
    assert code == 0, out
    found = orjson.loads(out)
    assert [(e["effect"], e["owner_live"], e["runs_again"]) for e in found["effects"]] == [
        (live.key, True, False),
        (retry.key, False, True),
    ]
    assert not any(e["needs_operator"] for e in found["effects"])
    code, out = cli(capsys, "status", *case.args())
    assert code == 0 and live.key in out and "runs again" in out and "NEEDS" not in out

    asyncio.run(begin(gone))
    time.sleep(0.02)
    code, out = cli(capsys, "status", *case.args(), "--json")
    assert code == 1
    waiting = [e["effect"] for e in orjson.loads(out)["effects"] if e["needs_operator"]]
    assert waiting == [gone.key]


# -- repairs in a deployment that seals payloads (issue 23, item 10) ---------------------------

PAYLOAD_KEY = base64.b64encode(b"operator-test-payload-key-material-32+").decode()


def sealing_deployment(case: Case) -> None:
    """A deployment that seals payloads (``payload_key``): bob's append failed and waits in
    the journal, sealed; alice's history holds a batch stored twice, with the marker."""

    async def go() -> None:
        faulty = FaultInjectingSession(SQLiteSession("bob", case.store))
        bob = ReconcilingSession(faulty, config=case.config(payload_key=PAYLOAD_KEY))
        faulty.plan(Fault.REJECT)
        with pytest.raises(BackendFailure):
            await bob.add_items([{"role": "user", "content": f"bob {SECRET}"}])
        call = {"type": "function_call", "call_id": "c1", "name": "charge", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": "c1", "output": SECRET}
        alice = SQLiteSession("alice", case.store)
        await alice.add_items([{"role": "user", "content": SECRET}, call, output, call, output])
        alice.close()

    asyncio.run(go())


def journal_holds(case: Case, marker: str) -> bool:
    """Whether the journal's raw storage holds ``marker``: the SQLite file (with its
    write-ahead log), every value under the Redis prefix, PostgreSQL's intent records."""

    async def scan() -> bool:
        needle = marker.encode()
        if case.backend.name == "sqlite":
            from agents_reconcile._backends.sqlite.backend import path_of

            path = path_of(case.journal)
            files = [path, path.with_name(f"{path.name}-wal")]
            return any(f.exists() and needle in f.read_bytes() for f in files)
        if case.backend.name.startswith("redis"):
            client = redis_client(case.journal)
            try:
                async for key in client.scan_iter(match=f"{case.space}:*"):
                    kind = await client.type(key)
                    values = await client.hvals(key) if kind == b"hash" else []
                    if any(needle in value for value in values):
                        return True
                return False
            finally:
                await client.aclose()
        import asyncpg

        conn = await asyncpg.connect(case.journal)
        try:
            rows = await conn.fetch(f'SELECT record FROM "{case.space}".intents')
            return any(needle in bytes(row[0]) for row in rows)
        finally:
            await conn.close()

    return asyncio.run(scan())


def repair(case: Case, capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, str]:
    argv = ["check", "alice", "--store", str(case.store), *case.args(), "--repair"]
    return cli(capsys, *argv, "--reason", "ticket 9: a batch stored twice", *more)


def test_a_repair_in_a_sealing_deployment_needs_the_payload_key(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the deployment's payload key, ``check --repair`` is refused in one line (exit
    1) and writes nothing, store or journal; a key that is not the deployment's is refused
    too; the key's value is never taken from the command line."""
    sealing_deployment(case)
    before = case.history("alice")
    code, out = repair(case, capsys)
    assert code == 1, out
    assert out.startswith("refused:") and out.count("\n") == 1 and "payload key" in out, out
    assert "--payload-key-file" in out and "nothing was written" in out
    assert case.history("alice") == before
    assert not journal_holds(case, SECRET)
    other = tmp = case.directory / "other.key"
    tmp.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    code, out = repair(case, capsys, "--payload-key-file", str(other))
    assert code == 1 and "payload key" in out, out
    assert case.history("alice") == before
    code, out = cli(capsys, "check", "alice", "--store", str(case.store), "--payload-key", "k")
    assert code == 2, "no option takes a key's value"

    async def untouched() -> None:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            assert await journal.decisions(session_id="alice") == []
            assert await journal.write_count("alice", _store_identity(case, "alice")) == 0
        finally:
            await journal.close()

    asyncio.run(untouched())


def test_a_repair_with_the_payload_key_writes_its_history_sealed(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the key (a key file, or a variable named by ``--payload-key-env``), the repaired
    history the repair's intent holds is sealed under it: stopped right after that intent is
    recorded, the journal's raw storage holds no byte of the history; and the repair, run to
    its end, is written and recorded in the trail."""
    from agents_reconcile._core.crashpoints import CrashPoint, arm, disarm
    from agents_reconcile._core.sealing import PayloadKey
    from agents_reconcile.errors import JournalUnavailable

    sealing_deployment(case)
    key_file = case.directory / "payload.key"
    key_file.write_text(f"# the deployment's payload key\n{PAYLOAD_KEY}\n")

    def stop(point: CrashPoint) -> None:
        raise JournalUnavailable("stopped here by the test")

    arm(CrashPoint.AFTER_INTENT_RECORDED, action=stop)
    try:
        code, out = repair(case, capsys, "--payload-key-file", str(key_file))
    finally:
        disarm()
    assert code == 2 and "stopped here" in out, out
    assert not journal_holds(case, SECRET), "the repaired history is sealed in the journal"

    async def interrupted() -> Any:
        journal: Any = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            lend = ReconcileConfig(payload_key=PAYLOAD_KEY).payload_keys
            journal.keyring.add(lend)
            [entry] = await journal.pending("alice")
            return entry.intent
        finally:
            await journal.close()

    intent = asyncio.run(interrupted())
    assert intent.sealed_under == PayloadKey(PAYLOAD_KEY).key_id
    assert any(SECRET in str(item) for item in intent.batch), "it opens with the key"

    # Stopped before the old history was cleared: the deployment's next use of the session
    # is denied, nothing lost; the operator drops the intent and repairs again, to its end,
    # with the key from a variable named on the command line.
    async def next_use() -> None:
        with pytest.raises(ContinuationDenied):
            await case.session("alice", payload_key=PAYLOAD_KEY).get_items()

    asyncio.run(next_use())
    monkeypatch.setenv("OPS_PAYLOAD_KEY", PAYLOAD_KEY)
    from_env = ("--payload-key-env", "OPS_PAYLOAD_KEY")
    abandon = ("--as", "abandon", "--reason", "the repair was stopped")
    code, out = cli(capsys, "resolve", intent.intent_id, *abandon, *case.args(), *from_env)
    assert code == 0, out
    code, out = repair(case, capsys, *from_env)
    assert code == 0, out
    assert case.history("alice") == [f"user:{SECRET}", "call:c1", "output:c1"]
    code, out = cli(capsys, "trail", "alice", *case.args(), "--json")
    assert [d["action"] for d in orjson.loads(out)["decisions"]][-1] == "repaired"


def _store_identity(case: Case, session_id: str) -> Any:
    return ReconcilingSession(SQLiteSession(session_id, case.store)).backend_identity
