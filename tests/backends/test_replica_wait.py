"""The replica wait (``?replicas=N&replica_timeout=S``): each Redis journal and store write
returns only once N replicas hold it, and one that too few acknowledge is reported as a write
whose fate a failover decides, never as done.

The standalone test server has no replica, so every wait there falls short: the journal
raises ``JournalUnavailable`` and the store ``ReplicasBehind``, and in both the write is on
the primary. The test cluster has one replica per primary: there every write path waits
(counted by the servers' own ``WAIT`` statistics) and a wait for two replicas falls short.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from redis.asyncio import Redis

from agents_reconcile import Outcome, Reason, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.addresses import replica_wait
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.redis.journal import RedisClusterJournal, RedisJournal
from agents_reconcile._backends.redis.nodes import cluster_client
from agents_reconcile._backends.redis.replicas import ReplicasBehind, ReplicaWait, split
from agents_reconcile._backends.redis.store import RevisionedRedisSession
from agents_reconcile._backends.registry import backend_named, check_address
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._session.fused import fused_append
from agents_reconcile.conformance._records import make_decision, make_effect, make_intent
from agents_reconcile.errors import ConfigurationError, JournalUnavailable

from ..support.servers import alone, redis_url, server_url

USER = {"role": "user", "content": "hi"}
SHORT = "replicas=1&replica_timeout=0.05"
"""A wait the standalone server (no replica) cannot meet, ended quickly."""


def asking(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture
def prefix() -> str:
    return f"t-wait-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def opened() -> AsyncIterator[list[Any]]:
    things: list[Any] = []
    yield things
    for thing in reversed(things):
        if hasattr(thing, "drop"):
            await thing.drop()
        await thing.close()


# -- addresses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "wait"),
    [
        ("replicas=1", (1, 1.0)),
        ("replicas=2&replica_timeout=0.25", (2, 0.25)),
        ("replica_timeout=3&replicas=1", (1, 3.0)),
        ("replicas=0", None),
    ],
)
def test_the_wait_is_read_from_the_query_and_never_reaches_the_driver(
    query: str, wait: tuple[int, float] | None
) -> None:
    for url in ("redis://127.0.0.1:6390/0", "redis+cluster://127.0.0.1:7101,127.0.0.1:7102"):
        address = asking(url, f"socket_timeout=5&{query}")
        check_address(address, what="journal")
        left, found = split(address)
        assert left == f"{url}?socket_timeout=5"
        assert (None if found is None else (found.replicas, found.timeout)) == wait


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("replicas=one", "not a whole number"),
        ("replicas=-1", "not a whole number"),
        ("replicas=1&replica_timeout=0", "from 0.001 to 3600"),
        ("replicas=1&replica_timeout=nan", "from 0.001 to 3600"),
        ("replicas=1&replica_timeout=soon", "from 0.001 to 3600"),
        ("replica_timeout=1", "without replicas=N"),
    ],
)
def test_a_wait_that_cannot_be_meant_is_refused_by_name(query: str, said: str) -> None:
    for url in ("redis://127.0.0.1:6390/0", "redis+cluster://127.0.0.1:7101"):
        with pytest.raises(ConfigurationError, match=said):
            check_address(asking(url, query), what="store")
        with pytest.raises(ConfigurationError, match=said):
            split(asking(url, query))
    assert replica_wait({"replicas": "3"}) == (3, 1.0)


def test_too_few_acknowledgements_say_what_was_written() -> None:
    wait = ReplicaWait(2, 0.5)
    assert wait.command == ("WAIT", 2, 500)
    wait.check(2)
    wait.check(3)
    with pytest.raises(ReplicasBehind, match="ran on the primary, but 1 of the 2 replicas"):
        wait.check(1)


# -- one server without a replica: every wait falls short ----------------------------------------


@pytest.mark.redis
async def test_a_journal_write_short_of_replicas_is_unavailable_and_on_the_primary(
    prefix: str, opened: list[Any]
) -> None:
    waiting = RedisJournal.from_url(asking(redis_url(), SHORT), prefix=prefix)
    plain = RedisJournal.from_url(redis_url(), prefix=prefix)
    opened += [plain, waiting]
    assert waiting.replica_wait == ReplicaWait(1, 0.05)
    assert "replicas" not in repr(waiting)
    intent = make_intent("i-1", session_id="s")
    with pytest.raises(JournalUnavailable, match="0 of the 1 replicas"):
        await waiting.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner())
    [entry] = await plain.pending("s")
    assert entry.intent.intent_id == "i-1"


@pytest.mark.redis
async def test_a_store_write_short_of_replicas_raises_and_is_on_the_primary(
    prefix: str, opened: list[Any]
) -> None:
    store = RevisionedRedisSession.from_url("s", asking(redis_url(), SHORT), prefix=prefix)
    opened.append(store)
    with pytest.raises(ReplicasBehind, match="0 of the 1 replicas"):
        await store.add_items([USER])
    assert await store.get_items() == [USER]
    assert [write.kind for write in await store.writes_after(0)] == ["append"]


@pytest.mark.redis
async def test_a_run_whose_input_write_is_short_of_replicas_stops_and_the_next_run_keeps_it_once(
    prefix: str, tmp_path: Path, opened: list[Any]
) -> None:
    """On the real runner: the run stops on the store's error, before any model call; the
    next run (its replicas back) finds the write in the store and never sends it again."""
    config = ReconcileConfig(journal=tmp_path / "journal.db")
    model = ScriptedModel([[assistant_message("hello")]])
    agent = Agent(name="a", model=model)
    store = RevisionedRedisSession.from_url("s", asking(redis_url(), SHORT), prefix=prefix)
    opened.append(store)
    first = ReconcilingSession(store, config=config)
    with pytest.raises(ReplicasBehind):
        await Runner.run(
            agent, "hi", session=first, run_config=first.run_config(), hooks=first.hooks()
        )
    assert not model.calls
    again = RevisionedRedisSession.from_url("s", redis_url(), prefix=prefix)
    session = ReconcilingSession(again, config=config)
    [decision] = await session.reconcile()
    assert (decision.outcome, decision.reason) == (Outcome.COMMITTED, Reason.WRITE_FOUND)
    result = await Runner.run(
        agent, "and again", session=session, run_config=session.run_config(), hooks=session.hooks()
    )
    assert result.final_output == "hello"
    texts = [item.get("content") for item in await again.get_items()]
    assert texts[:2] == ["hi", "and again"]
    await again.close()


@pytest.mark.redis
async def test_a_journal_and_store_fuse_only_when_they_wait_alike(
    prefix: str, opened: list[Any]
) -> None:
    url = redis_url()
    journal = RedisJournal.from_url(url, prefix=prefix)
    waiting = RedisJournal.from_url(asking(url, SHORT), prefix=prefix)
    store = RevisionedRedisSession.from_url("s", url, prefix=prefix)
    waiting_store = RevisionedRedisSession.from_url("s", asking(url, SHORT), prefix=prefix)
    opened += [store, waiting_store, journal, waiting]
    assert await fused_append(journal, store) is not None
    assert await fused_append(waiting, waiting_store) is not None
    assert await fused_append(journal, waiting_store) is None
    assert await fused_append(waiting, store) is None


# -- a cluster with one replica per primary ----------------------------------------------------


async def waits_counted(url: str) -> int:
    """How many ``WAIT`` commands the cluster's nodes have run (a node keeps its count when
    a failover makes it a replica)."""
    client = cluster_client(url, {})
    try:
        await client.initialize()
        total = 0
        for node in client.get_nodes():
            stats = await client.execute_command("INFO", "commandstats", target_nodes=node)
            total += int(stats.get("cmdstat_wait", {}).get("calls", 0))
        return total
    finally:
        await client.aclose()


@pytest.fixture
def cluster_url() -> Iterator[str]:
    """The test cluster, this test alone sending it ``WAIT`` meanwhile: the counts below are
    the servers' own, of every client."""
    url = server_url(backend_named("redis-cluster"))
    with alone("redis-cluster-waits"):
        yield url


@getattr(pytest.mark, "redis-cluster")
async def test_on_a_cluster_every_journal_write_waits_for_its_replica(
    cluster_url: str, prefix: str, opened: list[Any]
) -> None:
    journal = RedisClusterJournal.from_url(
        asking(cluster_url, "replicas=1&replica_timeout=2"), prefix=prefix
    )
    opened.append(journal)
    owner = current_owner()
    before = await waits_counted(cluster_url)
    intent = make_intent("i-1", session_id="s")
    await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=owner)
    after_open = await waits_counted(cluster_url)
    assert after_open > before  # the claim of the id and the opening each waited
    await journal.transition(
        "i-1", state=IntentState.RECONCILING, owner=owner, expect_state=IntentState.IN_FLIGHT
    )
    await journal.settle(make_decision(intent), owner=owner)
    effect = make_effect("c1", session_id="s")
    await journal.effects.begin(effect)
    after = await waits_counted(cluster_url)
    assert after - after_open >= 3
    assert await journal.is_settled("i-1")
    assert await journal.effects.get(effect.key) is not None


@getattr(pytest.mark, "redis-cluster")
async def test_on_a_cluster_a_wait_for_more_replicas_than_there_are_falls_short(
    cluster_url: str, prefix: str, opened: list[Any]
) -> None:
    query = "replicas=2&replica_timeout=0.05"
    journal = RedisClusterJournal.from_url(asking(cluster_url, query), prefix=prefix)
    store = RevisionedRedisSession.from_url("s", asking(cluster_url, query), prefix=prefix)
    opened += [store, journal]
    with pytest.raises(JournalUnavailable, match="1 of the 2 replicas"):
        await journal.open_intent(
            make_intent("i-1", session_id="s"), state=IntentState.IN_FLIGHT, owner=current_owner()
        )
    with pytest.raises(ReplicasBehind, match="1 of the 2 replicas"):
        await store.add_items([USER])
    assert await store.get_items() == [USER]


@getattr(pytest.mark, "redis-cluster")
async def test_on_a_cluster_a_store_write_waits_for_its_replica(
    cluster_url: str, prefix: str, opened: list[Any]
) -> None:
    store = RevisionedRedisSession.from_url(
        "s", asking(cluster_url, "replicas=1&replica_timeout=2"), prefix=prefix
    )
    opened.append(store)
    before = await waits_counted(cluster_url)
    await store.add_items([USER])
    await store.pop_item()
    assert await waits_counted(cluster_url) - before == 2
    assert await store.get_items() == []


async def test_a_client_passed_in_takes_the_wait_as_an_argument(prefix: str) -> None:
    """A journal or store built around a client of one's own takes the wait as an argument,
    a ``ReplicaWait`` the package exports (the address's ``?replicas=`` is ``from_url``'s)."""
    import agents_reconcile

    assert agents_reconcile.ReplicaWait is ReplicaWait
    assert "ReplicaWait" in agents_reconcile.__all__
    client = Redis.from_url("redis://127.0.0.1:1/0")  # never connected
    journal = RedisJournal(client, prefix=prefix, replica_wait=ReplicaWait(1, 0.5))
    store = RevisionedRedisSession("s", client, prefix=prefix, replica_wait=ReplicaWait(1, 0.5))
    assert journal.replica_wait == store.replica_wait == ReplicaWait(1, 0.5)
    assert ReplicaWait(2).timeout == 1.0, "a second unless given, as in an address"
    await client.aclose()


@pytest.mark.parametrize(
    ("replicas", "timeout", "said"),
    [
        (0, 1.0, "replicas=0 is not from 1 to 100"),
        (101, 1.0, "replicas=101 is not from 1 to 100"),
        (True, 1.0, "not a whole number"),
        (1, 0.0, "from 0.001 to 3600"),
        (1, 3601, "from 0.001 to 3600"),
        (1, "1", "not a number of seconds"),
    ],
)
def test_a_wait_given_as_an_argument_is_held_to_the_address_s_bounds(
    replicas: Any, timeout: Any, said: str
) -> None:
    """A ``ReplicaWait`` built by hand is refused where the same wait in an address is: a
    count from 1 to 100 (no wait is ``None``), seconds from 0.001 to 3600."""
    with pytest.raises(ConfigurationError, match=said):
        ReplicaWait(replicas, timeout)
