"""The operator's commands leave no dead end: a store's address without its namespace names
the namespaces holding a store (never ``migrate``); one node of a Redis Cluster is named as
such, with the cluster's address to give instead; a session or id that is not there is said to
be missing (exit 1), told apart from one that is there with nothing to report; and ``show`` of
a settled intent says how, when and by whom it was settled."""

from __future__ import annotations

import asyncio
import os
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import SQLiteSession

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.registry import Backend
from agents_reconcile._operator.hints import OUTPUT, REASON
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import address, registered
from .test_operator_cli import PROG, SECRET, Case, case, cli, denied, stranded_effect

__all__ = ["case"]

SERVER_STORES = [p for p in registered("store") if p.values[0].server]
SESSION = "user-42"


def store_space(backend: Backend) -> str:
    """A namespace of a test's own, near the store's default name, so that a listing of the
    namespaces nearest to the default names it among the first."""
    tail = uuid.uuid4().hex[:10]
    return f"agents_reconcile_store_{tail}" if backend.name == "postgres" else f"ar-store-{tail}"


class ServerStore:
    """A revisioned store on a server, in a namespace of its own, holding one session."""

    def __init__(self, backend: Backend, directory: Path) -> None:
        self.backend = backend
        self.address = address(backend, directory, "store")
        self.space = store_space(backend)

        async def write() -> None:
            store = backend.open_store(SESSION, self.address, namespace=self.space)
            try:
                await store.add_items([{"role": "user", "content": "hi"}])
            finally:
                await store.close()

        asyncio.run(write())

    def drop(self) -> None:
        async def go() -> None:
            store = self.backend.open_store(SESSION, self.address, namespace=self.space)
            try:
                await store.drop()
            finally:
                await store.close()

        asyncio.run(go())


@pytest.fixture(params=SERVER_STORES)
def server_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerStore]:
    if not request.param.available():
        pytest.skip(f"{request.param.name}: no driver")
    found = ServerStore(request.param, tmp_path)
    yield found
    found.drop()


# -- a store's namespace -----------------------------------------------------------------------


def test_a_check_without_the_stores_namespace_lists_those_holding_a_store_not_migrate(
    server_store: ServerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check`` given a Redis or PostgreSQL store's address without ``--store-namespace``
    (the default namespace holds no store) used to advise ``migrate``, which would create a
    store where none belongs; now it names the namespaces that hold one and the option to
    give (exit 2), and creates nothing; a misspelled namespace names the real one first; the
    right one checks the session."""
    code, out = cli(capsys, "check", SESSION, "--store", server_store.address)
    assert code == 2, out
    assert "migrate" not in out and "--store-namespace" in out, out
    assert server_store.space in out, out
    typo = server_store.space[:-1]
    code, out = cli(
        capsys, "check", SESSION, "--store", server_store.address, "--store-namespace", typo
    )
    assert code == 2 and "migrate" not in out, out
    listed = out.split("found under: " if "found under" in out else "a revisioned store: ")[1]
    assert listed.startswith(server_store.space), out
    code, out = cli(
        capsys,
        "check",
        SESSION,
        "--store",
        server_store.address,
        "--store-namespace",
        server_store.space,
    )
    assert code == 0 and "no damage found" in out, out

    async def default_is_empty() -> bool:
        store = server_store.backend.open_store(SESSION, server_store.address, migrate=False)
        try:
            return await store.schema_version() is None
        finally:
            await store.close()

    assert asyncio.run(default_is_empty()), "no store was created in the default namespace"


def cluster_nodes() -> list[str]:
    """Each seed node of the test Redis Cluster, as a plain ``redis://`` address."""
    url = os.environ.get("AGENTS_RECONCILE_TEST_REDIS_CLUSTER_URL")
    if not url:
        pytest.skip("no Redis Cluster: set AGENTS_RECONCILE_TEST_REDIS_CLUSTER_URL")
    seeds = url.split("://", 1)[1].split("?", 1)[0]
    return [f"redis://{seed}" for seed in seeds.split(",")]


@pytest.mark.redis
def test_one_node_of_a_redis_cluster_is_named_with_the_cluster_address_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain ``redis://`` address of one node of a Redis Cluster holding a cluster journal
    listed its buckets' prefixes (``P:{b017}``), which no command can follow, or failed on a
    redirection; now every command says the address is one node of a cluster and gives the
    ``redis+cluster://`` address, for the journal (``status``, ``trail``, the prefix given in
    the address too) and the store (``check``)."""
    from agents_reconcile._backends.registry import backend_named

    backend = backend_named("redis-cluster")
    space = f"t{uuid.uuid4().hex[:12]}"
    cluster = address(backend, tmp_path, "journal")

    async def journal_there() -> None:
        journal: Any = backend.open_journal(cluster, namespace=space)
        try:
            await journal.migrate()
        finally:
            await journal.close()

    async def drop() -> None:
        journal: Any = backend.open_journal(cluster, namespace=space)
        try:
            await journal.drop()
        finally:
            await journal.close()

    asyncio.run(journal_there())
    try:
        for node in cluster_nodes():
            seed = node.removeprefix("redis://")
            for argv in (
                ["status", "--journal", node],
                ["status", "--journal", f"{node}?prefix={space}"],
                ["trail", "--journal", node, "--", SESSION],
                ["check", "--store", node, "--", SESSION],
            ):
                code, out = cli(capsys, *argv)
                assert code == 2, out
                assert "one node of a Redis Cluster" in out, out
                assert f"redis+cluster://{seed}" in out, out
                assert "braces" not in out and "migrate" not in out, out
    finally:
        asyncio.run(drop())


# -- names that are not there ------------------------------------------------------------------


def reported(out: str) -> dict[str, Any]:
    """The JSON a ``--json`` command printed, without the one-line error it ends with."""
    found: dict[str, Any] = orjson.loads(out.split("\nagents-reconcile:", 1)[0])
    return found


def test_check_of_a_session_its_store_does_not_hold_says_so_apart_from_a_healthy_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check nosuch`` said "no damage found" (exit 0) of a session the store does not hold;
    now it says there is no such session in that store (exit 1; under ``--json`` a
    ``NotFound`` object), while a session the store holds is checked as before (exit 0)."""
    store = tmp_path / "chat.db"

    async def write() -> None:
        session = SQLiteSession(SESSION, store)
        await session.add_items([{"role": "user", "content": "hi"}])
        session.close()

    asyncio.run(write())
    code, out = cli(capsys, "check", "--store", str(store), "--", "nosuch")
    assert code == 1, out
    assert "no session 'nosuch' in store" in out and "no damage" not in out, out
    code, out = cli(capsys, "check", "--store", str(store), "--json", "--", "nosuch")
    assert code == 1
    found = reported(out)
    assert (found["kind"], found["exit"], found["what"], found["name"]) == (
        "NotFound",
        1,
        "session",
        "nosuch",
    )
    code, out = cli(capsys, "check", "--store", str(store), "--", SESSION)
    assert code == 0 and "no damage found" in out, out


def healthy(case: Case, session_id: str) -> None:
    """A session written through the wrapper with nothing to decide: the journal only counts
    its writes."""

    async def write() -> None:
        session = case.session(session_id)
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.journal.close()

    asyncio.run(write())


def test_trail_tells_a_session_the_journal_does_not_know_from_one_without_decisions(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``trail`` (and ``decisions --session``) said "No decisions recorded" (exit 0) of any
    name; now a session the journal holds nothing of is ``NotFound`` (exit 1), while one whose
    writes it counts, with no decision, is said to be known (exit 0), on every journal."""
    healthy(case, "quiet")
    code, out = cli(capsys, "trail", *case.args(), "--", "quiet")
    assert code == 0, out
    assert "No decisions recorded for session 'quiet'" in out and "counted" in out, out
    code, out = cli(capsys, "trail", *case.args(), "--json", "--", "quiet")
    assert code == 0 and orjson.loads(out)["decisions"] == [], out
    code, out = cli(capsys, "trail", *case.args(), "--", "nosuch")
    assert code == 1, out
    assert "no session 'nosuch' in journal" in out and "No decisions" not in out, out
    code, out = cli(capsys, "trail", *case.args(), "--json", "--", "nosuch")
    assert code == 1
    assert reported(out)["kind"] == "NotFound"
    code, out = cli(capsys, "decisions", *case.args(), "--session", "nosuch")
    assert code == 1 and "no session 'nosuch'" in out, out
    code, out = cli(capsys, "decisions", *case.args(), "--session", "quiet")
    assert code == 0 and "No decisions recorded" in out, out


def test_status_of_a_session_the_journal_does_not_know_is_not_found(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status --session nosuch`` said "No pending intents" (exit 0) of any name; now a
    session the journal holds nothing of is ``NotFound`` (exit 1), worded as ``trail`` words
    it, while a session it knows with nothing pending says so (exit 0), on every journal."""
    healthy(case, "quiet")
    code, out = cli(capsys, "status", *case.args(), "--session", "quiet")
    assert code == 0, out
    assert "No pending intents or unfinished tool effects for session 'quiet'" in out, out
    code, out = cli(capsys, "status", *case.args(), "--session", "quiet", "--json")
    assert code == 0 and orjson.loads(out)["pending"] == [], out
    code, out = cli(capsys, "status", *case.args(), "--session", "nosuch")
    assert code == 1, out
    assert "no session 'nosuch' in journal" in out and "No pending" not in out, out
    code, trailed = cli(capsys, "trail", *case.args(), "--", "nosuch")
    assert out == trailed, "the same words as trail's"
    code, out = cli(capsys, "status", *case.args(), "--session", "nosuch", "--json")
    assert code == 1
    found = reported(out)
    assert (found["kind"], found["exit"], found["what"], found["name"]) == (
        "NotFound",
        1,
        "session",
        "nosuch",
    )


def test_show_of_an_id_that_names_nothing_is_not_found(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` and ``resolve`` of an id no intent, effect or set-aside record has say so
    plainly (exit 1, ``NotFound``), naming the journal they looked in."""
    healthy(case, "quiet")
    for argv in (
        ["show", *case.args()],
        ["resolve", *case.args(), "--as", "abandon", "--reason", "r"],
    ):
        code, out = cli(capsys, *argv, "--", "f" * 32)
        assert code == 1, out
        assert f"nothing by the id '{'f' * 32}' in journal" in out, out
        code, out = cli(capsys, *argv, "--json", "--", "f" * 32)
        assert code == 1
        found = reported(out)
        assert (found["kind"], found["what"], found["name"]) == ("NotFound", "id", "f" * 32)


# -- a settled intent --------------------------------------------------------------------------


def test_show_of_an_intent_an_operator_resolved_says_how_when_and_by_whom(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` refused a settled intent ("is settled already"); now it shows the intent
    after the fact: settled, the outcome, reason and action, when, the operator who resolved
    it with their resolution and reason, and the evidence, in text and ``--json``, with no
    resolve command (and ``resolve`` of it points at this ``show``)."""
    intent_id = denied(case, Fault.CONCURRENT_WRITER)
    resolve = ["--as", "abandon", "--reason", "ledger shows one payment", "--actor", "ops:ana"]
    code, out = cli(capsys, "resolve", *case.args(), *resolve, "--", intent_id)
    assert code == 0, out
    code, out = cli(capsys, "show", *case.args(), "--", intent_id)
    assert code == 0, out
    assert "settled" in out and "operator_resolved" in out and "dropped" in out, out
    assert "ops:ana" in out and "ledger shows one payment" in out, out
    assert "evidence" in out and "history_changed" in out, out
    assert f"{PROG} resolve" not in out, out
    code, out = cli(capsys, "show", *case.args(), "--json", "--", intent_id)
    assert code == 0, out
    shown = orjson.loads(out)
    assert shown["state"] == "settled" and shown["next"] == []
    settled = shown["settled"]
    assert (settled["outcome"], settled["reason"], settled["action"]) == (
        "ambiguous",
        "operator_resolved",
        "dropped",
    )
    assert settled["by"] == {
        "actor": "ops:ana",
        "resolution": "abandon",
        "reason": "ledger shows one payment",
        "override": False,
    }
    assert isinstance(settled["decided_at"], float) and settled["evidence"]["judged"]
    code, out = cli(capsys, "resolve", *case.args(), *resolve, "--", intent_id)
    assert code == 1 and "settled already" in out and f"{PROG} show " in out, out


def test_show_of_an_intent_the_rule_settled_says_no_operator_was_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write whose acknowledgement was lost, settled as committed by the next use of the
    session: ``show`` says it was settled by the rule, no operator, and why."""
    journal = tmp_path / "journal.db"

    async def lost_then_settled() -> str:
        faulty = FaultInjectingSession(SQLiteSession(SESSION, tmp_path / "chat.db"))
        session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
        faulty.plan(Fault.LOST_ACK)
        with pytest.raises(BackendFailure):
            await session.add_items([{"role": "user", "content": SECRET}])
        [pending] = await session.pending()
        await session.reconcile()
        await session.journal.close()
        return pending.intent_id

    intent_id = asyncio.run(lost_then_settled())
    code, out = cli(capsys, "show", "--journal", str(journal), "--", intent_id)
    assert code == 0, out
    assert "committed (batch_present) -> settled" in out and "no operator" in out, out
    code, out = cli(capsys, "show", "--journal", str(journal), "--json", "--", intent_id)
    assert orjson.loads(out)["settled"]["by"] is None


# -- a hint's placeholders ---------------------------------------------------------------------


def printed_resolve(shown: str, resolution: str) -> list[str]:
    """The arguments of the ``resolve --as resolution`` line ``show`` printed, as printed."""
    [line] = [
        line.strip()
        for line in shown.splitlines()
        if line.strip().startswith(f"{PROG} resolve ") and f"--as {resolution} " in line
    ]
    return shlex.split(line)[1:]


def refused_as_a_placeholder(
    capsys: pytest.CaptureFixture[str], argv: list[str], option: str
) -> None:
    """``argv`` is a usage error (exit 2, as text and as JSON) naming ``option`` and what to
    put there."""
    code, out = cli(capsys, *argv)
    assert code == 2, out
    assert f"argument {option}: " in out and "is the placeholder" in out, out
    assert "nothing was recorded" in out, out
    code, out = cli(capsys, *argv, "--json")
    assert code == 2, out
    assert orjson.loads(out.split("\nagents-reconcile", 1)[0])["kind"] == "usage"


def test_resolve_refuses_the_reason_placeholder_a_printed_hint_holds_and_records_nothing(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``resolve`` line ``show`` prints, run as printed, recorded ``WHAT YOU CHECKED`` as
    the operator's reason; now it is a usage error (exit 2) saying to put what was checked
    there, the intent stays pending and the trail holds no resolution; with the reason
    replaced, the same line resolves it."""
    intent_id = denied(case, Fault.CONCURRENT_WRITER)
    code, shown = cli(capsys, "show", *case.args(), "--", intent_id)
    assert code == 0, shown
    assert f"replace {REASON!r} with what you checked" in shown and OUTPUT not in shown, shown
    argv = printed_resolve(shown, "abandon")
    assert REASON in argv, argv
    refused_as_a_placeholder(capsys, argv, "--reason")
    said = cli(capsys, *argv)[1]
    assert "replace it with what you checked" in said, said
    spaced = [" what  you checked " if arg == REASON else arg for arg in argv]
    refused_as_a_placeholder(capsys, spaced, "--reason")
    code, out = cli(capsys, "trail", *case.args(), "--json", "--", "user-42")
    assert code == 0 and "operator_resolved" not in out, out
    code, out = cli(capsys, "status", *case.args())
    assert code == 1 and intent_id in out, out
    replaced = ["ticket 12: the other writer's message kept" if a == REASON else a for a in argv]
    code, out = cli(capsys, *replaced)
    assert code == 0, out
    code, out = cli(capsys, "trail", *case.args(), "--", "user-42")
    assert "operator_resolved" in out and REASON not in out, out


def test_resolve_refuses_a_tool_effect_s_output_placeholder_and_records_no_receipt(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stranded tool effect's ``--as committed`` line carries ``--output 'WHAT THE SYSTEM
    SHOWS'`` as well, and ``show`` says to replace both; run as printed, or with the reason
    alone replaced, it is a usage error naming ``--output`` (exit 2) and no receipt is
    written; with both replaced it settles the effect."""
    key = stranded_effect(case)
    code, shown = cli(capsys, "show", *case.args(), "--", key)
    assert code == 0, shown
    assert f"replace {REASON!r} with what you checked, and {OUTPUT!r}" in shown, shown
    argv = printed_resolve(shown, "committed")
    assert OUTPUT in argv and REASON in argv, argv
    refused_as_a_placeholder(capsys, argv, "--output")
    reason = ["charge ch_1 at the processor" if a == REASON else a for a in argv]
    refused_as_a_placeholder(capsys, reason, "--output")
    said = cli(capsys, *reason)[1]
    assert "replace it with the output the tool's effect gave" in said, said
    code, out = cli(capsys, "status", *case.args())
    assert code == 1 and key in out, out
    both = ["charged 5" if a == OUTPUT else a for a in reason]
    code, out = cli(capsys, *both)
    assert code == 0, out
    code, out = cli(capsys, "show", *case.args(), "--json", "--", key)
    assert code == 0 and orjson.loads(out)["state"] == "done", out
