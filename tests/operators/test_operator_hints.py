"""What the operator's commands print runs as printed, and says why without saying what: every
hint is a complete command line (its journal options, and the store where one is needed), ids
are taken by any unique prefix, ``show`` finds the store the intent's record names and lists
the batch by kind, tool and call id without content, errors under ``--json`` are JSON, and a
failed append says in what a logger prints by default that its intent is pending. Over the
SQLite, Redis and PostgreSQL journals, each in a namespace of its own."""

from __future__ import annotations

import asyncio
import logging
import shlex

import orjson
import pytest
from agents import SQLiteSession

from agents_reconcile import ContinuationDenied, ReconcilingSession
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.ownership import current_owner
from agents_reconcile.errors import ResolutionRefused
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.journal_support import make_intent
from ..support.runner_support import first_run_steps, run, summarize
from .test_operator_cli import (
    PAYLOAD_KEY,
    PROG,
    SECRET,
    Case,
    case,
    cli,
    denied,
    filled,
    next_run,
)

__all__ = ["case"]


def printed(out: str, command: str) -> list[str]:
    """The command lines of ``command`` that ``out`` prints."""
    return [
        line.strip() for line in out.splitlines() if line.strip().startswith(f"{PROG} {command} ")
    ]


def as_printed(capsys: pytest.CaptureFixture[str], line: str) -> tuple[int, str]:
    """Run a printed command line, its placeholders (a ``resolve`` line's) filled in."""
    return cli(capsys, *shlex.split(filled(line))[1:])


def test_every_hint_status_and_show_print_runs_as_printed(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status`` points at ``show`` (no ``--store``: the record names it), ``show`` judges
    against that store and prints one ``resolve`` line per resolution it would take (not
    ``committed``: the store shows the batch missing); the first run as printed resolves the
    intent and the next run goes on."""
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")
    code, out = cli(capsys, "status", *case.args())
    assert code == 1, out
    [show] = printed(out, "show")
    assert show.endswith(shlex.join([*case.args(), "--", intent_id]))
    code, shown = as_printed(capsys, show)
    assert code == 0, shown
    assert "unchanged (batch_absent)" in shown and "named by the intent's record" in shown
    offered = printed(shown, "resolve")
    chosen = [shlex.split(line)[shlex.split(line).index("--as") + 1] for line in offered]
    assert chosen == ["replay", "abandon"]
    assert all(f"--store {case.store}" in line for line in offered)
    code, done = as_printed(capsys, offered[0])
    assert code == 0 and "replayed" in done, done
    next_run(case)
    assert case.history()[-2:] == ["user:next", "assistant:ok"]
    assert case.charges == [5]


@pytest.mark.parametrize("choice", ["committed", "abandon"])
def test_each_resolution_show_offers_runs_as_printed(
    case: Case, capsys: pytest.CaptureFixture[str], choice: str
) -> None:
    intent_id = denied(case, Fault.CONCURRENT_WRITER)
    code, shown = cli(capsys, "show", intent_id, *case.args())
    assert code == 0, shown
    [line] = [line for line in printed(shown, "resolve") if f"--as {choice}" in line]
    code, done = as_printed(capsys, line)
    assert code == 0, done
    assert cli(capsys, "status", *case.args())[0] == 0


def test_show_lists_the_batch_by_kind_tool_and_call_without_content(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")
    code, out = cli(capsys, "show", intent_id, *case.args(), "--json")  # cli() checks SECRET
    assert code == 0, out
    batch = orjson.loads(out)["batch"]
    assert [(i["position"], i["type"], i.get("name"), i.get("call_id")) for i in batch] == [
        (0, "function_call", "charge_card", "c1"),
        (1, "function_call_output", None, "c1"),
    ]
    assert all(i["size"] > 0 and i["digest"] for i in batch)
    code, out = cli(capsys, "show", intent_id, *case.args())
    assert "1. type=function_call  name=charge_card  call_id=c1" in out


def test_ids_are_taken_by_any_unique_prefix(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail")
    code, out = cli(capsys, "show", intent_id[:8], *case.args(), "--json")
    assert code == 0 and orjson.loads(out)["intent_id"] == intent_id, out

    async def two_alike() -> None:
        journal = case.backend.open_journal(case.journal, namespace=case.space)
        try:
            for ident in ("feedbeef01", "feedbeef02"):
                await journal.record(
                    make_intent(ident, session_id=f"s-{ident}"),
                    state=IntentState.FAILED,
                    owner=current_owner(),
                )
        finally:
            await journal.close()

    asyncio.run(two_alike())
    code, out = cli(capsys, "show", "feedbeef", *case.args())
    assert code == 1 and "begins 2 ids (feedbeef01, feedbeef02)" in out, out
    code, out = cli(capsys, "show", "feedbeef02", *case.args(), "--json")
    assert code == 0 and orjson.loads(out)["intent_id"] == "feedbeef02", out


def test_errors_under_json_are_one_json_object_on_stdout(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents_reconcile._cli import main

    missing = ["--journal", str(case.directory / "missing.db")]
    assert main(["status", *missing, "--json"]) == 2
    assert orjson.loads(capsys.readouterr().out)["kind"] == "JournalError"
    denied(case, Fault.REJECT, on_unchanged="fail")
    for argv, code, kind in (
        (["status", "--json", "--no-such-option"], 2, "usage"),
        (["show", "nothing-like-it", *case.args(), "--json"], 1, "NotFound"),
        (["resolve", "x", *case.args(), "--as", "abandon", "--reason", "r", "--json"], 1, None),
    ):
        assert main(argv) == code
        out = capsys.readouterr().out
        found = orjson.loads(out)
        assert found["exit"] == code and found["error"], found
        if kind is not None:
            assert found["kind"] == kind


def test_a_failed_append_says_in_the_log_that_its_intent_is_pending(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    """The exception keeps the store's own type and text; a WARNING record (what a logger
    prints by default) names the intent and says it will be reconciled."""

    async def go() -> tuple[str, BaseException]:
        faulty = FaultInjectingSession(SQLiteSession("user-42", case.store))
        session = ReconcilingSession(faulty, config=case.config())
        faulty.plan(Fault.REJECT, at=2)
        with pytest.raises(BackendFailure) as failed:
            await run(case.agent(first_run_steps()), f"hi {SECRET}", session, streamed=False)
        [pending] = await session.pending()
        return pending.intent_id, failed.value

    with caplog.at_level(logging.WARNING, logger="agents_reconcile"):
        intent_id, error = asyncio.run(go())
    assert type(error) is BackendFailure
    [record] = [
        r
        for r in caplog.records
        if getattr(r, "agents_reconcile", {}).get("step") == "append_failed"
    ]
    text = record.getMessage()
    assert intent_id in text and "pending" in text and "reconciled" in text
    assert SECRET not in text


def test_a_denial_names_its_intent_its_reason_and_the_next_command(case: Case) -> None:
    intent_id = denied(case, Fault.CONCURRENT_WRITER)

    async def again() -> ContinuationDenied:
        from agents.testing import assistant_message

        with pytest.raises(ContinuationDenied) as denial:
            await run(
                case.agent([[assistant_message("ok")]]), "next", case.session(), streamed=False
            )
        return denial.value

    text = str(asyncio.run(again()))
    assert intent_id in text and "history_changed" in text
    assert f"agents-reconcile show -- {intent_id}" in text


def test_an_unknown_resolution_target_is_refused_not_created(case: Case) -> None:
    async def go() -> None:
        session = case.session()
        with pytest.raises(ResolutionRefused, match="no pending intent"):
            await session.resolve("not-an-intent", "abandon", reason="r")

    asyncio.run(go())


def test_a_sealed_record_shows_what_its_seal_allows_and_its_items_with_the_key(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the deployment's payload key a sealed intent is listed as SEALED, not damaged,
    and ``show`` gives its counts and digests (unverified); with the key, its items by kind;
    never its content, and ``abandon`` does not set a sound record aside."""
    monkeypatch.delenv("AGENTS_RECONCILE_PAYLOAD_KEY", raising=False)
    intent_id = denied(case, Fault.REJECT, on_unchanged="fail", payload_key=PAYLOAD_KEY)
    code, out = cli(capsys, "status", *case.args())
    assert (
        code == 1
        and f"SEALED (give the payload keys: --payload-key-file) intent {intent_id}" in out
    )
    code, out = cli(capsys, "show", intent_id, *case.args(), "--json")
    assert code == 0, out
    sealed = orjson.loads(out)["sealed"]
    assert (sealed["items"], sealed["verified"]) == (2, False)
    code, out = cli(capsys, "resolve", intent_id, *case.args(), "--as", "abandon", "--reason", "r")
    assert code == 1 and "not damaged" in out, out
    key_file = case.directory / "payload.key"
    key_file.write_text(PAYLOAD_KEY + "\n")
    keyed = [*case.args(), "--payload-key-file", str(key_file)]
    code, out = cli(capsys, "show", intent_id, *keyed, "--json")
    assert code == 0, out
    assert [i.get("name") for i in orjson.loads(out)["batch"]] == ["charge_card", None]


def test_a_repair_into_the_applications_namespace_is_found_by_its_next_run(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check --repair`` takes the same ``--journal``/``--namespace`` as every command: the
    repair is recorded in the application's own journal (its trail holds it) and the next
    run on the repaired history goes on."""

    async def damaged() -> None:
        store = SQLiteSession("alice", case.store)
        orphan = {"type": "function_call_output", "call_id": "c9", "output": SECRET}
        await store.add_items([{"role": "user", "content": f"hi {SECRET}"}, orphan])
        await case.session("alice").get_items()  # the application's journal exists

    asyncio.run(damaged())
    argv = ["check", "alice", "--store", str(case.store), *case.args()]
    code, out = cli(capsys, *argv)
    assert code == 1 and "a repair would remove positions 2" in out, out
    code, out = cli(capsys, *argv, "--repair", "--reason", "orphan call after an outage")
    assert code == 0, out

    async def next_run_of_alice() -> list[str]:
        session = case.session("alice")
        trail = await session.decisions()
        assert "history_repaired" in [d.reason.value for d in trail]
        from agents.testing import assistant_message

        await run(case.agent([[assistant_message("ok")]]), "again", session, streamed=False)
        return [summarize(item) for item in await session.get_items()]

    assert asyncio.run(next_run_of_alice()) == [f"user:hi {SECRET}", "user:again", "assistant:ok"]


def test_a_resolution_takes_only_a_whole_id(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """A resolution writes, so it never completes a prefix: the operator may have looked at
    another intent than the one a prefix now names."""
    intent_id = denied(case, Fault.CONCURRENT_WRITER)
    argv = ["--as", "abandon", "--reason", "r", *case.args()]
    code, out = cli(capsys, "resolve", intent_id[:12], *argv)
    assert code == 1 and "not a whole id" in out and intent_id in out, out
    assert cli(capsys, "resolve", intent_id, *argv)[0] == 0


def test_an_unforeseen_failure_is_trouble_and_json_under_json(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents_reconcile._cli import main
    from agents_reconcile._operator import commands

    def broken(args: object) -> int:
        raise ValueError("a driver said no")

    monkeypatch.setattr(commands, "status", broken)
    assert main(["status", *case.args(), "--json"]) == 2
    found = orjson.loads(capsys.readouterr().out)
    assert (found["kind"], found["exit"]) == ("ValueError", 2)
    assert "a driver said no" in found["error"]
