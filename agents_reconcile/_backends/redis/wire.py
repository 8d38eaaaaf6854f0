"""Sending the journal's scripts: each one command, its bytes made in one pass, on a connection
the journal keeps at hand.

redis-py packs a command argument by argument, joining what it has so far to each one, and
takes a connection from its pool and gives it back around every command (a lock, events, a
poll of the socket): for ``open_and_append``, run on every append with twenty keys and a batch
in its arguments, that was most of the client's cost of the call. ``run`` makes the same bytes
in one join and sends them under the connection's own retry policy, as ``execute_command``
would: the same bytes, the same reply, the same retries.

The connection: one of the pool's, taken from it once and kept out of it (``_Kept``) for the
scripts of every journal on that client, while no other script is using it; a script that
finds it in use takes one from the pool as before. Before each use the kept connection is
checked as the pool checks one it hands out (connected, and nothing waiting to be read: a
reply nobody asked for, or the server's close), and opened again if it fails that.
``give_back`` returns it to the pool (``RedisJournal.close``). An attempt is timed by one
timer where the connection has a socket timeout (``_sent``).

Only a plain ``redis.asyncio.Redis`` with a ``ConnectionPool`` of its own of redis-py's
unbounded size (no single-connection client, no blocking pool or one given a size, which a
kept connection would eat into) whose connections pack as redis-py does is sent to this way;
any other client, or a connection class that packs its own way (one that counts or rewrites
commands), gets the command through ``execute_command`` as before. A script the server lacks
(``NOSCRIPT``: it ran nothing) goes again by its source, as ``LuaScript.run`` sends it.
"""

from __future__ import annotations

import asyncio
import importlib
import weakref
from collections.abc import Sequence
from typing import Any, Final

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..lua import LuaScript

__all__ = ["give_back", "packed", "run"]

_RESP2: Final[type | None] = getattr(
    importlib.import_module("redis._parsers"), "_AsyncRESP2Parser", None
)
"""redis-py's own RESP2 parser, whose check for unread bytes ``_waiting`` reads directly
(None in a redis-py without it: every kept connection then asks its parser itself)."""

_STOCK_PACK: Final = AbstractConnection.pack_command
_UNBOUNDED: Final = 2**31
"""redis-py's size of a pool given no ``max_connections``."""


class _Kept:
    """The connection kept out of one pool, and whether a script is using it."""

    __slots__ = ("busy", "connection", "returning")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.busy = False
        self.returning = False


# Weak: a pool that is gone takes its kept connection with it.
_KEPT: weakref.WeakKeyDictionary[Any, _Kept] = weakref.WeakKeyDictionary()
# Oldest first, so the oldest go first.
_KEY_SEGMENTS: dict[tuple[bytes, ...], bytes] = {}
_SEGMENTS_KEPT: Final = 1024


def packed(parts: Sequence[bytes]) -> bytes:
    """``parts`` as one command in the Redis protocol (what ``pack_command`` sends)."""
    return b"*%d\r\n" % len(parts) + _bulk(parts)


def _bulk(parts: Sequence[bytes]) -> bytes:
    return b"".join([b"$%d\r\n%b\r\n" % (len(part), part) for part in parts])


def _keys(keys: Sequence[bytes]) -> bytes:
    """How many keys there are and the keys, in the protocol: the part of a script's command
    that is the same on every call for one session, made once per session."""
    found = tuple(keys)
    segment = _KEY_SEGMENTS.get(found)
    if segment is None:
        segment = _bulk([b"%d" % len(found), *found])
        if len(_KEY_SEGMENTS) >= _SEGMENTS_KEPT:
            del _KEY_SEGMENTS[next(iter(_KEY_SEGMENTS))]
        _KEY_SEGMENTS[found] = segment
    return segment


def _encoded(encoder: Any, args: Sequence[object]) -> list[bytes]:
    """``args`` as the client's encoder writes them (text in its encoding)."""
    encoding, errors = encoder.encoding, encoder.encoding_errors
    return [
        arg
        if type(arg) is bytes
        else arg.encode(encoding, errors)
        if type(arg) is str
        else encoder.encode(arg)
        for arg in args
    ]


def _pool(client: Any) -> Any:
    """``client``'s pool when its scripts can be sent this way, else None."""
    if type(client) is not Redis or client.single_connection_client:
        return None
    pool = client.connection_pool
    if type(pool) is not ConnectionPool or pool.max_connections < _UNBOUNDED:
        return None
    if getattr(pool.connection_class, "pack_command", None) is not _STOCK_PACK:
        return None
    return pool


async def run(
    client: Any, script: LuaScript, keys: Sequence[bytes], args: Sequence[str | bytes]
) -> Any:
    """The reply of ``script`` run with ``keys`` and ``args`` through ``client``: by
    ``EVALSHA``, or by ``EVAL`` when the server lacks it."""
    pool = _pool(client)
    if pool is None:
        return await script.run(client.execute_command, keys, args)
    kept = _KEPT.get(pool)
    if kept is not None and not kept.busy:
        kept.busy = True
        try:
            connection = kept.connection
            await _checked(connection)
            return await _script(connection, script, keys, args)
        finally:
            kept.busy = False
            if kept.returning:
                await _return(pool, kept)
    connection = await pool.get_connection()
    try:
        return await _script(connection, script, keys, args)
    finally:
        if kept is None and pool not in _KEPT:
            _KEPT[pool] = _Kept(connection)
        else:
            await pool.release(connection)


async def give_back(client: Any) -> None:
    """Return the connection kept out of ``client``'s pool to it (at once, or when the script
    using it ends)."""
    pool = client.connection_pool if type(client) is Redis else None
    kept = _KEPT.get(pool) if pool is not None else None
    if kept is None:
        return
    kept.returning = True
    if not kept.busy:
        await _return(pool, kept)


async def _return(pool: Any, kept: _Kept) -> None:
    if _KEPT.get(pool) is kept:
        del _KEPT[pool]
        await pool.release(kept.connection)


async def _checked(connection: Any) -> None:
    """As the pool checks a connection it hands out: connected, and nothing waiting to be read
    (a reply nobody asked for, or the server's close); reconnected otherwise. One the driver
    marked for reconnecting (new credentials, a server that moved) is closed first, as the pool
    closes it when it comes back."""
    marked = getattr(connection, "should_reconnect", None)
    if marked is not None and marked():
        await connection.disconnect()
    if not connection.is_connected:
        await connection.connect()
    try:
        waiting = _waiting(connection)
        if waiting is None:
            waiting = await connection.can_read_destructive()
        if waiting:
            raise RedisConnectionError("Connection has data")
    except (RedisConnectionError, RedisTimeoutError, OSError):
        await connection.disconnect()
        await connection.connect()
        if await connection.can_read_destructive():
            raise RedisConnectionError("Connection not ready") from None


def _waiting(connection: Any) -> bool | None:
    """What ``can_read_destructive`` answers for a connection read by redis-py's own RESP2
    parser, without its zero-length timer (the parser's check never awaits anything): whether
    the parser holds bytes no reply has taken, or the server closed the stream. None for any
    other parser, or one that is not connected, which is asked itself."""
    parser = getattr(connection, "_parser", None)
    if _RESP2 is None or type(parser) is not _RESP2 or not getattr(parser, "_connected", False):
        return None
    stream = getattr(parser, "_stream", None)
    buffer = getattr(parser, "_buffer", None)
    if stream is None or buffer is None:
        return None
    return bool(buffer) or bool(stream.at_eof())


async def _script(
    connection: Any, script: LuaScript, keys: Sequence[bytes], args: Sequence[str | bytes]
) -> Any:
    count = 3 + len(keys) + len(args)
    tail = _keys(keys) + _bulk(_encoded(connection.encoder, args))
    sha = script.sha.encode()
    try:
        return await _sent(
            connection, b"*%d\r\n$7\r\nEVALSHA\r\n$%d\r\n%b\r\n%b" % (count, len(sha), sha, tail)
        )
    except NoScriptError:
        source = script.source.encode()
        return await _sent(
            connection, b"*%d\r\n$4\r\nEVAL\r\n$%d\r\n%b\r\n%b" % (count, len(source), source, tail)
        )


async def _sent(connection: Any, command: bytes) -> Any:
    """``command`` sent and its reply read, retried as the connection's policy says (as
    ``execute_command`` does: a dropped connection is closed before the next attempt).

    A connection with a ``socket_timeout`` has each attempt timed once, from the first byte
    sent to the last one read, rather than its write and its read timed apart: one timer
    instead of two, and no task for the write. Past it, the connection is closed and the
    attempt raises redis-py's ``TimeoutError``, as a write or read that timed out does."""
    timeout = connection.socket_timeout

    async def attempt() -> Any:
        if not timeout:
            await connection.send_packed_command(command)
            return await connection.read_response()
        connection.socket_timeout = None
        try:
            async with asyncio.timeout(timeout):
                await connection.send_packed_command(command)
                return await connection.read_response()
        except TimeoutError:
            # The timer's own: redis-py closed the connection when it cancelled the I/O.
            await connection.disconnect(nowait=True)
            raise RedisTimeoutError(
                f"Timeout sending a script or reading its reply ({timeout} s)"
            ) from None
        finally:
            connection.socket_timeout = timeout

    async def dropped(_error: BaseException) -> None:
        await connection.disconnect()

    return await connection.retry.call_with_retry(attempt, dropped)
