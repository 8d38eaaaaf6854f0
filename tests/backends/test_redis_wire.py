"""How the Redis journal sends its scripts (``_backends/redis/wire.py``): the bytes redis-py
would send, on one connection kept out of the client's pool for the scripts, checked before
each use as the pool checks one, given back on close; one timer per attempt where the
connection has a socket timeout; and every other client sent to through ``execute_command``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from agents_reconcile._backends.journal import IntentState, Opened
from agents_reconcile._backends.redis import wire
from agents_reconcile._backends.redis.journal import _SCRIPTS, RedisJournal
from agents_reconcile._core.ownership import current_owner
from agents_reconcile.errors import JournalUnavailable

from ..support.journal_support import make_intent
from ..support.servers import redis_url

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
async def admin() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url())
    yield client
    await client.aclose()


@pytest.fixture
async def journal(prefix: str) -> AsyncIterator[tuple[RedisJournal, aioredis.Redis]]:
    """A journal on a plain client of its own (the caller's: close() leaves it open)."""
    client = aioredis.Redis.from_url(redis_url())
    made = RedisJournal(client, prefix=prefix)
    yield made, client
    await made.drop()
    await made.close()
    await client.aclose()


async def open_and_discard(journal: RedisJournal, name: str) -> None:
    owner = current_owner()
    opened = await journal.open_intent(make_intent(name), state=IntentState.IN_FLIGHT, owner=owner)
    assert opened.recorded
    await journal.discard(name)


# -- the bytes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["plain", b"bytes", ""], id="plain"),
        pytest.param(["t\u00e9xt \u2603", b"a\r\nb\x00\xff", b""], id="unicode-and-binary"),
        pytest.param(["x" * 7000, b"y" * 70_000, "z"], id="past-the-buffer-cutoff"),
    ],
)
async def test_a_script_goes_out_as_redis_py_packs_it(
    args: list[str | bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command sent is byte for byte what ``pack_command`` makes of the same arguments,
    and the same again from its key cache."""
    sent: list[bytes] = []

    async def capture(connection: Any, command: bytes) -> object:
        sent.append(command)
        return 1

    monkeypatch.setattr(wire, "_sent", capture)
    connection = Connection()
    script = _SCRIPTS["open_intent"]
    keys = [b"k:{tag}:one", f"k:{{tag}}:{uuid.uuid4().hex}".encode()]
    for _ in range(2):
        await wire._script(connection, script, keys, args)
    expected = b"".join(connection.pack_command("EVALSHA", script.sha, len(keys), *keys, *args))
    assert sent == [expected, expected]
    assert wire.packed([b"GET", b"k"]) == b"".join(connection.pack_command("GET", "k"))


# -- the kept connection -----------------------------------------------------------------------


async def test_scripts_share_one_kept_connection_which_close_gives_back(
    journal: tuple[RedisJournal, aioredis.Redis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first script, the journal's scripts take no connection from the pool; two at
    once both succeed (the second takes one from the pool and gives it back); close() returns
    the kept connection to the pool, and the client, the caller's, still works."""
    made, client = journal
    pool = client.connection_pool
    await open_and_discard(made, "i-0")
    kept = wire._KEPT[pool].connection
    taken: list[object] = []
    original = pool.get_connection

    async def counting() -> object:
        found = await original()
        taken.append(found)
        return found

    monkeypatch.setattr(pool, "get_connection", counting)
    for n in range(1, 6):
        await open_and_discard(made, f"i-{n}")
    assert taken == []
    owner = current_owner()
    both = await asyncio.gather(
        *(
            made.open_intent(
                make_intent(f"c-{n}", session_id=f"session-{n}"),
                state=IntentState.IN_FLIGHT,
                owner=owner,
            )
            for n in range(2)
        )
    )
    assert [opened.recorded for opened in both] == [True, True]
    assert len(taken) == 1 and taken[0] is not kept
    assert wire._KEPT[pool].connection is kept
    await made.close()
    assert pool not in wire._KEPT
    assert await client.ping()


async def test_a_kept_connection_the_server_closed_is_opened_again(
    journal: tuple[RedisJournal, aioredis.Redis], admin: aioredis.Redis
) -> None:
    """``CLIENT KILL`` of the kept connection between two scripts: the next one finds it
    closed, as the pool would, and goes out on a new one (the client retries nothing)."""
    made, client = journal
    await open_and_discard(made, "i-0")
    kept = wire._KEPT[client.connection_pool].connection
    kept.retry = Retry(NoBackoff(), 0)
    await kept.send_command("CLIENT", "ID")
    client_id = await kept.read_response()
    assert await admin.client_kill_filter(_id=client_id) == 1
    for _ in range(100):
        if await kept.can_read_destructive():
            break
        await asyncio.sleep(0.01)
    await open_and_discard(made, "i-1")
    assert wire._KEPT[client.connection_pool].connection is kept
    assert await made.pending("session-a") == []


async def test_the_kept_connection_is_checked_without_a_timer(
    journal: tuple[RedisJournal, aioredis.Redis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py's own RESP2 parser is asked nothing to check the kept connection: what its
    ``can_read_destructive`` would say (bytes no reply took, or the server's close) is read
    without the zero-length timer it sets; and bytes left in it still have the connection
    opened again before the next script."""
    made, client = journal
    await open_and_discard(made, "i-0")
    kept = wire._KEPT[client.connection_pool].connection
    asked: list[object] = []

    async def ask(self: Any) -> bool:
        asked.append(self)
        return False

    monkeypatch.setattr(Connection, "can_read_destructive", ask)
    await open_and_discard(made, "i-1")
    assert asked == []
    await kept.send_command("CLIENT", "ID")
    before = await kept.read_response()
    kept._parser._buffer = b"+PONG\r\n"  # a reply nobody took
    await open_and_discard(made, "i-2")
    assert wire._KEPT[client.connection_pool].connection is kept
    await kept.send_command("CLIENT", "ID")
    assert await kept.read_response() != before
    assert await made.pending("session-a") == []


async def test_a_kept_connection_marked_for_reconnecting_is_opened_anew(
    journal: tuple[RedisJournal, aioredis.Redis],
) -> None:
    """The driver marks a connection for reconnecting (its credentials were renewed, say):
    the kept connection is closed and opened anew before the next script, as the pool does
    with a connection it gets back, and the journal goes on as before."""
    made, client = journal
    await open_and_discard(made, "i-0")
    kept = wire._KEPT[client.connection_pool].connection
    await kept.send_command("CLIENT", "ID")
    before = await kept.read_response()
    kept.mark_for_reconnect()
    await open_and_discard(made, "i-1")
    assert wire._KEPT[client.connection_pool].connection is kept
    assert not kept.should_reconnect()
    await kept.send_command("CLIENT", "ID")
    assert await kept.read_response() != before
    assert await made.pending("session-a") == []


async def test_a_bounded_pool_or_a_counting_connection_goes_through_the_client(
    prefix: str,
) -> None:
    """A pool given a size keeps all its connections, and a connection class that packs its
    own way sees every command: neither is sent to by ``wire``."""

    class Counting(aioredis.Connection):
        packed = 0

        def pack_command(self, *args: Any) -> list[bytes]:
            type(self).packed += 1
            return super().pack_command(*args)

    bounded = aioredis.Redis.from_url(redis_url(), max_connections=4)
    counting = aioredis.Redis.from_url(redis_url(), connection_class=Counting)
    try:
        for client in (bounded, counting):
            assert wire._pool(client) is None
            made = RedisJournal(client, prefix=prefix)
            await open_and_discard(made, f"i-{id(client)}")
            assert client.connection_pool not in wire._KEPT
            await made.drop()
        assert Counting.packed >= 2
    finally:
        await bounded.aclose()
        await counting.aclose()


# -- the timer ---------------------------------------------------------------------------------


class Stalled:
    """A connection whose reply never comes."""

    def __init__(self, timeout: float | None) -> None:
        self.socket_timeout = timeout
        self.retry = Retry(NoBackoff(), 0)
        self.timeouts_seen: list[float | None] = []
        self.disconnected = 0
        self.reply: object = None

    async def send_packed_command(self, command: bytes) -> None:
        self.timeouts_seen.append(self.socket_timeout)

    async def read_response(self) -> object:
        if self.reply is not None:
            return self.reply
        try:
            await asyncio.sleep(30)
        except BaseException:
            await self.disconnect()
            raise
        return None

    async def disconnect(self, nowait: bool = False) -> None:
        self.disconnected += 1


async def test_an_attempt_past_the_socket_timeout_raises_the_drivers_timeout() -> None:
    """One timer times the write and the read together: past it the connection is closed and
    redis-py's TimeoutError is raised (a JournalUnavailable to the journal's caller), and the
    connection's own timeout is as it was; within it, the reply is answered."""
    stalled = Stalled(0.05)
    with pytest.raises(redis.exceptions.TimeoutError):
        await wire._sent(stalled, b"*1\r\n$4\r\nPING\r\n")
    assert stalled.timeouts_seen == [None]
    assert stalled.socket_timeout == 0.05
    assert stalled.disconnected >= 1

    stalled.reply = b"PONG"
    assert await wire._sent(stalled, b"*1\r\n$4\r\nPING\r\n") == b"PONG"
    assert stalled.socket_timeout == 0.05


async def test_a_cancelled_attempt_is_cancelled_not_timed_out() -> None:
    """A caller's cancellation goes through as a cancellation, the timeout restored."""
    stalled = Stalled(30.0)
    task = asyncio.ensure_future(wire._sent(stalled, b"*1\r\n$4\r\nPING\r\n"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stalled.socket_timeout == 30.0


async def test_a_journal_past_its_socket_timeout_is_unavailable(prefix: str) -> None:
    """Through a journal: a script that outlasts the socket timeout raises JournalUnavailable,
    and the next one, on time, succeeds."""
    client = aioredis.Redis.from_url(redis_url(), socket_timeout=5.0)
    made = RedisJournal(client, prefix=prefix)
    try:
        await open_and_discard(made, "i-0")
        kept = wire._KEPT[client.connection_pool].connection
        kept.socket_timeout = 0.000_001
        with pytest.raises(JournalUnavailable, match="Timeout"):
            await made.open_intent(
                make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner()
            )
        kept.socket_timeout = 5.0
        opened = await made.open_intent(
            make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner()
        )
        assert opened == Opened(recorded=True, write_count=opened.write_count)
    finally:
        await made.drop()
        await made.close()
        await client.aclose()
