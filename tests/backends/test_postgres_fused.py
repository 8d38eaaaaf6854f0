"""A PostgreSQL journal and a revisioned PostgreSQL store in one database: the intent (with the
clearing of the previous one) and the compare-and-swap append in one statement, with the same
outcomes as the two-step way: one round trip per append, refusals that record nothing, a reply
lost after the commit or a connection lost before it leaving both or neither, writes between
the statement's snapshot and its locks, and many wrappers and sessions at once."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from agents import Agent, Runner
from agents.run_context import RunContextWrapper
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.fused import FailedAppend
from agents_reconcile._backends.journal import IntentState, Opened
from agents_reconcile._backends.store_items import encode_item
from agents_reconcile._core.identity import derive_identity
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action, Outcome, PendingWrite, Reason
from agents_reconcile._core.retention import Retention
from agents_reconcile._session.fused import FusedAppend, fused_append
from agents_reconcile.errors import (
    ContinuationDenied,
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
)
from agents_reconcile.testing import FaultInjectingSession, FaultProxy

from ..support.fused_support import killed_child, left_both_or_neither, text
from ..support.journal_support import (
    BACKEND,
    OTHER_BACKEND,
    STRANGER,
    make_decision,
    make_intent,
    proxy_to,
)
from ..support.servers import Wire, postgres_url

asyncpg = pytest.importorskip("asyncpg")

from agents_reconcile._backends.postgres import fused as pg_fused  # noqa: E402
from agents_reconcile._backends.postgres.journal import PostgresJournal  # noqa: E402
from agents_reconcile._backends.postgres.statements import intent_args  # noqa: E402
from agents_reconcile._backends.postgres.store import RevisionedPostgresSession  # noqa: E402

pytestmark = pytest.mark.postgres

WAIT = 5.0


class Place:
    """A journal schema and a store schema of their own in the test database."""

    def __init__(self, url: str) -> None:
        tag = uuid.uuid4().hex[:10]
        self.url = url
        self.journal_schema, self.store_schema = f"fj{tag}", f"fs{tag}"
        self.session_id = f"chat-{tag}"
        self.journal = PostgresJournal.from_url(url, schema=self.journal_schema)
        self.opened: list[RevisionedPostgresSession] = []
        self.sessions: list[ReconcilingSession] = []

    def store(self, session_id: str | None = None) -> RevisionedPostgresSession:
        store = RevisionedPostgresSession.from_url(
            session_id or self.session_id, self.url, schema=self.store_schema
        )
        self.opened.append(store)
        return store

    def wrapped(self, inner: Any, **config: Any) -> ReconcilingSession:
        session = ReconcilingSession(inner, config=ReconcileConfig(journal=self.journal, **config))
        self.sessions.append(session)
        return session

    async def close(self) -> None:
        # Acknowledged intents are cleared now, not in the background once the schemas are
        # gone (a journal used again makes its schema anew).
        for session in self.sessions:
            with contextlib.suppress(Exception):
                await session.pending()
        admin = await asyncpg.connect(self.url)
        try:
            for schema in (self.journal_schema, self.store_schema):
                await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await admin.close()
        await self.journal.close()
        for store in self.opened:
            await store.close()


@pytest.fixture
async def place() -> AsyncIterator[Place]:
    found = Place(postgres_url())
    yield found
    await found.close()


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Every pool opened during the test (the journal's and the store's) reports here."""
    counter = Wire()
    create_pool = asyncpg.create_pool

    def counted_pool(*args: Any, **options: Any) -> Any:
        return create_pool(*args, init=counter.attach, **options)

    monkeypatch.setattr(asyncpg, "create_pool", counted_pool)
    return counter


def user(content: str) -> Any:
    return {"role": "user", "content": content}


# How the fused statement's fast path starts (the server shows only the start of a long
# statement), and how the full statement starts.
STATEMENT = 'WITH counted AS (UPDATE "{}".slots AS c SET intent_id = $1'
FULL = "WITH locked AS"


def fused_statements(wire: Wire) -> list[str]:
    fast = STATEMENT.split("{}")[0]
    return [sql for sql in wire.statements if sql.startswith((fast, FULL))]


def full_statements(wire: Wire) -> list[str]:
    return [sql for sql in wire.statements if sql.startswith(FULL)]


def store_backend(session: ReconcilingSession) -> Any:
    """The backend identity the wrapper records its intents under."""
    return derive_identity(session)


async def run(session: ReconcilingSession, prompt: str) -> None:
    agent = Agent(name="a", model=ScriptedModel([[assistant_message(f"re: {prompt}")]]))
    await Runner.run(
        agent, prompt, session=session, run_config=session.run_config(), hooks=session.hooks()
    )


async def waiting_pid(watcher: Any, marker: str, task: asyncio.Task[Any]) -> int:
    """The server process of the statement naming ``marker`` that waits on a lock."""
    for _ in range(500):
        pid = await watcher.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND position($1 in query) > 0 AND pid <> pg_backend_pid()",
            marker,
        )
        if pid is not None:
            return int(pid)
        assert not task.done(), "the statement finished without waiting"
        await asyncio.sleep(0.02)
    raise AssertionError("the statement never waited on a lock")


# -- taking the fused path ---------------------------------------------------------------------


async def test_each_append_is_one_statement_in_one_round_trip(place: Place, wire: Wire) -> None:
    """Back to back, each append (the previous intent's clearing folded in) is one statement
    sent in one request, on the journal's and the store's pools together."""
    store = place.store()
    session = place.wrapped(store)
    assert isinstance(await fused_append(place.journal, store), FusedAppend)
    for n in range(3):  # warm up: schemas, rows, statements prepared
        await session.add_items([user(f"warm {n}")])
    await session.pending()
    await wire.settled()
    wire.clear()
    appends, flushes = 10, []
    for n in range(appends):
        before = wire.flushes
        await session.add_items([user(f"{n}a"), user(f"{n}b")])
        flushes.append(wire.flushes - before)  # counted as sent, before any other task runs
    assert flushes == [1] * appends
    await wire.settled()
    assert len(fused_statements(wire)) == appends
    assert full_statements(wire) == []  # each the fast path, nothing in its way
    # Besides, at most the last intent's clearing in the background (the loop turned since).
    others = [sql for sql in wire.statements if sql not in fused_statements(wire)]
    assert len(others) <= 1, others
    assert await session.pending() == []
    assert len(text(await store.get_items())) == 3 + 2 * appends
    writes = await store.writes_after(0)
    assert [w.revision for w in writes] == list(range(1, 4 + appends))
    # Counted as the two-step way counts: opened, then cleared.
    count = await place.journal.write_count(place.session_id, store_backend(session))
    assert count == 2 * (3 + appends)


async def test_runner_turns_take_the_fused_path_only(place: Place) -> None:
    """Through the SDK's runner, every save of a turn is a fused append; the journal's own
    opening is never called, and nothing is left pending or decided."""
    calls = {"fused": 0, "open_intent": 0}
    fused, opening = pg_fused.Pair.open_and_append, place.journal.open_intent

    async def count_fused(*args: Any, **kwargs: Any) -> Any:
        calls["fused"] += 1
        return await fused(*args, **kwargs)

    async def count_open(*args: Any, **kwargs: Any) -> Any:
        calls["open_intent"] += 1
        return await opening(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pg_fused.Pair, "open_and_append", count_fused)
        patch.setattr(place.journal, "open_intent", count_open)
        store = place.store()
        session = place.wrapped(store)
        for prompt in ("one", "two"):
            await run(session, prompt)
    assert calls == {"fused": 4, "open_intent": 0}
    assert text(await store.get_items()) == ["one", "re: one", "two", "re: two"]
    assert await session.pending() == []
    assert await place.journal.decisions(session_id=place.session_id) == []


async def test_a_wrapped_store_goes_the_two_step_way(place: Place, wire: Wire) -> None:
    faulty = FaultInjectingSession(place.store())
    assert await fused_append(place.journal, faulty) is None
    session = place.wrapped(faulty)
    await run(session, "one")
    await wire.settled()
    assert fused_statements(wire) == []
    assert text(await faulty.get_items()) == ["one", "re: one"]


def spelled(
    url: str,
    *,
    host: str | None = None,
    port: int | None = None,
    path: str | None = None,
    **query: str,
) -> str:
    """``url`` with another host or port, another database, or parameters added."""
    parts = urlsplit(url)
    userinfo, at, place = parts.netloc.rpartition("@")
    name, _, number = place.rpartition(":")
    place = f"{host or name}:{port or number}"
    added = "&".join(f"{key}={value}" for key, value in query.items())
    joined = "&".join(part for part in (parts.query, added) if part)
    netloc = f"{userinfo}{at}{place}"
    return urlunsplit(parts._replace(netloc=netloc, path=path or parts.path, query=joined))


async def fuses(place: Place, journal_url: str, store_url: str, **pool: Any) -> bool:
    """Whether a journal on ``journal_url`` and a store on ``store_url`` append in one step."""
    journal = PostgresJournal.from_url(journal_url, schema=place.journal_schema)
    store = RevisionedPostgresSession.from_url(
        place.session_id, store_url, schema=place.store_schema, **pool
    )
    try:
        return await fused_append(journal, store) is not None
    finally:
        await journal.close()
        await store.close()


async def test_the_server_says_whether_journal_and_store_are_one_database(place: Place) -> None:
    """Fusion follows what the server reports of itself, not how the address is spelled: one
    URL, either spelling of the loopback host, other client options or a proxy in between
    reach one database and fuse; another database on the same server does not."""
    url = place.url
    assert await fused_append(place.journal, place.store()) is not None
    other_schema = RevisionedPostgresSession.from_url(place.session_id, url, schema="fs_other")
    place.opened.append(other_schema)
    assert await pg_fused.same_database(place.journal, other_schema)
    local, loopback = spelled(url, host="localhost"), spelled(url, host="127.0.0.1")
    assert await fuses(place, local, loopback)
    assert await fuses(place, loopback, local)
    named = spelled(url, application_name="journal-side")
    assert await fuses(place, named, spelled(url, application_name="store-side"))
    assert await fuses(place, url, url, command_timeout=3.0, max_size=2)
    target = urlsplit(url)
    proxy = await FaultProxy(target.hostname or "127.0.0.1", target.port or 0).start()
    try:
        assert await fuses(place, url, spelled(url, host="127.0.0.1", port=proxy.port))
    finally:
        await proxy.close()
    elsewhere = spelled(url, path="/postgres")
    assert not await fuses(place, url, elsewhere)
    assert not await fuses(place, elsewhere, url)


async def test_another_role_on_the_same_database_is_not_fused(place: Place) -> None:
    """A store reached as another role (its rights may differ) goes the two-step way, though
    the server and the database are the same."""
    role = f"fr{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(place.url)
    await admin.execute(f'CREATE ROLE "{role}" LOGIN SUPERUSER')
    try:
        other = place.url.replace("postgres@", f"{role}@", 1)
        assert not await fuses(place, place.url, other)
        assert await fuses(place, other, other)
    finally:
        await admin.execute(f'DROP OWNED BY "{role}" CASCADE')
        await admin.execute(f'DROP ROLE "{role}"')
        await admin.close()


async def test_the_servers_identity_is_read_once_per_pool(place: Place, wire: Wire) -> None:
    """Each pool asks its server who it is once: wrappers made later, on the same pools, decide
    fusion without a round trip; an identity read before the server started again is read
    anew on both sides rather than taken for another server."""
    journal, store = place.journal, place.store()
    assert await fused_append(journal, store) is not None
    await wire.settled()
    asked = [sql for sql in wire.statements if "pg_control_system" in sql]
    assert len(asked) == 2  # the journal's pool and the store's
    for _ in range(3):
        assert await fused_append(journal, place.store()) is not None
    await wire.settled()
    assert len([sql for sql in wire.statements if "pg_control_system" in sql]) == 2
    now = await journal.server()
    assert now is not None
    journal._db.connections.learned["server-identity"] = dataclasses.replace(
        now, started=now.started - datetime.timedelta(hours=1)
    )
    assert await fused_append(journal, store) is not None
    await wire.settled()
    assert len([sql for sql in wire.statements if "pg_control_system" in sql]) == 4
    assert await journal.server() == now


async def test_the_journal_commits_as_the_store_does_whatever_the_roles_default(
    place: Place,
) -> None:
    """A role whose default isolation is repeatable read: the journal's connections, where the
    one-step append's compare-and-swap runs, still use read committed, as the store's do (a
    losing writer meets a clean conflict, not a serialization failure); a URL that names an
    isolation of its own keeps it."""
    role = f"rr{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(place.url)
    await admin.execute(f'CREATE ROLE "{role}" LOGIN SUPERUSER')
    await admin.execute(
        f"ALTER ROLE \"{role}\" SET default_transaction_isolation = 'repeatable read'"
    )
    url = place.url.replace("postgres@", f"{role}@", 1)
    named = url + ("&" if "?" in url else "?") + "default_transaction_isolation=serializable"
    try:
        for given, expected in ((url, "read committed"), (named, "serializable")):
            journal = PostgresJournal.from_url(given, schema=place.journal_schema + "rr")
            try:
                shown = await journal._db.run(
                    lambda conn: conn.fetchval("SHOW default_transaction_isolation")
                )
            finally:
                await journal.close()
            assert shown == expected
    finally:
        await admin.execute(f'DROP OWNED BY "{role}" CASCADE')
        await admin.execute(f'DROP ROLE "{role}"')
        await admin.close()


def scans_by_table(plan: dict[str, Any]) -> dict[str, int]:
    """How many nodes of ``plan`` (EXPLAIN's JSON) read each table (its writes left out)."""
    found: dict[str, int] = {}
    nodes = [plan]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        table = node.get("Relation Name")
        if table is not None and node.get("Node Type") != "ModifyTable":
            found[table] = found.get(table, 0) + 1
    return found


async def test_the_statement_reads_each_of_the_sessions_rows_once(place: Place) -> None:
    """What the statement's snapshot shows (the count or the floor, whether the id was
    settled, the intent holding it, the clearing) is read once per statement, not once per
    use of it in the decision: each such read is a subquery of the plan's own."""
    store = place.store()
    await fused_call(place, store, intent_for(store, "first", 0))
    intent = intent_for(store, "second", 1)
    rows = await store_rows(store, [user("second")])
    row = intent_args(intent, IntentState.IN_FLIGHT, current_owner())
    args = (*row, "first", None, store.session_id, rows, 1, "me", 1.0)
    sql = pg_fused.statement(place.journal_schema, place.store_schema)

    async def explain(conn: Any) -> Any:
        return await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)

    plan = await place.journal.database.run(explain)
    root = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    scans = scans_by_table(root)
    assert scans["decisions"] == 1, scans
    assert scans["write_floor"] == 1, scans
    assert scans["writes"] == 1, scans
    # The session's slots: slot 0's lock, slot 0 in the snapshot (its count and the clearing),
    # the blocking intents, the intent holding the id, and the two updates of slot 0 (taking
    # the intent, or giving up the one cleared).
    assert scans["slots"] == 6, scans


async def test_the_fast_path_reads_and_locks_the_count_row_once_each(place: Place) -> None:
    """The fast statement reads what the snapshot shows once (each a subquery of the plan's
    own), the session's slot 0 twice (the snapshot's read and the update that locks it), and never
    the ids a unique index guards (the intent's, the store's write id): one already taken
    fails the statement whole."""
    store = place.store()
    await fused_call(place, store, intent_for(store, "first", 0))
    intent = intent_for(store, "second", 1)
    rows = await store_rows(store, [user("second")])
    row = intent_args(intent, IntentState.IN_FLIGHT, current_owner())
    args = (*row, "first", None, store.session_id, rows, 1, "me", 1.0)
    sql = pg_fused.fast_statement(place.journal_schema, place.store_schema)

    async def explain(conn: Any) -> Any:
        return await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)

    plan = await place.journal.database.run(explain)
    scans = scans_by_table((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
    assert (scans["decisions"], scans.get("writes", 0)) == (1, 0), scans
    # The session's slots: slot 0's count in the snapshot, whether any intent is recorded
    # beside, and the update of slot 0 (the clearing checked on it); no lookup of the new
    # intent's id.
    assert scans["slots"] == 3, scans


# -- refusals record nothing -------------------------------------------------------------------


def intent_for(
    store: RevisionedPostgresSession, intent_id: str, expected: int, text: str = "hello"
) -> PendingWrite:
    return dataclasses.replace(
        make_intent(intent_id, session_id=store.session_id, text=text), expected_revision=expected
    )


async def fused_call(
    place: Place,
    store: RevisionedPostgresSession,
    intent: PendingWrite,
    *,
    clearing: str | None = None,
    seen_write_count: int | None = None,
) -> Any:
    return await pg_fused.Pair(place.journal, store).open_and_append(
        intent,
        owner=current_owner(),
        clearing=clearing,
        seen_write_count=seen_write_count,
        writer="me",
        rows=await store_rows(store, [user(intent.intent_id)]),
    )


async def store_rows(store: RevisionedPostgresSession, items: list[Any]) -> list[str]:
    """``items`` as the store keeps them, its schema checked first."""
    await store.ready()
    return [encode_item(item, index).decode() for index, item in enumerate(items)]


async def test_a_pair_makes_the_store_row_again_once_it_is_gone(place: Place) -> None:
    """A pair remembers that it made the session's two rows; when the store's row is gone
    since (its schema made anew, an operator), the append makes it again and is written,
    rather than refused as if the head had moved."""
    store = place.store()
    pair = pg_fused.Pair(place.journal, store)
    owner = current_owner()
    first = await pair.append(
        intent_for(store, "first", 0),
        [user("one")],
        owner=owner,
        clearing=None,
        seen_write_count=None,
    )
    assert first.revision == 1
    admin = await asyncpg.connect(place.url)
    try:
        for table in ("items", "writes", "sessions"):
            await admin.execute(
                f'DELETE FROM "{place.store_schema}".{table} WHERE session_id = $1',
                store.session_id,
            )
    finally:
        await admin.close()
    again = await pair.append(
        intent_for(store, "again", 0),
        [user("two")],
        owner=owner,
        clearing="first",
        seen_write_count=None,
    )
    assert (again.refused, again.revision) == (None, 1), again
    assert text(await store.get_items()) == ["two"]


async def test_a_head_conflict_records_nothing_and_the_clearing_stands(place: Place) -> None:
    store, journal = place.store(), place.journal
    first = await fused_call(place, store, intent_for(store, "first", 0))
    assert first.opened == Opened(recorded=True, write_count=0) and first.revision == 1
    assert [e.intent.intent_id for e in await journal.pending(store.session_id)] == ["first"]

    late = await fused_call(place, store, intent_for(store, "late", 0), clearing="first")
    assert (late.refused, late.head, late.opened.recorded) == ("head", 1, False)
    assert late.opened.write_count == 2  # opened and cleared: the refusal counted nothing
    assert await journal.pending(store.session_id) == []
    assert await journal.write_count(store.session_id, BACKEND) == 2
    assert text(await store.get_items()) == ["first"]
    assert [w.write_id for w in await store.writes_after(0)] == ["first"]


@pytest.mark.parametrize(
    ("intent_id", "clearing", "seen", "expected"),
    [
        pytest.param("second", "first", None, 0, id="head-not-expected"),
        pytest.param("first", "first", None, 1, id="id-held"),
        pytest.param("second", None, None, 1, id="intent-in-the-way"),
        pytest.param("second", "first", 0, 1, id="count-past-the-runs"),
    ],
)
async def test_the_fast_path_writes_nothing_when_a_check_fails(
    place: Place, intent_id: str, clearing: str | None, seen: int | None, expected: int
) -> None:
    """The fast statement alone, each of its checks failing in turn: no row back (or, for an
    id already held, the statement refused whole by the store's unique index of write ids),
    and nothing written (no count moved, no intent cleared or opened, nothing appended)."""
    store, journal = place.store(), place.journal
    await fused_call(place, store, intent_for(store, "first", 0))
    intent = intent_for(store, intent_id, expected)
    rows = await store_rows(store, [user(intent_id)])
    row = intent_args(intent, IntentState.IN_FLIGHT, current_owner())
    args = (*row, clearing, seen, store.session_id, rows, expected, "me", 1.0)
    sql = pg_fused.fast_statement(place.journal_schema, place.store_schema)

    async def send(conn: Any) -> Any:
        try:
            return await conn.fetch(sql, *args)
        except asyncpg.UniqueViolationError as exc:
            return exc.constraint_name

    answer = await journal.database.run(send)
    assert answer == ("writes_write_id_key" if intent_id == "first" else [])
    assert [e.intent.intent_id for e in await journal.pending(store.session_id)] == ["first"]
    assert await journal.write_count(store.session_id, BACKEND) == 1
    assert text(await store.get_items()) == ["first"]
    assert [w.write_id for w in await store.writes_after(0)] == ["first"]


async def test_a_known_write_id_records_nothing(place: Place) -> None:
    store, journal = place.store(), place.journal
    await store.append_if([user("x")], expected=0, write_id="again", writer="someone")
    known = await fused_call(place, store, intent_for(store, "again", 1))
    assert (known.refused, known.head, known.opened.recorded) == ("known", 1, False)
    assert await journal.pending(store.session_id) == []
    assert await journal.write_count(store.session_id, BACKEND) == 0
    assert text(await store.get_items()) == ["x"]


async def test_a_count_past_the_runs_is_refused_with_nothing_written(place: Place) -> None:
    store, journal = place.store(), place.journal
    await fused_call(place, store, intent_for(store, "first", 0))
    stale = await fused_call(
        place, store, intent_for(store, "stale", 1), clearing="first", seen_write_count=1
    )
    assert (stale.refused, stale.opened) == ("stale_state", Opened(False, 2))
    assert await journal.pending(store.session_id) == []
    assert text(await store.get_items()) == ["first"]
    again = await fused_call(place, store, intent_for(store, "fresh", 1), seen_write_count=2)
    assert again.opened.recorded and again.revision == 2


async def test_an_intent_in_the_way_is_answered_as_open_intent_answers(place: Place) -> None:
    store, journal = place.store(), place.journal
    first = intent_for(store, "first", 0)
    assert (await fused_call(place, store, first)).opened.recorded
    # The same call again (its reply lost): recorded already, its revision in the store.
    retried = await fused_call(place, store, first)
    assert retried.opened == Opened(recorded=True, write_count=0) and retried.revision is None
    blocked = await fused_call(place, store, intent_for(store, "second", 1))
    assert not blocked.opened.recorded
    assert [e.intent.intent_id for e in blocked.opened.blocking] == ["first"]
    assert text(await store.get_items()) == ["first"]
    other = intent_for(store, "first", 0, text="changed")
    with pytest.raises(IntentConflict):
        await fused_call(place, store, other)
    assert await journal.write_count(store.session_id, BACKEND) == 1


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "two-step"])
async def test_another_writer_in_between_is_judged_alike(place: Place, fused: bool) -> None:
    """Another writer appends after this wrapper last saw the head: the store refuses, the
    record of writes shows an extension, and the default policy denies it, either way."""
    store = place.store()
    inner: Any = store if fused else FaultInjectingSession(store)
    session = place.wrapped(inner)
    await run(session, "one")
    await place.store().add_items([user("someone else")])
    with pytest.raises(ContinuationDenied) as denied:
        await session.add_items([user("two")])
    assert denied.value.decision.reason is Reason.EXTENDED_BY_OTHERS
    assert text(await store.get_items()) == ["one", "re: one", "someone else"]
    assert await session.pending() == []


@pytest.mark.filterwarnings("ignore::agents_reconcile.UngatedRunWarning")
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "two-step"])
async def test_a_stale_run_is_refused_with_nothing_written(place: Place, fused: bool) -> None:
    """A run's context accounts for fewer writes than the journal counted (another wrapper
    wrote since): its append is denied as stale, and nothing of it is stored."""
    store = place.store()
    session = place.wrapped(store if fused else FaultInjectingSession(store))
    context: dict[str, Any] = {}
    await session.add_items([user("one")], wrapper=RunContextWrapper(context=context))
    other = place.wrapped(place.store())
    await other.add_items([user("elsewhere")])
    await other.pending()
    with pytest.raises(ContinuationDenied) as denied:
        await session.add_items([user("stale")], wrapper=RunContextWrapper(context=context))
    assert denied.value.decision.reason is Reason.STALE_STATE
    assert text(await store.get_items()) == ["one", "elsewhere"]
    assert await session.pending() == []


# -- damaged rows -------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [None, -5], ids=["count-missing", "count-negative"])
async def test_a_session_row_without_a_count_refuses_the_append_and_writes_nothing(
    place: Place, count: int | None
) -> None:
    """A session whose journal row lost its count (no constraint of the table keeps it) is
    damaged: both statements refuse it before they write, so the append raises
    ``JournalCorrupt`` having recorded and appended nothing, never taking the damage for the
    floor nor committing on top of it."""
    store, journal = place.store(), place.journal
    await fused_call(place, store, intent_for(store, "first", 0))
    await journal.discard("first", owner=current_owner())
    admin = await asyncpg.connect(place.url)
    try:
        await admin.execute(
            f'UPDATE "{place.journal_schema}".slots SET write_count = $2'
            " WHERE session_id = $1 AND slot = 0",
            store.session_id,
            count,
        )
        with pytest.raises(JournalCorrupt):
            await fused_call(place, store, intent_for(store, "second", 1))
        row = await admin.fetchrow(
            f'SELECT write_count, intent_id FROM "{place.journal_schema}".slots'
            " WHERE session_id = $1",
            store.session_id,
        )
    finally:
        await admin.close()
    assert (row["write_count"], row["intent_id"]) == (count, None)
    assert await store.head() == 1 and text(await store.get_items()) == ["first"]


async def test_a_damaged_intent_to_clear_is_never_replaced(place: Place) -> None:
    """The acknowledged intent to clear, damaged on its slot (its state missing), is neither
    cleared nor replaced by the next intent: it is what blocks the opening, and reading it
    refuses it as damaged; the slot keeps it as it was and nothing is appended."""
    store = place.store()
    await fused_call(place, store, intent_for(store, "first", 0))
    admin = await asyncpg.connect(place.url)
    try:
        await admin.execute(
            f'UPDATE "{place.journal_schema}".slots SET state = NULL WHERE intent_id = $1',
            "first",
        )
        with pytest.raises(JournalCorrupt):
            await fused_call(place, store, intent_for(store, "second", 1), clearing="first")
        row = await admin.fetchrow(
            f'SELECT intent_id, state, write_count FROM "{place.journal_schema}".slots'
            " WHERE session_id = $1",
            store.session_id,
        )
    finally:
        await admin.close()
    assert (row["intent_id"], row["state"], row["write_count"]) == ("first", None, 1)
    assert await store.head() == 1 and text(await store.get_items()) == ["first"]


# -- lost replies and lost connections ---------------------------------------------------------


async def test_a_lost_reply_is_judged_committed(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement committed, its reply was lost: the intent is pending, its write is in
    the record of writes, and reconciling settles it as committed without writing it again."""
    original, losing = pg_fused.Pair.open_and_append, [True]

    async def lost(*args: Any, **kwargs: Any) -> Any:
        answer = await original(*args, **kwargs)
        if losing.pop():
            raise JournalUnavailable("injected: the reply was lost")
        return answer

    monkeypatch.setattr(pg_fused.Pair, "open_and_append", lost)
    store = place.store()
    session = place.wrapped(store)
    with pytest.raises(JournalUnavailable):
        await session.add_items([user("one")])
    losing.append(False)
    [pending] = await session.pending()
    [decision] = await session.reconcile()
    assert (decision.outcome, decision.action) == (Outcome.COMMITTED, Action.SETTLED)
    assert decision.intent_id == pending.intent_id
    assert text(await store.get_items()) == ["one"]
    await session.add_items([user("two")])
    assert text(await store.get_items()) == ["one", "two"]


async def test_a_connection_lost_in_the_statement_leaves_neither(place: Place) -> None:
    """The statement's server process is terminated while it waits for the store's row: the
    caller cannot know what happened; nothing did, and reconciling replays the batch once."""
    store = place.store()
    session = place.wrapped(store)
    await session.add_items([user("one")])
    admin = await asyncpg.connect(place.url)
    watcher = await asyncpg.connect(place.url)
    try:
        async with admin.transaction():
            await admin.execute(
                f'SELECT 1 FROM "{place.store_schema}".sessions WHERE session_id = $1 FOR UPDATE',
                place.session_id,
            )
            task = asyncio.create_task(session.add_items([user("two")]))
            pid = await waiting_pid(watcher, STATEMENT.format(place.journal_schema), task)
            await watcher.execute("SELECT pg_terminate_backend($1)", pid)
            with pytest.raises(JournalUnavailable):
                await asyncio.wait_for(task, 10)
    finally:
        await admin.close()
        await watcher.close()
    [pending] = await session.pending()
    entry = await place.journal.get(pending.intent_id)
    assert entry is not None and entry.state is IntentState.FAILED
    assert text(await store.get_items()) == ["one"]
    [decision] = await session.reconcile()
    assert (decision.outcome, decision.action) == (Outcome.UNCHANGED, Action.REPLAYED)
    assert text(await store.get_items()) == ["one", "two"]
    await session.add_items([user("three")])
    assert text(await store.get_items()) == ["one", "two", "three"]


async def record_failed(
    place: Place, intent: PendingWrite, *, clearing: str | None = None, owner: Any = None
) -> FailedAppend:
    return await pg_fused.record_failed(
        place.journal,
        intent,
        state=IntentState.FAILED,
        owner=owner or current_owner(),
        clearing=clearing,
    )


async def test_a_failed_statement_is_not_recorded_beside_another_unresolved_intent(
    place: Place,
) -> None:
    """The record of a statement that raised makes the statement's own check: with another
    intent of the session and backend unresolved, it records nothing (that intent refused the
    statement, which wrote nothing), so two intents never expect one revision; the intent the
    statement was to clear, in flight under its owner, is no such intent, and neither is an
    intent of another session or backend."""
    store, journal = place.store(), place.journal
    theirs = intent_for(store, "theirs", 0)
    await journal.record(theirs, state=IntentState.FAILED, owner=STRANGER)
    count = await journal.write_count(store.session_id, BACKEND)
    assert await record_failed(place, intent_for(store, "mine", 0)) is FailedAppend.REFUSED
    assert [e.intent.intent_id for e in await journal.pending(store.session_id)] == ["theirs"]
    assert await journal.get("mine") is None
    assert await journal.write_count(store.session_id, BACKEND) == count
    assert await store.get_items() == []

    elsewhere = place.store(f"{place.session_id}-elsewhere")
    other_backend = dataclasses.replace(
        intent_for(elsewhere, "other-backend", 0), backend=OTHER_BACKEND
    )
    await journal.record(other_backend, state=IntentState.FAILED, owner=STRANGER)
    assert await record_failed(place, intent_for(elsewhere, "alone", 0)) is FailedAppend.RECORDED
    entry = await journal.get("alone")
    assert entry is not None and entry.state is IntentState.FAILED

    # The acknowledged intent the statement was to clear does not block it; claimed by
    # another since, it does.
    third = place.store(f"{place.session_id}-third")
    assert (await fused_call(place, third, intent_for(third, "first", 0))).opened.recorded
    assert (
        await record_failed(place, intent_for(third, "next", 1), clearing="first")
        is FailedAppend.RECORDED
    )
    fourth = place.store(f"{place.session_id}-fourth")
    assert (await fused_call(place, fourth, intent_for(fourth, "ack", 0))).opened.recorded
    assert await journal.transition(
        "ack", state=IntentState.RECONCILING, owner=STRANGER, expect_state=IntentState.IN_FLIGHT
    )
    assert (
        await record_failed(place, intent_for(fourth, "after", 1), clearing="ack")
        is FailedAppend.REFUSED
    )


async def test_a_failed_statement_that_committed_is_moved_to_failed(place: Place) -> None:
    """The statement committed and its reply was lost: its intent, in flight, becomes failed
    (and a retry of that answers the same); one claimed or settled by another meanwhile is
    theirs; another content under the id is a conflict."""
    store, journal = place.store(), place.journal
    landed = intent_for(store, "landed", 0)
    assert (await fused_call(place, store, landed)).opened.recorded
    count = await journal.write_count(store.session_id, BACKEND)
    assert await record_failed(place, landed) is FailedAppend.RECORDED
    entry = await journal.get("landed")
    assert entry is not None and entry.state is IntentState.FAILED
    assert await record_failed(place, landed) is FailedAppend.RECORDED
    assert await journal.write_count(store.session_id, BACKEND) == count
    with pytest.raises(IntentConflict):
        await record_failed(place, intent_for(store, "landed", 0, text="changed"))

    assert await journal.transition("landed", state=IntentState.RECONCILING, owner=STRANGER)
    assert await record_failed(place, landed) is FailedAppend.TAKEN
    await journal.settle(make_decision(landed, action=Action.SETTLED))
    assert await record_failed(place, landed) is FailedAppend.TAKEN
    assert await journal.pending(store.session_id) == []


async def test_a_failed_statement_meets_an_intent_recorded_while_it_waited(place: Place) -> None:
    """The check and the record are one step under the session's lock: an intent another
    transaction records (and commits) while the record waits for the lock is seen, and the
    failed statement is not recorded beside it."""
    store, journal = place.store(), place.journal
    await journal.write_count(store.session_id, BACKEND)  # the schema made
    theirs = intent_for(store, "theirs", 0)
    admin = await asyncpg.connect(place.url)
    watcher = await asyncpg.connect(place.url)
    try:
        await fused_call(place, store, intent_for(store, "warm", 0))
        await journal.discard("warm", owner=current_owner())
        async with admin.transaction():
            await admin.execute(
                f'SELECT 1 FROM "{place.journal_schema}".slots WHERE session_id = $1 AND slot = 0'
                " FOR UPDATE",
                store.session_id,
            )
            task = asyncio.create_task(record_failed(place, intent_for(store, "mine", 1)))
            await waiting_pid(watcher, f'"{place.journal_schema}".slots', task)
            row = (theirs.intent_id, theirs.session_id, str(theirs.backend))
            owner, record = str(STRANGER), theirs.encode()
            await admin.execute(
                INSERT_INTENT.format(place.journal_schema), *row, owner, 1.0, record
            )
            await admin.execute(
                f'UPDATE "{place.journal_schema}".slots'
                " SET write_count = write_count + 1 WHERE session_id = $1 AND slot = 0",
                store.session_id,
            )
        assert await asyncio.wait_for(task, 10) is FailedAppend.REFUSED
    finally:
        await admin.close()
        await watcher.close()
    assert [e.intent.intent_id for e in await journal.pending(store.session_id)] == ["theirs"]


# The faults each append of the lone writer meets, in order: at its statement, and at the
# record of the statement when that raised. "refuse": the request does not reach the server;
# "lose": the server runs it and its reply is lost.
SCHEDULE: tuple[tuple[str | None, str | None], ...] = (
    (None, None),
    ("refuse", None),
    ("lose", "refuse"),
    (None, None),
    ("refuse", None),
    ("lose", None),
    ("lose", "lose"),
    ("refuse", "refuse"),
    ("refuse", None),
    (None, None),
)


@contextlib.asynccontextmanager
async def statements_through_a_proxy(
    place: Place, monkeypatch: pytest.MonkeyPatch, faults: list[tuple[str | None, str | None]]
) -> AsyncIterator[tuple[PostgresJournal, RevisionedPostgresSession]]:
    """A journal and a store reached through one ``FaultProxy``; each one-step append takes the
    next of ``faults`` (None: none) at its statement, and at the record of a statement that
    raised: the request the proxy passes next."""
    proxy, proxied = await proxy_to(place.url)
    journal = PostgresJournal.from_url(proxied, schema=place.journal_schema)
    store = RevisionedPostgresSession.from_url(place.session_id, proxied, schema=place.store_schema)
    statement, record = pg_fused.Pair.open_and_append, pg_fused.record_failed
    at_record: list[str | None] = []

    def arm(fault: str | None) -> None:
        if fault == "refuse":
            proxy.refuse_next_request()
        elif fault == "lose":
            proxy.lose_next_reply()

    async def at_the_statement(*args: Any, **kwargs: Any) -> Any:
        fault, later = faults.pop(0) if faults else (None, None)
        at_record[:] = [later]
        arm(fault)
        return await statement(*args, **kwargs)

    async def at_the_record(*args: Any, **kwargs: Any) -> Any:
        arm(at_record.pop() if at_record else None)
        return await record(*args, **kwargs)

    monkeypatch.setattr(pg_fused.Pair, "open_and_append", at_the_statement)
    monkeypatch.setattr(pg_fused, "record_failed", at_the_record)
    try:
        assert await fused_append(journal, store) is not None
        yield journal, store
    finally:
        await journal.close()
        await store.close()
        await proxy.close()


def fate(exc: BaseException) -> str:
    """What a failed append's notes say of its batch: ``unknown`` (pending, settled by the next
    use) or ``unwritten``."""
    notes = " ".join(getattr(exc, "__notes__", ()))
    return "unknown" if "outcome of this append is unknown" in notes else "unwritten"


async def test_a_lone_writer_whose_statements_drop_is_never_denied_its_own_writes(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone writer appending in one statement whose connection drops at the statement and at
    its record (the request lost, or the reply after the server ran it): every append either
    raised saying nothing of it was written, or its outcome was unknown and the next use
    settled it as committed or replayed it; the writer is never denied for its own writes,
    nothing is stored twice, and nothing stays pending, as with the two-step way."""
    faults = list(SCHEDULE)
    async with statements_through_a_proxy(place, monkeypatch, faults) as (journal, store):
        session = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
        fates: dict[str, str] = {}
        for number in range(len(SCHEDULE)):
            name = f"m{number}"
            try:
                await session.add_items([user(name)])
            except ContinuationDenied:
                raise
            except Exception as exc:
                fates[name] = fate(exc)
            else:
                fates[name] = "written"
        await session.reconcile()
        assert await session.pending() == []
        stored = text(await store.get_items())
        assert stored == [name for name, found in fates.items() if found != "unwritten"], fates
        assert "unknown" in fates.values(), fates  # the schedule met the uncertain window


async def test_a_statement_another_intent_refused_is_not_recorded_when_its_reply_is_lost(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that died left a failed intent this wrapper knows nothing of; this wrapper's
    statement is refused by it and the reply is lost: the append raises saying nothing of it
    was written and nothing of it is recorded, so reconciling replays the other's batch and
    denies nothing."""
    faults: list[tuple[str | None, str | None]] = [("lose", None)]
    async with statements_through_a_proxy(place, monkeypatch, faults) as (journal, store):
        session = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
        theirs = dataclasses.replace(
            intent_for(store, "theirs", 0, text="theirs"), backend=store_backend(session)
        )
        await journal.record(theirs, state=IntentState.FAILED, owner=STRANGER)
        with pytest.raises(JournalUnavailable) as raised:
            await session.add_items([user("mine")])
        assert fate(raised.value) == "unwritten" and not faults
        assert [e.intent.intent_id for e in await journal.pending(store.session_id)] == ["theirs"]
        [decision] = await session.reconcile()
        assert (decision.intent_id, decision.action) == ("theirs", Action.REPLAYED)
        assert await session.pending() == []
        assert text(await store.get_items()) == ["theirs"]
        await session.add_items([user("mine")])
        assert text(await store.get_items()) == ["theirs", "mine"]
        assert await session.pending() == []


CHILD = """
import asyncio, sys
from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core import crashpoints
from agents_reconcile._backends.postgres.journal import PostgresJournal
from agents_reconcile._backends.postgres.store import RevisionedPostgresSession

url, session_id, store_schema, journal_schema, point = sys.argv[1:6]
crashpoints.arm(crashpoints.CrashPoint(point))
store = RevisionedPostgresSession.from_url(session_id, url, schema=store_schema)
journal = PostgresJournal.from_url(url, schema=journal_schema)
session = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
asyncio.run(session.add_items([{"role": "user", "content": "one"}]))
"""


@pytest.mark.parametrize(
    ("point", "outcome"),
    [("before_intent_recorded", None), ("before_intent_cleared", Outcome.COMMITTED)],
)
async def test_sigkill_around_the_statement_leaves_both_or_neither(
    place: Place, point: str, outcome: Outcome | None
) -> None:
    await killed_child(
        CHILD, place.url, place.session_id, place.store_schema, place.journal_schema, point
    )
    store = place.store()
    await left_both_or_neither(place.wrapped(store), store, outcome)


# -- writes between the snapshot and the locks -------------------------------------------------


INSERT_INTENT = (
    'INSERT INTO "{0}".slots (intent_id, session_id, backend, slot, state, owner, created_at,'
    " updated_at, record, fence) VALUES ($1, $2, $3, (SELECT coalesce(max(slot), 0) + 1"
    " FROM \"{0}\".slots WHERE session_id = $2 AND backend = $3), 'failed', $4, $5, $5, $6, 0)"
)
"""An intent recorded beside its session's live one, as another transaction would."""


@pytest.mark.parametrize("inserted", [True, False], ids=["intent-and-count", "count-only"])
async def test_a_write_between_snapshot_and_lock_is_decided_under_the_lock(
    place: Place, inserted: bool
) -> None:
    """Another transaction holds the session's row, then records an intent (or only counts a
    write) and commits while the statement waits: the statement's snapshot is out of date, so
    it is decided again under the lock, where the intent blocks it (or it is recorded, with
    the newer count, and appended)."""
    store, journal = place.store(), place.journal
    await fused_call(place, store, intent_for(store, "first", 0))
    theirs = make_intent("theirs", session_id=store.session_id, created_at=1.0)
    admin = await asyncpg.connect(place.url)
    watcher = await asyncpg.connect(place.url)
    try:
        async with admin.transaction():
            await admin.execute(
                f'SELECT 1 FROM "{place.journal_schema}".slots WHERE session_id = $1 AND slot = 0'
                " FOR UPDATE",
                store.session_id,
            )
            task = asyncio.create_task(
                fused_call(place, store, intent_for(store, "mine", 1), clearing="first")
            )
            await waiting_pid(watcher, f'"{place.journal_schema}".slots', task)
            if inserted:
                row = (theirs.intent_id, theirs.session_id, str(theirs.backend))
                owner, record = str(current_owner()), theirs.encode()
                await admin.execute(
                    INSERT_INTENT.format(place.journal_schema), *row, owner, 1.0, record
                )
            await admin.execute(
                f'UPDATE "{place.journal_schema}".slots'
                " SET write_count = write_count + 1 WHERE session_id = $1 AND slot = 0",
                store.session_id,
            )
        answer = await asyncio.wait_for(task, 10)
    finally:
        await admin.close()
        await watcher.close()
    pending = [e.intent.intent_id for e in await journal.pending(store.session_id)]
    if inserted:
        assert not answer.opened.recorded and answer.refused is None
        assert [e.intent.intent_id for e in answer.opened.blocking] == ["theirs"]
        assert pending == ["theirs"]
        assert text(await store.get_items()) == ["first"]
        assert await journal.write_count(store.session_id, BACKEND) == 3
    else:
        assert answer.opened == Opened(recorded=True, write_count=3) and answer.revision == 2
        assert pending == ["mine"]
        assert text(await store.get_items()) == ["first", "mine"]
        assert await journal.write_count(store.session_id, BACKEND) == 4


async def test_a_head_moved_after_the_snapshot_keeps_nothing_of_the_fast_path(
    place: Place,
) -> None:
    """A write of the store alone (the journal's count untouched) moves the head while the
    fast path waits for the store's row, after it counted and cleared: nothing of it is kept,
    and the full statement refuses the append on the head, its clearing standing."""
    store, journal = place.store(), place.journal
    await fused_call(place, store, intent_for(store, "first", 0))
    admin = await asyncpg.connect(place.url)
    watcher = await asyncpg.connect(place.url)
    try:
        async with admin.transaction():
            await admin.execute(
                f'UPDATE "{place.store_schema}".sessions SET revision = revision + 1'
                " WHERE session_id = $1",
                store.session_id,
            )
            task = asyncio.create_task(
                fused_call(place, store, intent_for(store, "mine", 1), clearing="first")
            )
            await waiting_pid(watcher, STATEMENT.format(place.journal_schema), task)
        answer = await asyncio.wait_for(task, 10)
    finally:
        await admin.close()
        await watcher.close()
    assert (answer.refused, answer.head, answer.opened.recorded) == ("head", 2, False)
    assert await journal.pending(store.session_id) == []
    assert await journal.get("mine") is None
    assert text(await store.get_items()) == ["first"]
    assert await store.writes_after(1) == []
    # Opened (1), then only the full statement's clearing (2): the fast path's count is gone.
    assert await journal.write_count(store.session_id, BACKEND) == 2


async def test_a_clearing_claimed_meanwhile_is_decided_under_the_lock(place: Place) -> None:
    """The intent to clear is claimed by another (no count moves) while the statement waits
    for the session's row: the clearing finds it no longer in flight on the row's newest
    version, the statement records nothing, and under the lock the claimed intent is what
    blocks the opening."""
    store, journal = place.store(), place.journal
    await fused_call(place, store, intent_for(store, "first", 0))
    admin = await asyncpg.connect(place.url)
    watcher = await asyncpg.connect(place.url)
    try:
        async with admin.transaction():
            await admin.execute(
                f'SELECT 1 FROM "{place.journal_schema}".slots WHERE session_id = $1 AND slot = 0'
                " FOR UPDATE",
                store.session_id,
            )
            task = asyncio.create_task(
                fused_call(place, store, intent_for(store, "mine", 1), clearing="first")
            )
            await waiting_pid(watcher, STATEMENT.format(place.journal_schema), task)
            # The live intent's claim is an update of its session's slot 0: made by the
            # transaction holding it, committed while the statement waits.
            await admin.execute(
                f'UPDATE "{place.journal_schema}".intents SET state = $1, owner = $2'
                " WHERE intent_id = 'first'",
                IntentState.RECONCILING.value,
                "elsewhere#0badc0de/4242/987654",
            )
        answer = await asyncio.wait_for(task, 10)
    finally:
        await admin.close()
        await watcher.close()
    assert not answer.opened.recorded and answer.refused is None
    [held] = answer.opened.blocking
    assert (held.intent.intent_id, held.state) == ("first", IntentState.RECONCILING)
    assert [e.intent.intent_id for e in await journal.pending(store.session_id)] == ["first"]
    assert text(await store.get_items()) == ["first"]
    assert await journal.write_count(store.session_id, BACKEND) == 1


async def test_a_write_id_taken_after_the_snapshot_is_known(place: Place) -> None:
    """Another transaction records the write id while the statement runs: the statement fails
    on the id, having done nothing, and the next snapshot shows it known."""
    store, journal = place.store(), place.journal
    assert await store.head() == 0  # its schema made
    admin = await asyncpg.connect(place.url)
    watcher = await asyncpg.connect(place.url)
    try:
        async with admin.transaction():
            await admin.execute(
                f'INSERT INTO "{place.store_schema}".writes (session_id, revision, write_id,'
                " writer, kind, count, at) VALUES ($1, 7, 'taken', 'someone', 'append', 1, 0)",
                store.session_id,
            )
            task = asyncio.create_task(fused_call(place, store, intent_for(store, "taken", 0)))
            await waiting_pid(watcher, STATEMENT.format(place.journal_schema), task)
        answer = await asyncio.wait_for(task, 10)
    finally:
        await admin.close()
        await watcher.close()
    assert (answer.refused, answer.opened.recorded) == ("known", False)
    assert await journal.pending(store.session_id) == []
    assert await store.get_items() == []
    assert await journal.write_count(store.session_id, BACKEND) == 0


# -- counts pruned ------------------------------------------------------------------------------


async def test_an_append_after_its_count_was_pruned_counts_above_the_floor(place: Place) -> None:
    """A session whose idle count was pruned, though this process remembers making its row:
    its next append falls to the locked run, which makes the row again at the journal's floor
    and counts above it; a session never written opens at the floor too; every append stamps
    its session's count with the journal's clock."""
    store, journal = place.store(), place.journal
    first = await fused_call(place, store, intent_for(store, "first", 0))
    assert first.opened == Opened(recorded=True, write_count=0)
    await journal.discard("first", owner=current_owner())
    for _ in range(5):
        await journal.count_write("other", BACKEND)
    await asyncio.sleep(0.02)
    assert (await journal.retention.prune(Retention(None, None, 0))).write_counts == 2
    assert await journal.write_count(store.session_id, BACKEND) == 5  # the floor

    admin = await asyncpg.connect(place.url)
    stamp = (
        f'SELECT counted_at FROM "{place.journal_schema}".slots WHERE session_id = $1 AND slot = 0'
    )
    try:
        before = await admin.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8")
        second = await fused_call(place, store, intent_for(store, "second", 1))
        assert second.opened == Opened(recorded=True, write_count=5) and second.revision == 2
        assert await journal.write_count(store.session_id, BACKEND) == 6
        counted = await admin.fetchval(stamp, store.session_id)
        assert counted >= before
        third = await fused_call(place, store, intent_for(store, "third", 2), clearing="second")
        assert third.opened == Opened(recorded=True, write_count=7) and third.revision == 3
        assert await admin.fetchval(stamp, store.session_id) > counted
    finally:
        await admin.close()
    assert text(await store.get_items()) == ["first", "second", "third"]

    fresh = place.store(f"{place.session_id}-fresh")
    opened = await fused_call(place, fresh, intent_for(fresh, "fresh-1", 0))
    assert opened.opened == Opened(recorded=True, write_count=5) and opened.revision == 1
    assert await journal.write_count(fresh.session_id, BACKEND) == 6


# -- many at once ------------------------------------------------------------------------------


async def test_wrappers_racing_on_one_session_store_each_batch_once(place: Place) -> None:
    """Four wrappers append to one session at once, each after the others' writes: every
    batch is stored exactly once, each wrapper's in its order, and nothing stays pending."""
    wrappers, appends = 4, 6

    async def one(number: int) -> None:
        session = place.wrapped(place.store(), on_extended="append", in_flight_wait=WAIT)
        for n in range(appends):
            await session.add_items([user(f"w{number}-{n}")])
        await session.pending()

    await asyncio.wait_for(asyncio.gather(*(one(w) for w in range(wrappers))), 60)
    checker = place.wrapped(place.store())
    await checker.reconcile()
    assert await checker.pending() == []
    stored = text(await checker.get_items())
    assert sorted(stored) == sorted(f"w{w}-{n}" for w in range(wrappers) for n in range(appends))
    for w in range(wrappers):
        assert [s for s in stored if s.startswith(f"w{w}-")] == [
            f"w{w}-{n}" for n in range(appends)
        ]
    writes = await place.opened[0].writes_after(0)
    assert len(writes) == wrappers * appends == len({w.write_id for w in writes})


async def test_many_sessions_at_once_each_append_one_statement(place: Place, wire: Wire) -> None:
    """Sixteen sessions appending at once (the throughput shape, not timed): every append is
    one statement, every item is stored once, nothing stays pending."""
    sessions, appends = 16, 10
    wrapped = [place.wrapped(place.store(f"{place.session_id}-{n}")) for n in range(sessions)]

    async def one(number: int) -> None:
        for n in range(appends):
            await wrapped[number].add_items([user(f"s{number}-{n}"), user("reply")])

    await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(sessions))), 60)
    await wire.settled()
    assert len(fused_statements(wire)) == sessions * appends
    # Before its first append, each session's two rows are made (once per process).
    made = [sql for sql in wire.statements if sql.startswith("WITH head AS (INSERT")]
    assert len(made) == sessions
    for number, session in enumerate(wrapped):
        await session.pending()
        assert await session.pending() == []
        stored = text(await session.get_items())
        assert stored == [t for n in range(appends) for t in (f"s{number}-{n}", "reply")]
