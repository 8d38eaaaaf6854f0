"""Journal namespaces on Redis and on Redis Cluster: a key prefix names one, given as the
``prefix=`` keyword, as ``?prefix=`` in the address (a ``ReconcileConfig`` journal, the command
line's ``--journal`` and ``AGENTS_RECONCILE_JOURNAL``) or as ``--namespace``, the same way on
one server and on a cluster; ``RedisJournal.from_url`` opens a cluster's address as the cluster
journal; two namespaces on one server or cluster see nothing of each other, an operator sees
both, and dropping one leaves the other whole."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import agents_reconcile
from agents_reconcile import RedisJournal, RevisionedRedisSession
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.opening import open_journal
from agents_reconcile._backends.redis.journal import RedisClusterJournal
from agents_reconcile._backends.redis.nodes import scan_keys
from agents_reconcile._backends.registry import Backend, backend_named, check_address
from agents_reconcile._cli import main
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action
from agents_reconcile._session.config import ReconcileConfig
from agents_reconcile.errors import ConfigurationError

from ..support.backends import redis_client
from ..support.journal_support import make_decision, make_intent
from ..support.servers import server_url

CLUSTER = "redis+cluster://127.0.0.1:7101,127.0.0.1:7102"
SERVER = "redis://127.0.0.1:6390/0"
API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"

ENGINES = [
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("redis-cluster", id="redis-cluster", marks=getattr(pytest.mark, "redis-cluster")),
]


def with_prefix(address: str, prefix: str) -> str:
    return f"{address}{'&' if '?' in address else '?'}prefix={prefix}"


@pytest.fixture(params=ENGINES)
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_named(request.param)


@pytest.fixture
def url(backend: Backend) -> str:
    return server_url(backend)


@pytest.fixture
def spaces(url: str) -> Iterator[tuple[str, str]]:
    """Two namespaces of the test's own on the test server (``app`` and ``app:x``, one the
    other's start), their keys deleted afterwards."""
    first = f"ns{uuid.uuid4().hex[:12]}"
    pair = (first, f"{first}:x")
    yield pair

    async def drop() -> None:
        for prefix in pair:
            journal = RedisJournal.from_url(url, prefix=prefix)
            await journal.drop()
            await journal.close()

    asyncio.run(drop())


def test_the_redis_journal_opens_a_cluster_address_as_the_cluster_journal_in_its_namespace() -> (
    None
):
    """``RedisJournal.from_url`` given a cluster's address and a prefix returns the cluster
    journal under that prefix; a prefix in the address does the same, and so does every way
    an address is given (a config, the registry with or without a namespace)."""
    opened = RedisJournal.from_url(CLUSTER, prefix="tenant-a")
    assert type(opened) is RedisClusterJournal and opened.prefix == "tenant-a"
    assert repr(opened) == f"RedisClusterJournal({CLUSTER!r}, prefix='tenant-a')"
    assert RedisJournal.from_url(CLUSTER).prefix == "agents-reconcile-journal"
    in_address = with_prefix(CLUSTER, "tenant-a")
    for journal in (
        RedisJournal.from_url(in_address),
        RedisClusterJournal.from_url(in_address),
        RedisJournal.from_url(in_address, prefix="tenant-a"),
        open_journal(in_address),
        check_address(in_address).open_journal(in_address),
        check_address(in_address).open_journal(in_address, namespace="tenant-a"),
        check_address(CLUSTER).open_journal(CLUSTER, namespace="tenant-a"),
    ):
        assert type(journal) is RedisClusterJournal
        assert journal.prefix == "tenant-a"
        # The prefix is not part of the address the journal names its server by.
        assert repr(journal) == f"RedisClusterJournal({CLUSTER!r}, prefix='tenant-a')"
    ReconcileConfig(journal=in_address)


@pytest.mark.parametrize("address", [SERVER, CLUSTER])
def test_a_prefix_in_the_address_names_the_namespace_as_the_keyword_does(address: str) -> None:
    """On one server as on a cluster, ``?prefix=`` (with other settings, in any order) is the
    journal's and the store's key prefix, the same as the keyword gives, and is never passed to
    the driver: the store's identity is the same either way."""
    for given, without in (
        (with_prefix(address, "tenant-a"), address),
        (f"{address}?replicas=1&prefix=tenant-a", f"{address}?replicas=1"),
        (
            f"{address}?prefix=tenant-a&replicas=1&replica_timeout=2",
            f"{address}?replicas=1&replica_timeout=2",
        ),
    ):
        journal = RedisJournal.from_url(given)
        keyword = RedisJournal.from_url(without, prefix="tenant-a")
        assert journal.prefix == "tenant-a"
        assert repr(journal) == repr(keyword)
        assert journal.replica_wait == keyword.replica_wait
        store = RevisionedRedisSession.from_url("s", given)
        assert store.prefix == "tenant-a"
        assert store.backend_namespace == (
            RevisionedRedisSession.from_url("s", without, prefix="tenant-a").backend_namespace
        )


@pytest.mark.parametrize("address", [SERVER, CLUSTER])
@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("prefix=a%7Bb%7D", "may not hold braces"),
        ("prefix=a{b}", "may not hold braces"),
        ("prefix=}", "may not hold braces"),
        ("prefix=", "non-empty"),
        ("prefix=a&prefix=b", "given more than once"),
    ],
)
def test_a_prefix_in_the_address_is_refused_saying_why(
    address: str, query: str, words: str
) -> None:
    """A prefix holding braces (which would make every key of the journal one slot's), an empty
    one, or one given twice is refused with the reason, by every way an address comes in."""
    given = f"{address}?{query}"
    for attempt in (
        lambda: RedisJournal.from_url(given),
        lambda: RevisionedRedisSession.from_url("s", given),
        lambda: open_journal(given),
    ):
        with pytest.raises(ConfigurationError, match=words):
            attempt()


@pytest.mark.parametrize("address", [SERVER, CLUSTER])
def test_a_prefix_given_both_in_the_address_and_as_a_keyword_must_agree(address: str) -> None:
    """The address's prefix and the keyword's (or the registry's namespace, which is the
    command line's ``--namespace``) may both be given only when they are the same."""
    given = with_prefix(address, "tenant-a")
    for attempt in (
        lambda: RedisJournal.from_url(given, prefix="tenant-b"),
        lambda: check_address(given).open_journal(given, namespace="tenant-b"),
        lambda: RevisionedRedisSession.from_url("s", given, prefix="tenant-b"),
    ):
        with pytest.raises(ConfigurationError, match="given twice") as refused:
            attempt()
        assert "'tenant-a'" in str(refused.value) and "'tenant-b'" in str(refused.value)


@pytest.mark.parametrize("prefix", ["a{b}", "{b001}", "app:{x}"])
def test_a_prefix_with_braces_is_refused_on_a_cluster_saying_why(prefix: str) -> None:
    """A keyword prefix holding braces is refused on a cluster (as on one server): the braces
    would be the hash tag of every key, every bucket's included."""
    with pytest.raises(ConfigurationError, match="braces") as refused:
        RedisJournal.from_url(CLUSTER, prefix=prefix)
    assert "one slot" in str(refused.value)


def test_a_one_server_subclass_refuses_a_cluster_address_naming_the_class_that_takes_it() -> None:
    """A subclass of the Redis journal is a one-server journal: given a cluster's address it
    says which class opens one, rather than answering with another class than its own."""

    class Mine(RedisJournal):
        pass

    with pytest.raises(ConfigurationError, match="RedisClusterJournal"):
        Mine.from_url(CLUSTER)


def test_the_cluster_journal_is_exported_and_documented() -> None:
    """``RedisClusterJournal`` is a name of the package's public surface, in ``__all__``, and
    on the API page."""
    assert "RedisClusterJournal" in agents_reconcile.__all__
    assert agents_reconcile.RedisClusterJournal is RedisClusterJournal
    assert "::: agents_reconcile.RedisClusterJournal" in API_PAGE.read_text("utf-8")


async def keys_under(url: str, prefix: str) -> list[str]:
    """Every key of the server (every primary of a cluster) that begins with ``prefix:``."""
    client = redis_client(url)
    try:
        return [key.decode() async for key in client.scan_iter(match=f"{prefix}:*")]
    finally:
        await client.aclose()


async def _fill(journal: RedisJournal, tag: str) -> list[str]:
    """Two sessions' intents in ``journal`` (one of them decided), their ids."""
    owner = current_owner()
    ids = []
    for at in range(2):
        intent = make_intent(f"{tag}-{at}", session_id=f"chat-{at}", text=tag)
        await journal.record(intent, state=IntentState.FAILED, owner=owner)
        ids.append(intent.intent_id)
    denied = make_decision(make_intent(ids[0], session_id="chat-0", text=tag), action=Action.DENIED)
    await journal.note(denied)
    return ids


async def test_two_namespaces_on_one_server_see_nothing_of_each_other(
    url: str, spaces: tuple[str, str]
) -> None:
    """Intents, decisions and ids of one namespace are not seen from the other, even with the
    same session and intent ids, and one prefix the other's start."""
    first = RedisJournal.from_url(with_prefix(url, spaces[0]))
    second = RedisJournal.from_url(url, prefix=spaces[1])
    try:
        mine = await _fill(first, "same")
        assert await second.pending(None) == []
        assert await second.get(mine[0]) is None
        assert await second.decisions() == []
        # The same ids, in the same sessions, are the other namespace's own.
        theirs = await _fill(second, "same")
        assert theirs == mine
        for journal in (first, second):
            pending = await journal.pending(None)
            assert sorted(entry.intent.intent_id for entry in pending) == sorted(mine)
            assert len(await journal.decisions()) == 1
    finally:
        await first.close()
        await second.close()


def test_an_operator_sees_every_namespace_and_each_status_its_own(
    url: str,
    spaces: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both namespaces are listed as journals of the server; ``status`` shows a namespace's
    intents alone, the namespace given as ``?prefix=`` in ``--journal`` or in
    ``AGENTS_RECONCILE_JOURNAL``, or as ``--namespace``; a namespace without a journal is
    refused, naming both."""

    async def fill() -> tuple[list[str], list[str], list[str]]:
        journals = [RedisJournal.from_url(url, prefix=space) for space in spaces]
        try:
            found = [
                await _fill(journal, space) for journal, space in zip(journals, spaces, strict=True)
            ]
            listed, complete = await journals[0].journal_prefixes(most=10_000, budget=10**7)
            assert complete
            return found[0], found[1], listed
        finally:
            for journal in journals:
                await journal.close()

    first, second, listed = asyncio.run(fill())
    assert set(spaces) <= set(listed)

    def status(*argv: str) -> list[str]:
        main(["status", "--json", *argv])
        shown = orjson.loads(capsys.readouterr().out)
        return sorted(row["intent_id"] for row in shown["pending"])

    for space, ids in zip(spaces, (first, second), strict=True):
        assert status("--journal", with_prefix(url, space)) == sorted(ids)
        assert status("--journal", url, "--namespace", space) == sorted(ids)
        assert status("--journal", with_prefix(url, space), "--namespace", space) == sorted(ids)
        monkeypatch.setenv("AGENTS_RECONCILE_JOURNAL", with_prefix(url, space))
        assert status() == sorted(ids)
        monkeypatch.delenv("AGENTS_RECONCILE_JOURNAL")

    assert main(["status", "--journal", with_prefix(url, spaces[0]), "--namespace", "other"]) == 2
    assert "given twice" in capsys.readouterr().err
    missing = f"{spaces[0]}-missing"
    assert main(["status", "--journal", with_prefix(url, missing)]) != 0
    refused = capsys.readouterr().err
    assert f"no journal under prefix {missing!r}" in refused
    assert all(repr(space) in refused or space in refused for space in spaces)


async def test_dropping_one_namespace_leaves_the_other_whole(
    url: str, spaces: tuple[str, str]
) -> None:
    """``drop`` of one namespace deletes its keys alone: the other (whose prefix begins with
    the first's) keeps its intents, decisions and schema version."""
    first = RedisJournal.from_url(with_prefix(url, spaces[0]))
    second = RedisJournal.from_url(with_prefix(url, spaces[1]))
    try:
        await _fill(first, "first")
        kept = await _fill(second, "second")
        assert await first.drop() > 0
        # Looked at only through what reads alone (a journal's first use stores its version).
        assert await first.schema_version() is None
        left = await keys_under(url, spaces[0])
        assert left and all(key.startswith(f"{spaces[1]}:") for key in left)
        listed, _ = await second.journal_prefixes(most=10_000, budget=10**7)
        assert spaces[1] in listed and spaces[0] not in listed
        assert await second.check() is None
        assert sorted(entry.intent.intent_id for entry in await second.pending(None)) == kept
        assert len(await second.decisions()) == 1
    finally:
        await first.close()
        await second.close()


class _Pages:
    """A client whose ``SCAN`` on each node answers the pages given (a page per call, the last
    with cursor 0), noting the nodes asked."""

    def __init__(self, pages: dict[str | None, list[list[bytes]]]) -> None:
        self.pages = pages
        self.asked: list[str | None] = []

    async def execute_command(self, *args: Any, target_nodes: str | None = None) -> Any:
        cursor = int(args[1])
        self.asked.append(target_nodes)
        pages = self.pages[target_nodes]
        return (0 if cursor + 1 == len(pages) else cursor + 1), pages[cursor]


@pytest.mark.parametrize(
    ("most", "budget", "found", "complete", "asked"),
    [
        pytest.param(10, 10**6, [b"a", b"b", b"c", b"d"], True, ["n1", "n1", "n2"], id="whole"),
        pytest.param(10, 2000, [b"a", b"b", b"d"], False, ["n1", "n2"], id="budget-shared"),
        pytest.param(2, 10**6, [b"a", b"b"], False, ["n1"], id="most"),
    ],
)
async def test_a_bounded_scan_lists_each_key_once_in_the_order_found_within_its_budget(
    most: int, budget: int, found: list[bytes], complete: bool, asked: list[str]
) -> None:
    """The scan an operator's reads and a journal's survey share (``nodes.scan_keys``) goes
    over the nodes in turn, keeps each key once in the order first found, shares ``budget``
    among the nodes (a page is ``SCAN``'s step of 1000 keys), stops at ``most``, and says
    whether it saw every key."""
    client = _Pages({"n1": [[b"a", b"b", b"a"], [b"c", b"b"]], "n2": [[b"d", b"a"]]})
    keys, whole = await scan_keys(client, ["n1", "n2"], "*", most, budget)
    assert (keys, whole, client.asked) == (found, complete, asked)
