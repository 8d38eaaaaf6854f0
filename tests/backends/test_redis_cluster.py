"""The Redis journal and the revisioned Redis store on a real Redis Cluster: every command a
journal sends touches keys of one slot, laid out in its buckets; a session's keys and its
bucket's copy of the journal's keys share that slot; the journal-wide views see sessions on
every primary; an intent id stays one session's across buckets; a settlement by a session of
another bucket is kept where each belongs; addresses are read and refused as designed; and a
journal and a store keep working while a replica takes over from its primary (``CLUSTER
FAILOVER``). What every journal and store does runs on the cluster too, through the registered
``redis-cluster`` backend (``test_conformance.py``, ``test_store_conformance.py`` and the tests
over every registered backend)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.crc import key_slot

from agents_reconcile._backends.aside import SetAside
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.redis.cluster.layout import BUCKETS, BucketKeys
from agents_reconcile._backends.redis.journal import RedisClusterJournal, RedisJournal
from agents_reconcile._backends.redis.layout import ASIDE_KEYS
from agents_reconcile._backends.redis.nodes import cluster_client
from agents_reconcile._backends.redis.store import RevisionedRedisSession
from agents_reconcile._backends.registry import backend_named, check_address
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action
from agents_reconcile._core.retention import Retention
from agents_reconcile._session.config import ReconcileConfig
from agents_reconcile.errors import (
    ConfigurationError,
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
)

from ..support.journal_support import BACKEND, make_decision, make_effect, make_intent
from ..support.servers import own_cluster, server_url

pytestmark = getattr(pytest.mark, "redis-cluster")

PASSWORD = "hunter2-secret"
KEYLESS = frozenset(
    {b"SCAN", b"ASKING", b"CLUSTER", b"COMMAND", b"PING", b"INFO", b"READONLY", b"CLIENT", b"HELLO"}
)
"""Commands that name no key."""
MANY_KEYS = frozenset({b"UNLINK", b"DEL", b"EXISTS", b"MGET"})
"""Commands whose every argument is a key."""


@pytest.fixture
def url() -> str:
    return server_url(backend_named("redis-cluster"))


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
async def cluster(url: str) -> AsyncIterator[RedisCluster]:
    """A cluster client of the test's own, for looking behind the journal's back."""
    client = cluster_client(url, {})
    await client.initialize()
    yield client
    await client.aclose()


@pytest.fixture
async def journal(url: str, prefix: str) -> AsyncIterator[RedisClusterJournal]:
    """A journal on the test cluster under a prefix of its own; its keys deleted afterwards."""
    found = RedisClusterJournal.from_url(url, prefix=prefix)
    yield found
    await found.drop()
    await found.close()


class Sent:
    """Every command any connection packs while it is installed (cluster clients included:
    commands, pipelines, and the store's writes sent once)."""

    def __init__(self) -> None:
        self.commands: list[tuple[bytes, ...]] = []

    def record(self, args: tuple[Any, ...]) -> None:
        self.commands.append(tuple(_bytes(arg) for arg in args))


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, memoryview):
        return value.tobytes()
    return str(value).encode()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    found = Sent()
    pack_one = AbstractConnection.pack_command
    pack_many = AbstractConnection.pack_commands

    def pack_command(self: Any, *args: Any) -> Any:
        found.record(args)
        return pack_one(self, *args)

    def pack_commands(self: Any, commands: Any) -> Any:
        commands = list(commands)
        for command in commands:
            found.record(tuple(command))
        return pack_many(self, commands)

    monkeypatch.setattr(AbstractConnection, "pack_command", pack_command)
    monkeypatch.setattr(AbstractConnection, "pack_commands", pack_commands)
    yield found


def keys_of(command: tuple[bytes, ...]) -> list[bytes]:
    """The keys a command names (none for a keyless one)."""
    name = command[0].upper()
    if name.split()[0] in KEYLESS:
        return []
    if name in (b"EVAL", b"EVALSHA"):
        return list(command[3 : 3 + int(command[2])])
    if name in MANY_KEYS:
        return list(command[1:])
    return [command[1]]


def sessions_by_node(
    layout: BucketKeys, client: RedisCluster, each: int = 1
) -> dict[str, list[str]]:
    """``each`` session ids per primary (by its name), whose buckets' slots it serves."""
    found: dict[str, list[str]] = {str(node.name): [] for node in client.get_primaries()}
    number = 0
    while any(len(ids) < each for ids in found.values()):
        session = f"s-{number}"
        number += 1
        slot = key_slot(layout.of(session).version_key.encode())
        node = str(client.nodes_manager.get_node_from_slot(slot).name)
        if len(found[node]) < each:
            found[node].append(session)
    return found


# -- one slot per command -------------------------------------------------------------------


async def test_every_command_a_journal_sends_touches_one_slot_of_its_own_buckets(
    url: str, prefix: str, sent: Sent
) -> None:
    """Every script's keys, and every command's key, map to one slot, and every key is one of
    the journal's bucketed keys: run through everything a journal does."""
    journal = RedisClusterJournal.from_url(url, prefix=prefix)
    store = RevisionedRedisSession.from_url("chat-1", url, prefix=f"{prefix}-store")
    owner = current_owner()
    try:
        await journal.migrate()
        await journal.check()
        await journal.schema_version()
        first, second = make_intent("i-1"), make_intent("i-2", text="two")
        await journal.open_intent(first, state=IntentState.IN_FLIGHT, owner=owner)
        await journal.open_intent(second, state=IntentState.IN_FLIGHT, owner=owner, clearing="i-1")
        await journal.record(
            make_intent("b-1", session_id="session-b"), state=IntentState.FAILED, owner=owner
        )
        await journal.transition("b-1", state=IntentState.RECONCILING, owner=owner)
        await journal.settle(make_decision(make_intent("b-1", session_id="session-b")))
        denial = make_decision(second, action=Action.DENIED)
        await journal.note(denial)
        await journal.note_again(denial, dataclasses.replace(denial, repeats=2))
        await journal.count_write("session-c", BACKEND)
        await journal.write_count("session-c", BACKEND)
        raw = await journal.aside.raw("i-2")
        assert raw is not None
        aside = SetAside.of(raw, problem="p", actor="t", reason="r", at=time.time())
        await journal.aside.set_aside(raw, aside, make_decision(second, action=Action.DROPPED))
        effect = make_effect("c1")
        await journal.effects.begin(effect)
        await journal.effects.restart(
            dataclasses.replace(effect, owner="x/2/2"), expect_owner=effect.owner
        )
        await journal.effects.get(effect.key)
        await journal.effects.started()
        await journal.pages.started_effects(limit=5)
        await journal.effects.of_session("session-a")
        await journal.pending(None)
        await journal.pending("session-a")
        await journal.pages.intents(limit=2)
        await journal.pages.intents(limit=2, session_id="session-a")
        await journal.get("i-2")
        await journal.is_settled("b-1")
        await journal.decisions()
        await journal.decisions(intent_id="i-2")
        await journal.decisions(session_id="session-a")
        await journal.newest_decisions(["i-2", "b-1"])
        await journal.aside.entries()
        await journal.retention.prune(Retention(0, 0, 0), dry_run=True)
        await journal.retention.prune(Retention(0, 0, 0))
        await journal.retention.prune(Retention(0, 0, 0), limit=3)
        await journal.keys_held()
        await store.append_if(
            [{"role": "user", "content": "hi"}], expected=0, write_id="w", writer="t"
        )
        await store.get_items()
        await store.pop_item()
    finally:
        await journal.drop()
        await journal.close()
        await store.drop()
        await store.close()
    layout = BucketKeys(prefix)
    scripts = 0
    for command in sent.commands:
        keys = keys_of(command)
        if not keys:
            continue
        assert len({key_slot(key) for key in keys}) == 1, command[:1] + tuple(keys)
        for key in keys:
            assert layout.owns(key) or key.startswith(f"{prefix}-store:".encode()), key
        scripts += command[0].upper() in (b"EVAL", b"EVALSHA")
    assert scripts > 40


def test_a_sessions_keys_and_its_buckets_keys_share_one_slot() -> None:
    layout = BucketKeys("app")
    for number in range(200):
        session = f"session-{number}"
        bucket = layout.of(session)
        keys = [
            *layout.scripted(session),
            *layout.effects(session),
            *(bucket.names[name].encode() for name in ASIDE_KEYS),
            bucket.names["upgraded"].encode(),
        ]
        assert len({key_slot(key) for key in keys}) == 1, session
        assert all(layout.owns(key) for key in keys)
    # Buckets spread over the slots, one each.
    assert len({key_slot(layout.bucket(n).version_key.encode()) for n in range(BUCKETS)}) == BUCKETS
    # An intent id's claim is in the bucket of the id itself.
    assert layout.claims("i-1")[1] == f"app:{{b{layout.number('i-1'):03d}}}:claims".encode()


# -- journal-wide views ------------------------------------------------------------------------


async def test_journal_wide_views_see_sessions_on_every_primary(
    journal: RedisClusterJournal, cluster: RedisCluster
) -> None:
    owner = current_owner()
    placed = sessions_by_node(journal._layout, cluster, each=2)
    assert len(placed) >= 3
    sessions = sorted(session for ids in placed.values() for session in ids)
    for at, session in enumerate(sessions):
        intent = make_intent(f"i-{at}", session_id=session, created_at=1000.0 + at)
        await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=owner)
        await journal.effects.begin(make_effect(f"call-{at}", session_id=session))
        if at % 2:
            await journal.note(make_decision(intent, action=Action.DENIED, decided_at=2000.0 + at))
    pending = await journal.pending(None)
    assert [entry.intent.intent_id for entry in pending] == [
        f"i-{at}" for at in range(len(sessions))
    ]
    paged: list[str] = []
    after = None
    while True:
        page = await journal.pages.intents(limit=2, after=after)
        paged += [entry.intent.session_id for entry in page.rows]
        if page.after is None:
            assert page.more == 0
            break
        assert page.more == len(sessions) - len(paged)
        after = page.after
    assert paged == sessions
    assert len(await journal.effects.started()) == len(sessions)
    started = await journal.pages.started_effects(limit=len(sessions))
    assert {effect.session_id for effect in started.rows} == set(sessions)
    newest = await journal.decisions(limit=3)
    assert [decision.decided_at for decision in newest] == sorted(
        (2000.0 + at for at in range(len(sessions)) if at % 2), reverse=True
    )[:3]
    everyone = await journal.newest_decisions([f"i-{at}" for at in range(len(sessions))])
    assert set(everyone) == {f"i-{at}" for at in range(len(sessions)) if at % 2}


async def test_an_intent_id_stays_one_sessions_across_buckets(
    journal: RedisClusterJournal,
) -> None:
    """Claimed in the bucket of the id, the id is refused to a session of another bucket;
    once discarded (its claim gone with the next one), another session may take it."""
    layout = journal._layout
    owner = current_owner()
    first = "alpha"
    other = next(
        f"beta-{n}" for n in range(1000) if layout.number(f"beta-{n}") != layout.number(first)
    )
    intent = make_intent("shared", session_id=first)
    await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=owner)
    for attempt in (journal.record, journal.open_intent):
        with pytest.raises(IntentConflict):
            await attempt(
                make_intent("shared", session_id=other), state=IntentState.IN_FLIGHT, owner=owner
            )
    assert await journal.write_count(other, BACKEND) == 0
    assert (await journal.get("shared")).intent.session_id == first  # type: ignore[union-attr]
    # A second journal object finds it by its claim alone.
    again = RedisClusterJournal.from_url(journal._address.shown, prefix=journal.prefix)
    try:
        assert (await again.get("shared")) is not None
        await again.discard("shared")
        await again.open_intent(
            make_intent("next", session_id=first), state=IntentState.IN_FLIGHT, owner=owner
        )
    finally:
        await again.close()
    opened = await journal.open_intent(
        make_intent("shared", session_id=other), state=IntentState.IN_FLIGHT, owner=owner
    )
    assert opened.recorded


async def test_a_settlement_by_a_session_of_another_bucket_is_kept_where_each_belongs(
    journal: RedisClusterJournal,
) -> None:
    layout = journal._layout
    owner = current_owner()
    holder = "holder"
    decider = next(
        f"d-{n}" for n in range(1000) if layout.number(f"d-{n}") != layout.number(holder)
    )
    intent = make_intent("x-1", session_id=holder)
    await journal.record(intent, state=IntentState.RECONCILING, owner=owner)
    decision = dataclasses.replace(make_decision(intent), session_id=decider)
    await journal.settle(decision, owner=owner)
    await journal.settle(decision)  # again, its reply lost: a no-op
    assert await journal.get("x-1") is None
    assert await journal.is_settled("x-1")
    assert await journal.decisions(session_id=decider) == [decision]
    assert await journal.decisions(intent_id="x-1") == [decision]
    assert await journal.write_count(decider, BACKEND) == 1
    with pytest.raises(IntentConflict):
        await journal.record(intent, state=IntentState.FAILED, owner=owner)


async def test_pruned_counts_raise_every_buckets_floor(journal: RedisClusterJournal) -> None:
    for _ in range(4):
        await journal.count_write("idle", BACKEND)
    await asyncio.sleep(0.02)
    pruned = await journal.retention.prune(Retention(None, None, 0))
    assert pruned.write_counts == 1
    layout = journal._layout
    stranger = next(
        f"n-{n}" for n in range(1000) if layout.number(f"n-{n}") != layout.number("idle")
    )
    assert await journal.write_count("idle", BACKEND) == 4
    assert await journal.write_count(stranger, BACKEND) == 4
    assert await journal.count_write(stranger, BACKEND) == 5


async def test_a_cluster_journal_of_an_older_layout_is_refused_saying_what_to_do(
    journal: RedisClusterJournal, cluster: RedisCluster
) -> None:
    """A bucket holding layout 3 (a hash per field of an intent, never released) has the
    journal refused, saying so and what to do, by a write in that bucket, by migrate() and by
    check(); nothing is written there."""
    layout = journal._layout
    bucket = layout.of("old")
    await cluster.set(bucket.version_key, 3)
    await cluster.hset(layout.session("old")[0].replace(b":intents", b":record"), "i-old", "{}")
    said = "journal schema version 3, a layout from before this release's 4 that no release wrote"
    with pytest.raises(JournalCorrupt, match=said):
        await journal.open_intent(
            make_intent("i-new", session_id="old"),
            state=IntentState.IN_FLIGHT,
            owner=current_owner(),
        )
    with pytest.raises(JournalCorrupt, match=said):
        await journal.migrate()
    found = await journal.check()
    assert found is not None and said in found
    assert await cluster.get(bucket.version_key) == b"3"
    assert await cluster.exists(layout.session("old")[0]) == 0


# -- addresses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "redis+cluster://127.0.0.1:7101",
        "redis+cluster://127.0.0.1:7101,127.0.0.1:7102,[::1]:7103/",
        "redis+cluster://127.0.0.1:7101/0?socket_timeout=2.5&require_full_coverage=no",
        f"redis+cluster://agent:{PASSWORD}@h1:7101,h2?db=0",
        "rediss+cluster://h1:7101?ssl_cert_reqs=none",
    ],
)
def test_cluster_addresses_the_library_takes(address: str) -> None:
    assert check_address(address).name == "redis-cluster"
    ReconcileConfig(journal=address)
    assert check_address(address, what="store").name == "redis-cluster"


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("redis+cluster://h:7101/1", "a cluster serves database 0 alone"),
        ("redis+cluster://h:7101?db=2", "a cluster serves database 0 alone"),
        ("redis+cluster://", "names no node of the cluster"),
        ("redis+cluster://h1:7101,,h2", "has an empty entry"),
        ("redis+cluster://h1:99999", "the port '99999'"),
        ("redis+cluster://h1?read_from_replicas=yes", "reads its primaries"),
        ("redis+cluster://h1?ssl_cert_reqs=none", "no setting of a redis+cluster:// client"),
        ("redis+cluster://h1?socket_timeout=soon", "cannot read"),
        (f"redis+cluster://a:{PASSWORD}@h1:7101/3", "database 0 alone"),
    ],
)
def test_cluster_addresses_refused_saying_why(address: str, words: str) -> None:
    for attempt in (
        lambda: ReconcileConfig(journal=address),
        lambda: RedisClusterJournal.from_url(address),
        lambda: RevisionedRedisSession.from_url("s", address),
    ):
        with pytest.raises(ConfigurationError) as raised:
            attempt()
        assert words in str(raised.value)
        assert PASSWORD not in str(raised.value)


def test_the_cluster_journal_is_the_redis_journal_given_its_topology() -> None:
    """The cluster journal is the Redis journal with the cluster's topology chosen, not a second
    stack of classes: two package classes in its MRO, and nothing defined again but that."""
    ours = [
        kind
        for kind in RedisClusterJournal.__mro__
        if kind.__module__.startswith("agents_reconcile")
    ]
    assert ours == [RedisClusterJournal, RedisJournal]
    again = set(vars(RedisClusterJournal)) & set(vars(RedisJournal))
    assert again - {"__doc__", "__module__", "__annotations__"} == {"_topology"}


def test_a_cluster_journal_is_shown_without_its_password() -> None:
    journal = RedisClusterJournal.from_url(f"redis+cluster://agent:{PASSWORD}@h1:7101,h2:7102")
    assert PASSWORD not in repr(journal)
    assert "h1:7101,h2:7102" in repr(journal)
    store = RevisionedRedisSession.from_url("s", f"redis+cluster://agent:{PASSWORD}@h1:7101")
    assert store.backend_namespace.startswith("redis+cluster://h1:7101 prefix=")


# -- a failover ----------------------------------------------------------------------------------


async def _role(host: str, port: int) -> list[Any]:
    client = aioredis.Redis(host=host, port=port)
    try:
        reply: list[Any] = await client.execute_command("ROLE")
        return reply
    finally:
        await client.aclose()


async def _fail_over(host: str, port: int) -> None:
    """``CLUSTER FAILOVER`` on the replica at host:port once its link to its primary is up
    (a manual failover waits for the replica to catch up), and wait until it is a primary."""
    for _ in range(3):
        for _ in range(200):
            role = await _role(host, port)
            if role[0] == b"master" or (len(role) > 3 and role[3] == b"connected"):
                break
            await asyncio.sleep(0.05)
        client = aioredis.Redis(host=host, port=port)
        try:
            await client.execute_command("CLUSTER", "FAILOVER")
        finally:
            await client.aclose()
        for _ in range(100):
            if (await _role(host, port))[0] == b"master":
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"{host}:{port} did not take over")


@pytest.fixture
def own_url(url: str) -> Iterator[str]:
    """A Redis Cluster of this test's own (where the suites have one): a failover on the
    test cluster would meet every other test using it meanwhile."""
    with own_cluster() as found:
        yield found


@pytest.fixture
async def own_client(own_url: str) -> AsyncIterator[RedisCluster]:
    """A client of that cluster once its map shows the replicas (the nodes learn of each
    other a moment after the cluster is whole)."""
    client = cluster_client(own_url, {})
    await client.initialize()
    deadline = time.monotonic() + 30
    while not any(len(nodes) > 1 for nodes in client.nodes_manager.slots_cache.values()):
        assert time.monotonic() < deadline, "the cluster's replicas never showed in its map"
        await asyncio.sleep(0.1)
        await client.nodes_manager.initialize()
    yield client
    await client.aclose()


async def test_a_journal_and_a_store_keep_working_across_a_failover(
    own_url: str, prefix: str, own_client: RedisCluster
) -> None:
    """A replica takes over from its primary (``CLUSTER FAILOVER``, on a cluster of this
    test's own): the clients follow the slots that moved, and what was written before is
    read after."""
    url, cluster = own_url, own_client
    journal = RedisClusterJournal.from_url(url, prefix=prefix)
    layout = journal._layout
    # A replica and the primary it follows: the first and second node serving a slot.
    primary, replica = next(
        (nodes[0], nodes[1])
        for nodes in cluster.nodes_manager.slots_cache.values()
        if len(nodes) > 1
    )
    session = next(
        f"f-{n}"
        for n in range(5000)
        if str(
            cluster.nodes_manager.get_node_from_slot(
                key_slot(layout.of(f"f-{n}").version_key.encode())
            ).name
        )
        == str(primary.name)
    )
    store = RevisionedRedisSession.from_url(session, url, prefix=f"{prefix}-store")
    owner = current_owner()
    taken_over = False
    try:
        before = make_intent("before", session_id=session)
        await journal.open_intent(before, state=IntentState.IN_FLIGHT, owner=owner)
        await store.append_if([{"n": 1}], expected=0, write_id="w1", writer="t")
        await _fail_over(str(replica.host), int(replica.port))
        taken_over = True
        after = make_intent("after", session_id=session, text="later")
        opened = await journal.open_intent(
            after, state=IntentState.IN_FLIGHT, owner=owner, clearing="before"
        )
        assert opened.recorded and opened.write_count == 2
        assert [entry.intent.intent_id for entry in await journal.pending(session)] == ["after"]
        assert await store.append_if([{"n": 2}], expected=1, write_id="w2", writer="t") == 2
        assert await store.get_items() == [{"n": 1}, {"n": 2}]
        await journal.discard("after")
        assert await journal.pending(None) == []
    finally:
        if taken_over:
            await _fail_over(str(primary.host), int(primary.port))
        await journal.drop()
        await journal.close()
        await store.drop()
        await store.close()


async def test_a_journal_first_used_by_many_commands_at_once_fails_none_of_them(
    url: str, prefix: str
) -> None:
    """The driver's cluster client, first used by many commands at once, loaded its slot map
    while some of them were sending and closed their connections under them (an
    ``AttributeError`` from inside the driver). The client is opened with its map loaded."""
    for trial in range(5):
        journal = RedisClusterJournal.from_url(url, prefix=f"{prefix}-{trial}")
        intents = [make_intent(f"i-{n}", session_id=f"s-{n}") for n in range(60)]
        try:
            await asyncio.gather(
                *(
                    journal.record(intent, state=IntentState.FAILED, owner=current_owner())
                    for intent in intents
                )
            )
            assert len(await journal.pending(None)) == len(intents)
        finally:
            await journal.drop()
            await journal.close()


# -- a connection torn down under the client -----------------------------------------------------


@dataclasses.dataclass
class TearDown:
    """Closes the driver's connection just before it writes a script whose SHA it is given,
    as the cluster client's own reset does to another task's connection during a failover:
    the driver then writes to a socket that is gone and raises its ``AttributeError``."""

    sha: bytes
    times: int
    torn: int = 0


@pytest.fixture
def tear_down(monkeypatch: pytest.MonkeyPatch) -> TearDown:
    """A ``TearDown`` of the claim script (set ``times`` to arm it), under every connection."""
    found = TearDown(RedisClusterJournal._scripts["claim"].sha.encode(), times=0)
    original = AbstractConnection._send_packed_command

    async def send(connection: Any, command: Any) -> None:
        sent = command if isinstance(command, bytes) else b"".join(command)
        if found.times and found.sha in sent:
            found.times -= 1
            found.torn += 1
            await connection.disconnect(nowait=True)
        await original(connection, command)

    monkeypatch.setattr(AbstractConnection, "_send_packed_command", send)
    return found


async def test_a_connection_torn_down_under_a_claim_is_journal_unavailable(
    url: str, prefix: str, tear_down: TearDown
) -> None:
    """The driver's ``AttributeError`` on a closed connection, met by the claim that opens an
    intent, is ``JournalUnavailable`` (the driver's error kept as its cause), never raised
    raw; the same opening again (as the wrapper retries it) records the intent once."""
    journal = RedisClusterJournal.from_url(url, prefix=prefix)
    intent = make_intent("torn", session_id="s-torn")
    try:
        await journal.pending(None)  # connected, the slot map loaded
        tear_down.times = 1
        with pytest.raises(JournalUnavailable) as raised:
            await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner())
        assert tear_down.torn == 1
        cause = raised.value.__cause__
        assert isinstance(cause, AttributeError) and "writelines" in str(cause)
        assert "closed under the client" in str(raised.value)
        opened = await journal.open_intent(
            intent, state=IntentState.IN_FLIGHT, owner=current_owner()
        )
        assert opened.recorded
        assert [e.intent.intent_id for e in await journal.pending("s-torn")] == ["torn"]
    finally:
        await journal.drop()
        await journal.close()


async def test_appends_whose_claim_meets_a_torn_connection_are_retried_and_kept_once(
    url: str, prefix: str, tear_down: TearDown, tmp_path: Any
) -> None:
    """A wrapper's append whose claim meets a torn connection is retried (every journal
    operation is safe to run again after a lost reply) and goes on: each item stored once,
    nothing left pending; past its retries it is ``JournalUnavailable``, nothing appended."""
    from agents import SQLiteSession

    from agents_reconcile import ReconcilingSession

    journal = RedisClusterJournal.from_url(url, prefix=prefix)
    session = ReconcilingSession(
        SQLiteSession("s-torn", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=journal, journal_retries=3),
    )
    try:
        await session.add_items([{"role": "user", "content": "before"}])
        tear_down.times = 2
        await session.add_items([{"role": "user", "content": "torn twice"}])
        assert tear_down.torn == 2
        tear_down.times = 3
        with pytest.raises(JournalUnavailable):
            await session.add_items([{"role": "user", "content": "torn thrice"}])
        assert tear_down.torn == 5
        contents = [item["content"] for item in await session.get_items()]
        assert contents == ["before", "torn twice"]
        assert await session.pending() == []
    finally:
        await journal.drop()
        await journal.close()


def test_only_the_driver_s_attribute_error_on_a_closed_connection_is_translated() -> None:
    """``torn_down`` is true of the driver's ``AttributeError`` on a socket that is gone, and
    false of one raised by other code (a bug stays a bug, raised as it is)."""
    from redis.asyncio.connection import Connection

    from agents_reconcile._backends.redis.replies import is_driver_error, torn_down

    try:
        asyncio.run(Connection()._send_packed_command([b"PING"]))
    except AttributeError as exc:
        assert torn_down(exc) and is_driver_error(exc)
    else:
        raise AssertionError("an unconnected connection wrote")
    ours: Any = None
    try:
        ours.writelines([b"PING"])
    except AttributeError as exc:
        assert not torn_down(exc) and not is_driver_error(exc)


async def test_a_cluster_client_that_knows_no_node_is_journal_unavailable(
    url: str, prefix: str
) -> None:
    """The driver's ``IndexError`` of a cluster client whose map of the nodes is empty (a
    random node chosen from none, as after failovers emptied it) is ``JournalUnavailable``
    at the journal's edge, the driver's error kept as its cause; an ``IndexError`` of other
    code is a bug, raised as it is."""
    from types import SimpleNamespace

    from redis.asyncio.cluster import RedisCluster

    from agents_reconcile._backends.redis.replies import is_driver_error, no_node_known

    journal = RedisClusterJournal.from_url(url, prefix=prefix)
    emptied: Any = RedisCluster.__new__(RedisCluster)
    emptied.nodes_manager = SimpleNamespace(nodes_cache={})
    try:
        with pytest.raises(JournalUnavailable) as raised, journal._link.translated("a read"):
            emptied.get_random_node()
        cause = raised.value.__cause__
        assert isinstance(cause, IndexError) and no_node_known(cause)
        assert "knew no node of the cluster" in str(raised.value)
        with pytest.raises(IndexError), journal._link.translated("a read"):
            [][0]
        try:
            [][0]
        except IndexError as exc:
            assert not no_node_known(exc) and not is_driver_error(exc)
    finally:
        await journal.close()


def test_a_redirection_the_driver_raises_is_a_cluster_reply_not_a_corrupt_journal() -> None:
    """The driver's ``MovedError`` and ``AskError`` keep only the slot and node ("3827
    host:port"): met on a single-node journal they say to give a redis+cluster:// address, on
    a cluster journal they are ``JournalUnavailable`` (a slot moving again), never
    ``JournalCorrupt``."""
    from redis import exceptions as redis_errors

    from agents_reconcile._backends.redaction import Redacted
    from agents_reconcile._backends.redis.replies import translate
    from agents_reconcile.errors import JournalCorrupt

    address = Redacted.of("redis://127.0.0.1:7101/0")
    for error, code in ((redis_errors.MovedError, "MOVED"), (redis_errors.AskError, "ASK")):
        for cluster in (False, True):
            found = translate(
                error("3827 127.0.0.1:7102"),
                "an append",
                where="the journal",
                address=address,
                refused=lambda text: AssertionError(text),
                cluster=cluster,
            )
            assert isinstance(found, JournalUnavailable) and not isinstance(found, JournalCorrupt)
            assert f"answered {code} during an append" in str(found)
            assert ("redis+cluster://" in str(found)) is not cluster
