"""The operator's ``status``, ``show`` and ``resolve`` over every store kind the registry knows
(the SDK's ``SQLiteSession``, and the revisioned store of every registered backend whose data
outlives a process: SQLite, Redis, Redis Cluster, PostgreSQL) and every journal a command opens
by address (SQLite, Redis, Redis Cluster, PostgreSQL), each in a namespace of its own: the
store an intent's record names is opened as its kind, as the user it connects as, and judged;
every hint runs as printed (its line parsed and executed); ``committed`` of a batch the store
shows missing is refused unless ``--override``; a store that cannot be read is said to be.

Also the regressions of each part on their own: a recorded kind is its public name, not the
module path it is registered under; one store class serving two backends (a Redis server and a
Redis Cluster) is found for both; a PostgreSQL store's record keeps its user name, never its
password."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents.testing import assistant_message

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.registry import BACKENDS, backend_named, backends_storing
from agents_reconcile._core.identity import derive_identity
from agents_reconcile._core.records import BackendIdentity, PendingWrite
from agents_reconcile._operator.stores import close_store as close_operator_store
from agents_reconcile._operator.stores import recorded_store, store_for
from agents_reconcile._selftest.stores import Store
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import BACKEND_PARAMS, address, close, namespace, registered
from ..support.journal_support import make_intent
from ..support.runner_support import run, summarize
from .test_operator_cli import PROG, SECRET, cli, filled

JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]
STORES = [
    p
    for p in BACKEND_PARAMS
    if p.values[0].name == "sqlite" or p.values[0].name.startswith("revisioned_")
]
"""The SDK's ``SQLiteSession`` and every registered backend's durable revisioned store."""
JOURNAL_ROTATION = pytest.mark.rotation("journal_backend", ("sqlite",))
"""A command opens the journal by its address and the store by the kind its record names,
each on its own: every store kind meets the SQLite journal, and each server journal meets the
store kinds in turn (the rest of the cross product is exhaustive)."""
SESSION = "user-42"
BATCH = [{"role": "user", "content": f"pay 5 {SECRET}"}]


class Deployment:
    """An application's journal (on a journal backend, in a namespace of its own) and its
    session's store (of one store kind), and what an operator is given: the journal options."""

    def __init__(self, journal: Any, store: Store, directory: Path) -> None:
        self.backend = journal
        self.kind = store
        self.directory = directory
        self.journal = address(journal, directory, "journal")
        self.space = namespace()

    def args(self) -> list[str]:
        found = ["--journal", self.journal]
        return [*found, "--namespace", self.space] if self.backend.server else found

    def config(self, **options: Any) -> ReconcileConfig:
        journal = self.backend.open_journal(self.journal, namespace=self.space)
        return ReconcileConfig(journal=journal, **options)

    def failed(self, fault: Fault, *, deny: bool = True) -> str:
        """An append of ``BATCH`` that fails with ``fault`` (the missing batch left to an
        operator); with ``deny``, the next use of the session is denied. Returns its intent."""

        async def go() -> str:
            store = await self.kind.open(SESSION, self.directory)
            faulty = FaultInjectingSession(store)
            session = ReconcilingSession(faulty, config=self.config(on_unchanged="fail"))
            try:
                faulty.plan(fault)
                with pytest.raises(BackendFailure):
                    await session.add_items(list(BATCH))
                [pending] = await session.pending()
                if deny:
                    with pytest.raises(ContinuationDenied):
                        await session.reconcile()
                return pending.intent_id
            finally:
                await close(store)

        return asyncio.run(go())

    def history(self) -> list[str]:
        async def read() -> list[Any]:
            store = await self.kind.open(SESSION, self.directory)
            try:
                return list(await store.get_items())
            finally:
                await close(store)

        return [summarize(item) for item in asyncio.run(read())]

    def next_run(self) -> None:
        """The application's next run on the session goes on."""
        from agents import Agent
        from agents.testing import ScriptedModel

        async def go() -> None:
            store = await self.kind.open(SESSION, self.directory)
            try:
                session = ReconcilingSession(store, config=self.config())
                agent = Agent(name="assistant", model=ScriptedModel([[assistant_message("ok")]]))
                await run(agent, "next", session, streamed=False)
            finally:
                await close(store)

        asyncio.run(go())

    def cleanup(self) -> None:
        async def drop() -> None:
            if self.backend.server:
                journal: Any = self.backend.open_journal(self.journal, namespace=self.space)
                await journal.drop()
                await journal.close()
            store = await self.kind.open(SESSION, self.directory)
            await close(store, drop=True)

        asyncio.run(drop())


@pytest.fixture(params=JOURNALS)
def journal_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.fixture(params=STORES)
def deployment(
    journal_backend: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Deployment]:
    found = Deployment(journal_backend, request.param, tmp_path)
    yield found
    found.cleanup()


def printed(out: str, command: str) -> list[str]:
    """The command lines of ``command`` that ``out`` prints."""
    return [
        line.strip() for line in out.splitlines() if line.strip().startswith(f"{PROG} {command} ")
    ]


def as_printed(capsys: pytest.CaptureFixture[str], line: str) -> tuple[int, str]:
    """Run a printed command line as a shell would parse it, its placeholders (a ``resolve``
    line's) filled in."""
    argv = shlex.split(filled(line))
    assert argv[0] == PROG
    return cli(capsys, *argv[1:])


def resolutions(lines: list[str]) -> list[str]:
    return [shlex.split(line)[shlex.split(line).index("--as") + 1] for line in lines]


@JOURNAL_ROTATION
def test_status_points_at_show_which_judges_the_intent_against_the_store_its_record_names(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status`` prints a ``show`` line; run as printed, it opens the store the intent's
    record names (as its kind, as its user), judges the batch missing and offers ``replay``
    and ``abandon`` only, each as a complete line naming that store."""
    intent_id = deployment.failed(Fault.REJECT)
    code, out = cli(capsys, "status", *deployment.args())
    assert code == 1, out
    [show] = printed(out, "show")
    code, shown = as_printed(capsys, show)
    assert code == 0, shown
    assert "named by the intent's record" in shown, shown
    assert "not read" not in shown, shown
    code, out = cli(capsys, "show", intent_id, *deployment.args(), "--json")
    found = orjson.loads(out)
    assert found["store"]["from"] == "the intent's record"
    assert found["store_now"]["outcome"] == "unchanged"
    assert found["resolutions"]["committed"].startswith("refused")
    offered = printed(shown, "resolve")
    assert resolutions(offered) == ["replay", "abandon"]
    assert all("--store" in shlex.split(line) for line in offered)


@JOURNAL_ROTATION
@pytest.mark.parametrize("choice", ["replay", "abandon"])
def test_each_resolution_show_offers_for_a_missing_batch_runs_as_printed(
    deployment: Deployment, capsys: pytest.CaptureFixture[str], choice: str
) -> None:
    """The ``resolve`` line ``show`` prints for ``replay`` (or ``abandon``), run as printed,
    appends the batch once (or leaves the history as it was), and the next run goes on."""
    intent_id = deployment.failed(Fault.REJECT)
    code, shown = cli(capsys, "show", intent_id, *deployment.args())
    assert code == 0, shown
    [line] = [line for line in printed(shown, "resolve") if resolutions([line]) == [choice]]
    code, done = as_printed(capsys, line)
    assert code == 0, done
    assert cli(capsys, "status", *deployment.args())[0] == 0
    deployment.next_run()
    stored = [f"user:pay 5 {SECRET}"] if choice == "replay" else []
    assert deployment.history() == [*stored, "user:next", "assistant:ok"]


@JOURNAL_ROTATION
def test_committed_show_offers_for_a_stored_batch_runs_as_printed(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write whose reply was lost, not reconciled yet: ``show`` finds the batch in the
    store, offers ``committed`` (``replay`` is refused), and the line run as printed settles
    it without writing."""
    intent_id = deployment.failed(Fault.LOST_ACK, deny=False)
    code, shown = cli(capsys, "show", intent_id, *deployment.args())
    assert code == 0, shown
    assert "named by the intent's record" in shown, shown
    offered = printed(shown, "resolve")
    assert resolutions(offered) == ["committed", "abandon"]
    code, done = as_printed(capsys, offered[0])
    assert code == 0 and "committed -> settled" in done, done
    assert deployment.history() == [f"user:pay 5 {SECRET}"]


@JOURNAL_ROTATION
def test_committed_of_a_batch_the_store_shows_missing_is_refused_unless_overridden(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--store``, ``resolve --as committed`` still judges the intent against the
    store its record names: the batch is missing, so it is refused (exit 1, nothing written,
    the intent pending as it was); with ``--override`` it is settled, the override kept in
    the trail."""
    intent_id = deployment.failed(Fault.REJECT)
    resolve = ["resolve", intent_id, "--as", "committed", "--reason", "r", *deployment.args()]
    code, out = cli(capsys, *resolve, "--json")
    assert code == 1, out
    refused = orjson.loads(out)
    assert refused["kind"] == "ResolutionRefused" and "missing" in refused["error"]
    code, out = cli(capsys, "status", *deployment.args(), "--json")
    assert [i["intent_id"] for i in orjson.loads(out)["pending"]] == [intent_id]
    code, out = cli(capsys, *resolve, "--override")
    assert code == 0, out
    code, out = cli(capsys, "trail", SESSION, *deployment.args(), "--json")
    last = orjson.loads(out)["decisions"][-1]
    assert last["evidence"]["judged"] == "unchanged" and last["evidence"]["override"] is True
    assert deployment.history() == []


@pytest.mark.parametrize("journal_backend", JOURNALS[:1], indirect=False)
def test_a_resolution_made_without_reading_the_store_says_so(
    journal_backend: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the store the record names cannot be opened (its file is gone), ``resolve``
    says that the store was not read and that nothing was judged (on stderr, and under
    ``store`` in ``--json``), and ``replay`` is refused for want of it."""
    [sdk] = [p.values[0] for p in STORES if p.values[0].name == "sqlite"]
    deployment = Deployment(journal_backend, sdk, tmp_path)
    intent_id = deployment.failed(Fault.REJECT)
    (tmp_path / "chat.db").rename(tmp_path / "moved.db")
    base = ["resolve", intent_id, "--reason", "r", *deployment.args()]
    code, out = cli(capsys, *base, "--as", "replay")
    assert code == 1 and "--store" in out, out
    code, out = cli(capsys, *base, "--as", "committed")
    assert code == 0, out
    assert "the store was not read" in out and "nothing was judged" in out, out


# -- each part on its own ---------------------------------------------------------------------

STORE_BACKENDS = [p for p in registered("store")]


@pytest.mark.parametrize("backend", STORE_BACKENDS)
def test_every_registered_store_is_found_by_the_kind_its_identity_records(backend: Any) -> None:
    """The kind ``derive_identity`` records for each registered revisioned store (its public
    name, not the module path it is registered under) leads back to that backend, and
    ``store_for`` opens a store of that class at such an address."""
    if not backend.available():
        pytest.skip(f"{backend.name}: no driver")
    cls = backend.store_class()
    kind = f"{cls.__module__}.{cls.__qualname__}"
    assert kind == f"agents_reconcile.{cls.__qualname__}"
    assert backend in backends_storing(kind)
    if not backend.durable:
        with pytest.raises(Exception, match="in memory"):
            store_for(kind, "memory://x", SESSION)
        return
    where = {
        "sqlite": "sqlite:////tmp/agents-reconcile-kind-test.db",
        "redis": "redis://127.0.0.1:6390/0",
        "redis-cluster": "redis+cluster://127.0.0.1:7101",
        "postgres": "postgresql://app@127.0.0.1:5440/chat",
    }[backend.name]
    store = store_for(kind, where, SESSION)
    assert isinstance(store, cls)
    assert derive_identity(store).kind == kind
    asyncio.run(close_operator_store(store))


def test_a_cluster_store_is_not_refused_for_sharing_its_class_with_a_single_server() -> None:
    """The Redis server and the Redis Cluster backends register the same store class: an
    intent of that kind at a cluster address is opened as a cluster store, at a server's as
    a server's, and an address of neither (PostgreSQL) is refused naming both."""
    pytest.importorskip("redis")
    kind = "agents_reconcile.RevisionedRedisSession"
    assert {b.name for b in backends_storing(kind)} == {"redis", "redis-cluster"}
    for where in ("redis://127.0.0.1:6390/0", "redis+cluster://127.0.0.1:7101"):
        store = store_for(kind, where, SESSION, namespace="p")
        assert derive_identity(store).kind == kind
        asyncio.run(close_operator_store(store))
    with pytest.raises(Exception, match="redis or redis-cluster store"):
        store_for(kind, "postgresql://app@127.0.0.1:5440/chat", SESSION)


def test_a_postgres_stores_record_keeps_its_user_name_and_never_its_password() -> None:
    """A PostgreSQL store reached as ``app`` (with a password) is recorded with the user
    beside its identity, outside the identity's equality: the record holds ``app`` and not
    the password, reads back with it, and the store address ``show`` prints connects as
    ``app``; a run's context (the RunState copy) holds neither. The same store reached as
    another user has the same identity."""
    pytest.importorskip("asyncpg")
    store = (
        backend_named("postgres")
        .store_class()
        .from_url(SESSION, "postgresql://app:s3cret-pw@db.example:5432/chat?sslmode=disable")
    )
    identity = derive_identity(store)
    assert identity.user == "app" and "app" not in str(identity)
    other = (
        backend_named("postgres")
        .store_class()
        .from_url(SESSION, "postgresql://reader@db.example:5432/chat")
    )
    assert derive_identity(other) == identity, "the user says how, not which store"
    intent = PendingWrite.decode(make_intent("i1", backend=identity).encode())
    record = make_intent("i1", backend=identity).encode()
    assert b'"backend_user":"app"' in record and b"s3cret" not in record
    assert intent.backend.user == "app"
    from agents_reconcile._session import runstate

    carried: dict[str, Any] = {}
    runstate.put(carried, make_intent("i1", backend=identity))
    assert b"app" not in orjson.dumps(carried), "a run's context names its backend opaquely"
    assert recorded_store(intent.backend) == (
        "postgresql://app@db.example:5432/chat",
        "agents_reconcile_store",
    )
    given = (
        backend_named("postgres")
        .store_class()
        .from_url(SESSION, "postgresql://db.example:5432/chat", user="app")
    )
    assert derive_identity(given).user == "app"
    unnamed = BackendIdentity(identity.kind, identity.namespace)
    assert recorded_store(unnamed) == (
        "postgresql://db.example:5432/chat",
        "agents_reconcile_store",
    )


def test_a_record_without_a_user_reads_as_before() -> None:
    """A record written before users were kept (none in it) decodes with no user, and an
    identity without one adds nothing to the record."""
    plain = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/chat.db")
    record = make_intent("i2", backend=plain).encode()
    assert b"backend_user" not in record
    assert PendingWrite.decode(record).backend.user is None


def test_no_registered_store_is_left_out_of_the_operator_suites() -> None:
    """Every durable revisioned store of the registry (and the SDK's SQLiteSession) is a
    store kind these tests run over."""
    durable = {f"revisioned_{b.name}" for b in BACKENDS if b.store is not None and b.durable}
    assert {p.values[0].name for p in STORES} == {"sqlite", *durable}
