"""``RevisionedPostgresSession`` against a real PostgreSQL server: what the conformance suite
cannot see. One round trip per conditional append; one winner among racing pools; its
schema's migrations; a backend terminated in the middle of an append; and the wrapper
settling a store's writes by their ids. A newer schema, migrating on demand, closing and a
second event loop are in ``test_store_conformance.py``."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile import Action, Outcome, Reason, ReconcileConfig, ReconcilingSession
from agents_reconcile._core.identity import derive_identity
from agents_reconcile._core.revision import is_revisioned
from agents_reconcile.errors import (
    ConfigurationError,
    ReconcileError,
    RevisionConflict,
    SchemaMismatch,
)
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.servers import Wire, postgres_url

asyncpg = pytest.importorskip("asyncpg")

from agents_reconcile._backends.postgres.store import (  # noqa: E402
    SCHEMA_VERSION,
    RevisionedPostgresSession,
    migration_steps,
)

pytestmark = pytest.mark.postgres

USER = {"role": "user", "content": "hi"}


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


class Place:
    """A schema of its own on the test server, and what was opened on it (closed after)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.schema = f"t{uuid.uuid4().hex[:16]}"
        self.stores: list[RevisionedPostgresSession] = []
        self.pools: list[Any] = []
        self.connections: list[Any] = []

    def store(self, session_id: str = "s", **options: Any) -> RevisionedPostgresSession:
        store = RevisionedPostgresSession.from_url(
            session_id, self.url, schema=self.schema, **options
        )
        self.stores.append(store)
        return store

    async def pool(self, **options: Any) -> Any:
        options.setdefault("min_size", 1)
        options.setdefault("max_size", 2)
        pool = await asyncpg.create_pool(self.url, **options)
        self.pools.append(pool)
        return pool

    async def on_own_pool(self, session_id: str = "s", **options: Any) -> Any:
        """A store on a pool of its own: another worker, as far as the server can tell."""
        migrate = options.pop("migrate", True)
        pool = await self.pool(**options)
        store = RevisionedPostgresSession(session_id, pool, schema=self.schema, migrate=migrate)
        self.stores.append(store)
        return store

    async def connect(self) -> Any:
        conn = await asyncpg.connect(self.url)
        self.connections.append(conn)
        return conn

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        conn = await asyncpg.connect(self.url)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    async def schema_exists(self) -> bool:
        rows = await self.fetch("SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema)
        return bool(rows)

    def table(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    async def cleanup(self) -> None:
        for conn in self.connections:
            conn.terminate()
        for store in self.stores:
            await store.close()
        for pool in self.pools:
            pool.terminate()
        await self.fetch(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


@pytest.fixture
async def place() -> AsyncIterator[Place]:
    found = Place(postgres_url())
    try:
        yield found
    finally:
        await found.cleanup()


async def state_of(store: RevisionedPostgresSession, write_id: str) -> tuple[Any, ...]:
    return (
        await store.head(),
        await store.get_items(),
        await store.find_write(write_id),
        [w.revision for w in await store.writes_after(0, limit=1000)],
    )


def whole_or_absent(
    state: tuple[Any, ...], *, head_before: int, items_before: list[Any], batch: list[Any]
) -> bool:
    """Whether a write of ``batch`` against ``head_before`` is either entirely in the store
    (head, items, record) or entirely absent."""
    head, items, found, revisions = state
    absent = (head, items, found) == (head_before, items_before, None)
    whole = (
        head == head_before + 1
        and items == items_before + batch
        and found is not None
        and found.revision == head
        and found.count == len(batch)
    )
    return (absent or whole) and revisions == list(range(1, head + 1))


# -- round trips -------------------------------------------------------------------------


async def test_append_if_is_one_statement_in_one_round_trip(place: Place) -> None:
    """A conditional append is one prepared statement in one request; a refused one reads the head
    once more."""
    wire = Wire()
    store = place.store("rt", init=wire.attach, min_size=1, max_size=1)
    await store.add_items([item("a")])  # schema, session row, statements prepared
    await store.append_if([item("b")], expected=1, write_id="warm", writer="me")
    await wire.settled()

    wire.clear()
    revision = await store.append_if(
        [item("c"), item("d", "assistant")], expected=2, write_id="w", writer="me"
    )
    await wire.settled()
    assert revision == 3
    assert len(wire.statements) == 1 and wire.statements[0].startswith("WITH head AS")
    assert wire.flushes == 1, "a prepared CTE, bound and executed in one request"

    wire.clear()
    with pytest.raises(RevisionConflict) as conflict:
        await store.append_if([item("e")], expected=2, write_id="late", writer="me")
    await wire.settled()
    assert (conflict.value.expected, conflict.value.actual) == (2, 3)
    assert len(wire.statements) == 2, "the refused append, then the head read for `actual`"

    wire.clear()
    await store.add_items([item("f")])
    await wire.settled()
    assert (len(wire.statements), wire.flushes) == (1, 1)
    assert await store.get_items() == [item(t) for t in "abc"] + [
        item("d", "assistant"),
        item("f"),
    ]


async def test_a_pool_passed_in_is_used_and_left_open(place: Place) -> None:
    """A store built on the caller's pool uses it and leaves it open when closed."""
    pool = await place.pool()
    store = RevisionedPostgresSession("mine", pool, schema=place.schema)
    await store.add_items([item("a")])
    await store.close()
    assert await pool.fetchval("SELECT 1") == 1
    assert await store.get_items() == [item("a")]


# -- concurrency -------------------------------------------------------------------------


async def test_racing_appends_from_separate_pools_commit_exactly_one(place: Place) -> None:
    """Workers on pools of their own appending against one head: exactly one wins each round, with
    its items."""
    workers = [await place.on_own_pool("race", max_size=1) for _ in range(8)]
    await workers[0].migrate()
    for round_number in range(6):
        head = await workers[0].head()

        async def attempt(index: int, store: Any, head: int = head, n: int = round_number) -> Any:
            try:
                return await store.append_if(
                    [item(f"r{n}-w{index}")], expected=head, write_id=f"r{n}-w{index}", writer=""
                )
            except RevisionConflict as conflict:
                return conflict

        results = await asyncio.gather(*(attempt(i, s) for i, s in enumerate(workers)))
        winners = [r for r in results if not isinstance(r, RevisionConflict)]
        assert winners == [head + 1]
        for lost in (r for r in results if isinstance(r, RevisionConflict)):
            assert (lost.expected, lost.actual) == (head, head + 1)
    items = await workers[3].get_items()
    assert len(items) == 6
    writes = await workers[5].writes_after(0)
    assert [w.revision for w in writes] == [1, 2, 3, 4, 5, 6]
    for write, stored in zip(writes, items, strict=True):
        assert stored == item(write.write_id), "each item belongs to the write recorded"


async def test_concurrent_adds_and_pops_keep_one_gapless_history(place: Place) -> None:
    """Concurrent adds and pops from many pools leave one gapless history of revisions and items."""
    workers = [await place.on_own_pool("mix", max_size=1) for _ in range(6)]
    await workers[0].migrate()

    async def work(index: int, store: Any) -> int:
        popped = 0
        for n in range(8):
            await store.add_items([item(f"w{index}-{n}-a"), item(f"w{index}-{n}-b")])
            if n % 3 == 2 and await store.pop_item() is not None:
                popped += 1
        return popped

    popped = sum(await asyncio.gather(*(work(i, s) for i, s in enumerate(workers))))
    head = await workers[0].head()
    writes = await workers[0].writes_after(0, limit=1000)
    assert head == 6 * 8 + popped
    assert [w.revision for w in writes] == list(range(1, head + 1))
    assert sum(1 for w in writes if w.kind == "pop") == popped
    items = await workers[1].get_items()
    assert len(items) == 6 * 8 * 2 - popped
    for index in range(6):
        mine = [i["content"] for i in items if i["content"].startswith(f"w{index}-")]
        assert mine == sorted(mine, key=lambda c: (int(c.split("-")[1]), c)), "order kept"
    seqs = await place.fetch(f"SELECT seq FROM {place.table('items')} ORDER BY seq")
    assert len({row[0] for row in seqs}) == len(items)


async def test_pop_and_clear_wait_for_an_append_in_progress_and_see_its_items(
    place: Place,
) -> None:
    """Another worker's append holds the session row, its items not yet committed; a pop or a
    clear started meanwhile must act on the history as it is once that append commits."""
    name = f"waiter-{uuid.uuid4().hex[:8]}"
    store = await place.on_own_pool("p", max_size=1, server_settings={"application_name": name})
    await store.add_items([item("old")])
    other, admin = await place.connect(), await place.connect()
    for operation in ("pop", "clear"):
        transaction = other.transaction()
        await transaction.start()
        # The store's own append statement, run by another worker that has not committed.
        await other.fetchval(
            store._sql.append, "p", ['{"role":"user","content":"new"}'], operation, "w", 0.0
        )
        task = asyncio.ensure_future(
            store.pop_item() if operation == "pop" else store.clear_session()
        )
        await lock_waiter(admin, name)
        await transaction.commit()
        result = await task
        if operation == "pop":
            assert result == item("new"), "the newest item once the append committed"
            assert await store.get_items() == [item("old")]
        else:
            assert await store.get_items() == []
    writes = await store.writes_after(0)
    assert [(w.kind, w.count) for w in writes] == [
        ("append", 1),
        ("append", 1),
        ("pop", 1),
        ("append", 1),
        ("clear", 2),
    ]


# -- schema ------------------------------------------------------------------------------


async def test_first_use_creates_the_schema_and_check_reports_it(place: Place) -> None:
    """check() creates nothing; the first use creates the schema, which check() then finds
    current."""
    store = place.store("s")
    problem = await store.check()
    assert problem is not None and "no revisioned-store schema" in problem
    assert not await place.schema_exists(), "check() creates nothing"

    await store.add_items([item("a")])
    assert await place.schema_exists()
    assert await store.check() is None
    assert await store.migrate() == []
    rows = await place.fetch(f"SELECT version, name FROM {place.table('store_schema_version')}")
    assert [tuple(r) for r in rows] == [(1, "0001_initial")]
    assert SCHEMA_VERSION == len(migration_steps()) == 1


async def test_workers_starting_together_apply_each_step_once(place: Place) -> None:
    """Workers migrating, or first using, one schema at once apply each step exactly once."""
    workers = [await place.on_own_pool(f"s{i}", max_size=1) for i in range(6)]
    applied = await asyncio.gather(*(w.migrate() for w in workers))
    assert sorted(applied) == [[]] * 5 + [["revisioned store schema 1"]]
    # And on first use (auto-migration) from fresh pools on a fresh schema.
    other = Place(place.url)
    try:
        starters = [await other.on_own_pool(f"s{i}", max_size=1) for i in range(6)]
        await asyncio.gather(*(w.add_items([item(f"{i}")]) for i, w in enumerate(starters)))
        rows = await other.fetch(f"SELECT version FROM {other.table('store_schema_version')}")
        assert [r[0] for r in rows] == [1]
    finally:
        await other.cleanup()


async def test_the_schema_can_hold_another_components_schema_version(place: Place) -> None:
    """The intent journal keeps its own ``schema_version`` table in the same default schema;
    the store's version table is its own, so neither mistakes the other's steps."""
    await place.fetch(f'CREATE SCHEMA "{place.schema}"')
    await place.fetch(
        f"CREATE TABLE {place.table('schema_version')} (version integer PRIMARY KEY, name text)"
    )
    await place.fetch(f"INSERT INTO {place.table('schema_version')} VALUES (1, 'journal')")
    store = place.store("s")
    assert (await store.check() or "").endswith("run `agents-reconcile migrate`")
    await store.add_items([item("a")])
    assert await store.check() is None
    assert await store.get_items() == [item("a")]


async def test_a_session_row_deleted_behind_the_stores_back_is_made_again(place: Place) -> None:
    """A session row deleted behind the store's back is made again by the next write."""
    store = place.store("gone")
    await store.add_items([item("a")])
    for table in ("items", "writes", "sessions"):
        await place.fetch(f"DELETE FROM {place.table(table)} WHERE session_id = 'gone'")
    assert await store.append_if([item("b")], expected=0, write_id="w", writer="me") == 1
    await store.clear_session()
    assert [w.kind for w in await store.writes_after(0)] == ["append", "clear"]


async def test_get_items_with_a_limit_reads_the_tail_through_the_primary_key(
    place: Place,
) -> None:
    """A limited read walks the items' primary key backwards instead of reading the whole
    session."""
    store = place.store("long")
    await store.add_items([item(str(n)) for n in range(3000)])
    assert await store.get_items(limit=2) == [item("2998"), item("2999")]
    await place.fetch(f"ANALYZE {place.table('items')}")
    plan = await place.fetch(
        f"EXPLAIN SELECT item FROM {place.table('items')} WHERE session_id = 'long'"
        " ORDER BY seq DESC LIMIT 2"
    )
    text = "\n".join(row[0] for row in plan)
    assert "Index Scan Backward using items_pkey" in text, text


# -- a backend terminated mid-append -------------------------------------------------------


async def lock_waiter(admin: Any, application_name: str) -> int:
    """The pid of the backend named ``application_name`` once it waits on a lock."""
    for _ in range(500):
        pid = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1"
            " AND wait_event_type = 'Lock'",
            application_name,
        )
        if pid is not None:
            return int(pid)
        await asyncio.sleep(0.01)
    raise AssertionError("the append never waited on the lock")


async def test_a_terminated_backend_mid_append_raises_the_drivers_error(place: Place) -> None:
    """An append whose backend is terminated raises the driver's own error and writes all or
    nothing."""
    name = f"victim-{uuid.uuid4().hex[:8]}"
    store = await place.on_own_pool("k", max_size=1, server_settings={"application_name": name})
    await store.add_items([item("a")])
    holder, admin = await place.connect(), await place.connect()
    batch = [item("b"), item("c")]

    transaction = holder.transaction()
    await transaction.start()
    await holder.execute(
        f"SELECT 1 FROM {place.table('sessions')} WHERE session_id = 'k' FOR UPDATE"
    )
    append = asyncio.ensure_future(
        store.append_if(batch, expected=1, write_id="victim", writer="me")
    )
    pid = await lock_waiter(admin, name)
    assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    with pytest.raises(Exception) as raised:
        await append
    await transaction.rollback()

    error = raised.value
    assert not isinstance(error, ReconcileError), "the driver's own exception, untranslated"
    assert isinstance(
        error, asyncpg.PostgresError | asyncpg.InterfaceError | ConnectionError | OSError
    ), repr(error)
    state = await state_of(store, "victim")
    assert whole_or_absent(state, head_before=1, items_before=[item("a")], batch=batch)
    assert state[2] is None, "killed while waiting for the lock: nothing was written"
    # The same write, by the same id, goes through once the store is reachable again.
    assert await store.append_if(batch, expected=1, write_id="victim", writer="me") == 2


async def test_a_dropped_connection_the_pool_hands_out_again_never_surfaces_as_internal(
    place: Place,
) -> None:
    """Backends terminated over and over under a store: its reads and writes succeed or raise
    the driver's connection-loss error, never its internal "another operation is in progress"
    (which the driver's pool raises on a connection the server ended); a read is made again
    once on a new connection."""
    name = f"dropped-{uuid.uuid4().hex[:8]}"
    store = await place.on_own_pool("d", max_size=2, server_settings={"application_name": name})
    await store.add_items([item("a")])
    admin = await place.connect()
    stop = asyncio.Event()

    async def terminate() -> None:
        rounds = 0
        while not stop.is_set() and rounds < 2000:
            rounds += 1
            await asyncio.sleep(0.003)
            await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = $1",
                name,
            )

    killer = asyncio.ensure_future(terminate())
    raised: dict[str, int] = {}
    try:
        for index in range(400):
            try:
                if index % 4 == 3:
                    await store.add_items([item(f"x{index}")])
                else:
                    await store.head()
                    await store.find_write("none")
            except Exception as exc:
                raised[type(exc).__name__] = raised.get(type(exc).__name__, 0) + 1
    finally:
        stop.set()
        await killer
    assert "InternalClientError" not in raised, raised
    assert set(raised) <= {"ConnectionDoesNotExistError", "ConnectionResetError"}, raised


async def test_a_backend_terminated_around_its_commit_leaves_all_or_nothing(
    place: Place,
) -> None:
    """The lock is released and the appending backend terminated at nearly the same moment,
    at a different distance each time: whichever wins, the write is whole or absent."""
    name = f"victim-{uuid.uuid4().hex[:8]}"
    observer = await place.on_own_pool("c")
    await observer.add_items([item("start")])
    holder, admin = await place.connect(), await place.connect()
    outcomes: set[str] = set()
    for attempt in range(16):
        # A fresh worker each time: the last one's connection was terminated.
        store = await place.on_own_pool(
            "c", max_size=1, server_settings={"application_name": f"{name}-{attempt}"}
        )
        head = await observer.head()
        before = await observer.get_items()
        batch = [item(f"{attempt}-x"), item(f"{attempt}-y")]
        write_id = f"w{attempt}"
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute(
            f"SELECT 1 FROM {place.table('sessions')} WHERE session_id = 'c' FOR UPDATE"
        )
        append = asyncio.ensure_future(
            store.append_if(batch, expected=head, write_id=write_id, writer="me")
        )
        pid = await lock_waiter(admin, f"{name}-{attempt}")
        await transaction.rollback()
        await asyncio.sleep(attempt * 0.0005)
        await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        try:
            await append
        except RevisionConflict:
            raise
        except Exception as exc:
            assert not isinstance(exc, ReconcileError)
            outcomes.add("raised")
        else:
            outcomes.add("acknowledged")
            assert (await observer.find_write(write_id)) is not None
        state = await state_of(observer, write_id)
        assert whole_or_absent(state, head_before=head, items_before=before, batch=batch)
    assert outcomes, "every attempt ended one way or the other"


# -- the wrapper on top ------------------------------------------------------------------


def reconciling(store: Any, tmp_path: Path) -> tuple[ReconcilingSession, Any]:
    faulty = FaultInjectingSession(store)
    assert is_revisioned(faulty)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "j.db"))
    return session, faulty


async def test_a_lost_acknowledgement_is_settled_by_the_write_id(
    place: Place, tmp_path: Path
) -> None:
    """A lost acknowledgement under the wrapper is settled as committed by the store's record of
    the write id."""
    store = place.store("lost")
    session, faulty = reconciling(store, tmp_path)
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    decisions = await session.reconcile()
    assert [(d.outcome, d.reason, d.action) for d in decisions] == [
        (Outcome.COMMITTED, Reason.WRITE_FOUND, Action.SETTLED)
    ]
    assert await store.get_items() == [USER]
    assert [w.write_id for w in await store.writes_after(0)] == [decisions[0].intent_id]


async def test_a_rejected_write_is_replayed_once(place: Place, tmp_path: Path) -> None:
    """A rejected write under the wrapper is found absent and replayed once."""
    store = place.store("rejected")
    session, faulty = reconciling(store, tmp_path)
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    assert await store.head() == 0
    decisions = await session.reconcile()
    assert [(d.outcome, d.reason, d.action) for d in decisions] == [
        (Outcome.UNCHANGED, Reason.WRITE_ABSENT, Action.REPLAYED)
    ]
    assert await store.get_items() == [USER]
    writes = await store.writes_after(0)
    assert [(w.revision, w.write_id) for w in writes] == [(1, decisions[0].intent_id)]
    assert await session.reconcile() == []


# -- identity, pools, configuration ------------------------------------------------------


async def test_the_namespace_and_messages_carry_no_credentials(place: Place) -> None:
    """The store's namespace keeps only where the database is, and no message carries the user or
    password."""
    base = place.url.split("://", 1)[1].rpartition("@")[2]
    url = f"postgresql://postgres:hunter2@{base}?password=hunter2&sslmode=disable"
    store = RevisionedPostgresSession.from_url("s", url, schema=place.schema, migrate=False)
    place.stores.append(store)
    assert store.backend_namespace == (
        f"postgresql://{base.partition('?')[0].lower()};schema={place.schema}"
    )
    assert derive_identity(ReconcilingSession(FaultInjectingSession(store))).namespace == (
        store.backend_namespace
    )
    with pytest.raises(SchemaMismatch) as refused:
        await store.head()
    problem = await store.check()
    for text in (repr(store), store.backend_namespace, str(refused.value), problem or ""):
        assert "hunter2" not in text and "postgres:" not in text


async def test_objects_from_one_url_share_a_pool_until_the_last_closes(place: Place) -> None:
    """Stores of one URL and options share one pool, closed by the last of them, and reopen when
    used."""
    name = f"shared-{uuid.uuid4().hex[:8]}"
    options = {"max_size": 1, "server_settings": {"application_name": name}}
    one, two = place.store("a", **options), place.store("b", **options)

    async def backends() -> int:
        rows = await place.fetch(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name
        )
        return int(rows[0][0])

    await one.add_items([item("a")])
    await two.add_items([item("b")])
    assert await backends() == 1
    await one.close()
    assert await two.get_items() == [item("b")]
    assert await backends() == 1
    await two.close()
    for _ in range(200):
        if await backends() == 0:
            break
        await asyncio.sleep(0.01)
    assert await backends() == 0
    # A closed object opens again when used.
    assert await one.get_items() == [item("a")]


def test_bad_configuration_is_refused_before_connecting() -> None:
    """A non-PostgreSQL URL or a bad schema name is refused before anything connects."""
    with pytest.raises(ConfigurationError):
        RevisionedPostgresSession.from_url("s", "mysql://localhost/db")
    for schema in ("1abc", "a-b", 'x"y', "pg_mine", "a" * 64):
        with pytest.raises(ConfigurationError):
            RevisionedPostgresSession.from_url("s", "postgresql://localhost/db", schema=schema)


def test_without_asyncpg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without asyncpg the error names the extra to install."""
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    with pytest.raises(ConfigurationError, match=r"agents-reconcile\[postgres\]"):
        RevisionedPostgresSession.from_url("s", "postgresql://localhost/db")
