"""``RevisionedRedisSession`` on a real Redis server: what the conformance suite cannot see.

The write script's atomicity under concurrent clients, tail-only reads, the stored format
(the SDK's ``RedisSession`` reads it), clients and identity, reconciliation through the
wrapper, and connections that die: killed by the server while idle, or losing a write's reply.
The schema version, closing and a second event loop are in ``test_store_conformance.py``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis.exceptions
from agents.extensions.memory import RedisSession
from redis.asyncio import Connection, ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from agents_reconcile import Action, Outcome, Reason, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.redis.store import RevisionedRedisSession
from agents_reconcile._core.identity import derive_identity
from agents_reconcile.errors import ConfigurationError, RevisionConflict
from agents_reconcile.testing import (
    BackendFailure,
    Fault,
    FaultInjectingRevisionedSession,
    FaultInjectingSession,
)

from ..support.servers import redis_url

pytestmark = pytest.mark.redis

USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


@pytest.fixture
def url() -> str:
    return redis_url()


@pytest.fixture
async def admin(url: str) -> AsyncIterator[Redis]:
    """A plain client of the test's own, to look at (and break) things from outside."""
    client = Redis.from_url(url)
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(admin: Redis) -> AsyncIterator[str]:
    """A key prefix of this test's own, deleted afterwards."""
    name = f"t-redis-{uuid.uuid4().hex[:12]}"
    yield name
    keys = [key async for key in admin.scan_iter(match=f"{name}*")]
    if keys:
        await admin.unlink(*keys)


@pytest.fixture
async def opened() -> AsyncIterator[list[Any]]:
    """Stores and clients a test opens, closed after it."""
    things: list[Any] = []
    yield things
    for thing in reversed(things):
        if isinstance(thing, Redis):
            await thing.aclose()
        else:
            await thing.close()


async def names_connected(admin: Redis, name: str) -> list[int]:
    """Ids of the server's clients named ``name``."""
    clients = await admin.client_list()
    return [int(entry["id"]) for entry in clients if entry.get("name") == name]


# -- atomicity --------------------------------------------------------------------------------


async def test_concurrent_append_if_on_one_head_has_exactly_one_winner(
    url: str, prefix: str, opened: list[Any]
) -> None:
    """Twenty appends against the same head from four clients (four connection pools): the
    script checks and moves the head with nothing in between, so one wins each round."""
    clients = [Redis.from_url(url) for _ in range(4)]
    opened.extend(clients)
    stores = [
        RevisionedRedisSession("shared", clients[index % 4], prefix=prefix) for index in range(20)
    ]
    for round_number in range(3):
        head = await stores[0].head()

        async def attempt(
            index: int,
            store: RevisionedRedisSession,
            head: int = head,
            round_number: int = round_number,
        ) -> int:
            try:
                return await store.append_if(
                    [item(f"r{round_number}-{index}")],
                    expected=head,
                    write_id=f"r{round_number}-{index}",
                    writer=f"worker-{index}",
                )
            except RevisionConflict as conflict:
                assert conflict.expected == head and conflict.actual >= head + 1
                return 0

        results = await asyncio.gather(*(attempt(i, s) for i, s in enumerate(stores)))
        assert sorted(results, reverse=True)[:2] == [head + 1, 0]
        assert sum(1 for result in results if result) == 1
    assert await stores[5].head() == 3
    assert len(await stores[7].get_items()) == 3
    assert [w.revision for w in await stores[9].writes_after(0)] == [1, 2, 3]


async def test_concurrent_plain_writes_get_consecutive_revisions(
    url: str, prefix: str, opened: list[Any]
) -> None:
    """Plain appends and pops from many clients at once: every write is recorded at its own
    revision, with no gap and no two at one revision, and the items add up."""
    clients = [Redis.from_url(url) for _ in range(4)]
    opened.extend(clients)
    stores = [RevisionedRedisSession("busy", clients[i % 4], prefix=prefix) for i in range(8)]
    await stores[0].add_items([item("seed") for _ in range(10)])

    async def work(index: int, store: RevisionedRedisSession) -> None:
        for step in range(5):
            if (index + step) % 3 == 0:
                await store.pop_item()
            else:
                await store.add_items([item(f"{index}-{step}"), item(f"{index}-{step}b")])

    await asyncio.gather(*(work(i, s) for i, s in enumerate(stores)))
    writes = await stores[0].writes_after(0, limit=1000)
    assert [w.revision for w in writes] == list(range(1, 42))
    assert await stores[0].head() == 41
    appended = sum(w.count for w in writes if w.kind == "append")
    popped = sum(w.count for w in writes if w.kind == "pop")
    assert len(await stores[0].get_items()) == appended - popped
    assert len({w.write_id for w in writes}) == 41


async def test_a_large_batch_is_one_write(url: str, prefix: str, opened: list[Any]) -> None:
    """A batch larger than one Lua call's argument slice is still one recorded write."""
    store = RevisionedRedisSession.from_url("big", url, prefix=prefix)
    opened.append(store)
    batch = [item(f"m{i}") for i in range(2500)]
    assert await store.append_if(batch, expected=0, write_id="w-big", writer="me") == 1
    found = await store.find_write("w-big")
    assert found is not None and found.count == 2500
    assert await store.get_items() == batch


# -- reads ------------------------------------------------------------------------------------


class SpyRedis(Redis):
    """A client that remembers the commands it sends (reads go through ``execute_command``)."""

    sent: list[tuple[Any, ...]]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if not hasattr(self, "sent"):
            self.sent = []
        self.sent.append(args)
        return await super().execute_command(*args, **options)


async def test_get_items_with_a_limit_asks_only_for_the_tail(
    url: str, prefix: str, opened: list[Any]
) -> None:
    """Limited reads ask the server for the tail only (LRANGE, ZRANGEBYSCORE with a limit)."""
    spy = SpyRedis.from_url(url)
    opened.append(spy)
    store = RevisionedRedisSession("long", spy, prefix=prefix)
    history = [item(f"m{i}") for i in range(60)]
    for start in range(0, 60, 6):
        await store.add_items(history[start : start + 6])
    spy.sent = []
    assert await store.get_items(limit=2) == history[-2:]
    reads = [args for args in spy.sent if args[0] == "LRANGE"]
    assert reads == [("LRANGE", f"{prefix}:{{long}}:items", -2, -1)]

    spy.sent = []
    assert await store.get_items(limit=0) == []
    assert not [args for args in spy.sent if args[0] == "LRANGE"]

    spy.sent = []
    writes = await store.writes_after(4, limit=3)
    assert [w.revision for w in writes] == [5, 6, 7]
    [query] = [args for args in spy.sent if args[0] == "ZRANGEBYSCORE"]
    assert [str(part) for part in query[2:]] == ["(4", "+inf", "LIMIT", "0", "3"]


async def test_items_are_json_text_in_a_list_the_sdk_can_read(
    url: str, prefix: str, admin: Redis, opened: list[Any]
) -> None:
    """The items key is a list of JSON strings, as the SDK's ``RedisSession`` keeps them:
    copied under the SDK's key name, the SDK's own session reads the same history."""
    store = RevisionedRedisSession.from_url("fmt", url, prefix=prefix)
    opened.append(store)
    history = [
        item("héllo, wörld"),
        item("answer", "assistant"),
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    await store.add_items(history[:2])
    await store.append_if(history[2:], expected=1, write_id="w", writer="me")

    key = f"{prefix}:{{fmt}}:items"
    assert await admin.type(key) == b"list"
    raw = await admin.lrange(key, 0, -1)
    assert [json.loads(entry.decode("utf-8")) for entry in raw] == history

    sdk_prefix = f"{prefix}-sdk"
    assert await admin.copy(key, f"{sdk_prefix}:fmt:messages")
    sdk = RedisSession("fmt", redis_client=admin, key_prefix=sdk_prefix)
    assert await sdk.get_items() == history
    assert await sdk.get_items(limit=1) == history[-1:]


# -- clients and drivers ----------------------------------------------------------------------


async def test_a_client_that_decodes_responses_works_too(
    url: str, prefix: str, opened: list[Any]
) -> None:
    """A store on a client that decodes responses reads and writes the same."""
    client = Redis.from_url(url, decode_responses=True)
    opened.append(client)
    store = RevisionedRedisSession("text", client, prefix=prefix)
    await store.add_items([USER, ANSWER])
    assert await store.append_if([item("x")], expected=1, write_id="w", writer="me") == 2
    assert await store.pop_item() == item("x")
    assert await store.get_items(limit=1) == [ANSWER]
    found = await store.find_write("w")
    assert found is not None and (found.revision, found.writer) == (2, "me")
    assert [w.kind for w in await store.writes_after(0)] == ["append", "append", "pop"]


def test_without_redis_py_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without redis-py the error names the extra to install."""
    for name in [name for name in sys.modules if name == "redis" or name.startswith("redis.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "agents_reconcile._backends.redis.store")
    with pytest.raises(
        ConfigurationError, match=re.escape("pip install 'agents-reconcile[redis]'")
    ):
        importlib.import_module("agents_reconcile._backends.redis.store")


# -- identity, sharing, dropping --------------------------------------------------------------


async def test_namespace_names_the_server_without_credentials(url: str, opened: list[Any]) -> None:
    """The namespace names server, database and prefix without credentials, the same for a client
    or a URL."""
    secret = "s3cret-pass"
    store = RevisionedRedisSession.from_url(
        "s", f"redis://someone:{secret}@127.0.0.1:6390/4", prefix="p"
    )
    assert store.backend_namespace == "redis://127.0.0.1:6390/4 prefix=p"
    assert secret not in repr(store) and "someone" not in repr(store)
    assert derive_identity(FaultInjectingSession(store)).namespace == store.backend_namespace

    client = Redis.from_url(url)
    opened.append(client)
    given = RevisionedRedisSession("s", client, prefix="p")
    same = RevisionedRedisSession.from_url("s", url, prefix="p")
    assert given.backend_namespace == same.backend_namespace
    assert given.backend_namespace.endswith(" prefix=p")


async def test_sessions_from_one_url_share_a_client_until_the_last_closes(
    url: str, prefix: str, admin: Redis
) -> None:
    """Sessions of one URL share one client, closed by the last of them, and reopen when used."""
    name = f"share-{uuid.uuid4().hex[:8]}"
    one = RevisionedRedisSession.from_url("a", url, prefix=prefix, client_name=name)
    two = RevisionedRedisSession.from_url("b", url, prefix=prefix, client_name=name)
    await one.add_items([USER])
    await two.add_items([ANSWER])
    assert await one.get_items() == [USER] and await two.get_items() == [ANSWER]
    assert len(await names_connected(admin, name)) == 1
    await one.close()
    assert await two.get_items() == [ANSWER]
    await two.close()
    await asyncio.sleep(0.05)
    assert await names_connected(admin, name) == []
    assert await one.get_items() == [USER]  # a closed object opens again when used
    await one.close()


async def test_drop_deletes_only_its_prefix(url: str, prefix: str, admin: Redis) -> None:
    """drop() deletes the keys of its own prefix only, glob characters matched literally."""
    odd = f"{prefix}*[x]"  # glob characters in the prefix are matched literally
    store = RevisionedRedisSession.from_url("a", url, prefix=odd)
    neighbour = RevisionedRedisSession.from_url("c", url, prefix=odd)
    other = RevisionedRedisSession.from_url("b", url, prefix=f"{prefix}*[x]2")
    try:
        await store.add_items([USER])
        await neighbour.add_items([USER])
        await other.add_items([USER])
        await store.drop()
        left = sorted([key.decode() async for key in admin.scan_iter(match=f"{prefix}*")])
        assert left and all(key.startswith(f"{prefix}*[x]2:") for key in left)
        assert await other.get_items() == [USER]
        assert await store.get_items() == []
    finally:
        await other.drop()
        for opened_store in (other, neighbour, store):
            await opened_store.close()


# -- reconciliation through the wrapper -------------------------------------------------------


async def test_a_lost_acknowledgement_reconciles_to_committed(
    url: str, prefix: str, tmp_path: Path, opened: list[Any]
) -> None:
    """A lost acknowledgement under the wrapper reconciles to committed by the write id."""
    store = RevisionedRedisSession.from_url("chat", url, prefix=prefix)
    opened.append(store)
    faulty = FaultInjectingSession(store)
    assert isinstance(faulty, FaultInjectingRevisionedSession)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "j.db"))
    await session.add_items([USER])
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([ANSWER])
    [decision] = await session.reconcile()
    assert decision.outcome is Outcome.COMMITTED
    assert decision.reason is Reason.WRITE_FOUND and decision.reason.value == "write_found"
    assert decision.action is Action.SETTLED
    assert await store.get_items() == [USER, ANSWER]
    assert await store.head() == 2


async def test_a_rejected_write_is_replayed_once(
    url: str, prefix: str, tmp_path: Path, opened: list[Any]
) -> None:
    """A rejected write under the wrapper is found absent and replayed once."""
    store = RevisionedRedisSession.from_url("chat", url, prefix=prefix)
    opened.append(store)
    faulty = FaultInjectingSession(store)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "j.db"))
    await session.add_items([USER])
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([ANSWER])
    [decision] = await session.reconcile()
    assert decision.outcome is Outcome.UNCHANGED
    assert decision.reason is Reason.WRITE_ABSENT and decision.reason.value == "write_absent"
    assert decision.action is Action.REPLAYED
    assert await store.get_items() == [USER, ANSWER]
    assert [w.kind for w in await store.writes_after(0)] == ["append", "append"]


# -- connections that die ---------------------------------------------------------------------


async def test_a_connection_killed_by_the_server_is_survived(
    url: str, prefix: str, admin: Redis, opened: list[Any]
) -> None:
    """``CLIENT KILL`` from another client between operations: the next read and the next
    writes each succeed on a fresh connection."""
    name = f"victim-{uuid.uuid4().hex[:8]}"
    store = RevisionedRedisSession.from_url("s", url, prefix=prefix, client_name=name)
    opened.append(store)
    await store.add_items([USER])

    async def kill() -> None:
        victims = await names_connected(admin, name)
        assert victims
        for client_id in victims:
            await admin.client_kill_filter(_id=client_id)
        assert await names_connected(admin, name) == []

    operations: list[Callable[[], Awaitable[Any]]] = [
        store.get_items,
        lambda: store.append_if([ANSWER], expected=1, write_id="w-2", writer="me"),
        lambda: store.add_items([item("more")]),
        store.pop_item,
        store.head,
    ]
    for operation in operations:
        await kill()
        await operation()
    assert await store.get_items() == [USER, ANSWER]
    assert await store.head() == 4


def reply_losing_client(url: str) -> tuple[Redis, type[Any]]:
    """A client whose next write-script reply, once armed, is lost after the server ran it.
    Its connections retry failed commands, as ``Redis(host=...)`` clients do by default."""

    class ReplyLosingConnection(Connection):
        armed: ClassVar[bool] = False
        scripts_sent: ClassVar[int] = 0
        last: str = ""

        async def send_command(self, *args: Any, **kwargs: Any) -> None:
            self.last = str(args[0])
            if self.last == "EVALSHA":
                type(self).scripts_sent += 1
            await super().send_command(*args, **kwargs)

        async def read_response(self, *args: Any, **kwargs: Any) -> Any:
            response = await super().read_response(*args, **kwargs)
            if type(self).armed and self.last == "EVALSHA":
                type(self).armed = False
                await self.disconnect()
                raise redis.exceptions.ConnectionError("test: the reply was lost")
            return response

    pool = ConnectionPool.from_url(
        url, connection_class=ReplyLosingConnection, retry=Retry(NoBackoff(), 3)
    )
    return Redis(connection_pool=pool), ReplyLosingConnection


async def test_a_write_whose_reply_is_lost_is_sent_once_and_raises_the_drivers_error(
    url: str, prefix: str, opened: list[Any]
) -> None:
    """The driver would retry a command whose reply it lost; a pop sent twice would remove two
    items. The write is sent once and the caller gets the driver's own exception."""
    client, connection = reply_losing_client(url)
    opened.append(client)
    store = RevisionedRedisSession("s", client, prefix=prefix)
    await store.add_items([item("a"), item("b"), item("c")])
    sent = connection.scripts_sent
    connection.armed = True
    with pytest.raises(redis.exceptions.ConnectionError, match="reply was lost"):
        await store.pop_item()
    assert connection.scripts_sent == sent + 1
    assert await store.get_items() == [item("a"), item("b")]
    assert [w.kind for w in await store.writes_after(1)] == ["pop"]


async def test_a_real_lost_reply_under_the_wrapper_reconciles_to_committed(
    url: str, prefix: str, tmp_path: Path, opened: list[Any]
) -> None:
    """A reply really lost on the wire raises the driver's error with the intent's note, and
    reconciles to committed."""
    client, connection = reply_losing_client(url)
    opened.append(client)
    store = RevisionedRedisSession("chat", client, prefix=prefix)
    session = ReconcilingSession(store, config=ReconcileConfig(journal=tmp_path / "j.db"))
    await session.add_items([USER])
    connection.armed = True
    with pytest.raises(redis.exceptions.ConnectionError) as failure:
        await session.add_items([ANSWER])
    assert any("intent" in note for note in getattr(failure.value, "__notes__", []))
    [decision] = await session.reconcile()
    assert (decision.outcome, decision.reason) == (Outcome.COMMITTED, Reason.WRITE_FOUND)
    assert await store.get_items() == [USER, ANSWER]
    assert await store.head() == 2


@pytest.mark.parametrize("session_id", ["}starts-with-a-brace", "a}b", "", "{x}"])
async def test_every_session_id_keeps_its_keys_on_one_slot(
    url: str, prefix: str, admin: Redis, opened: list[Any], session_id: str
) -> None:
    """A hash tag a ``}`` would cut short (or empty) is replaced by a digest of the id: the
    session's keys share one non-empty tag, so one cluster slot, and no other id's keys."""
    from redis.crc import key_slot

    store = RevisionedRedisSession.from_url(session_id, url, prefix=prefix)
    opened.append(store)
    neighbour = RevisionedRedisSession.from_url(session_id + "x", url, prefix=prefix)
    opened.append(neighbour)
    await store.add_items([item("one")])
    await neighbour.add_items([item("other")])
    keys = [key.decode() for key in await store.prepared()]
    assert len({key_slot(key.encode()) for key in keys}) == 1
    tag = keys[0][keys[0].index("{") + 1 : keys[0].index("}")]
    assert tag
    assert not set(keys) & {key.decode() for key in await neighbour.prepared()}
    assert [entry["content"] for entry in await store.get_items()] == ["one"]
