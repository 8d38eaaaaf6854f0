"""``RevisionedRedisSession``: a revisioned SDK session on Redis.

Items are kept as the SDK's ``RedisSession`` keeps them, as JSON text in a Redis list. Every
write (an append, a pop, a clear) is one server-side Lua script (``redis_scripts/write.lua``)
that checks the head, stores or removes the items, records the write and moves the head, with
nothing able to run in between.

Keys, all of one session under one hash tag (a cluster keeps them on one slot)::

    <prefix>:{<session_id>}:items    list of items, JSON text, oldest first
    <prefix>:{<session_id>}:head     the head revision (absent = 0)
    <prefix>:{<session_id>}:writes   sorted set of write records, scored by revision
    <prefix>:{<session_id>}:ids      hash: write id -> its record
    <prefix>:store-schema            the layout's version (apart from a journal's key)

``get_items(limit)`` reads only the tail it needs (``LRANGE -limit -1``); ``writes_after``
reads a score range of the sorted set. A write script is sent exactly once, whatever retry
policy the client has: a retry after a lost reply would run the write again (popping twice, or
refusing a committed append as a conflict). A write's connection error reaches the caller as
the driver raised it, and the caller settles the write by its id. Reads go through the client
and keep its retries.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, cast

from ..errors import ConfigurationError, RevisionConflict, SchemaMismatch
from ..revision import WriteRecord
from ._common import ANONYMOUS, decode_item, encode_item, new_write_id, valid_limit

try:
    from redis.asyncio import Redis
    from redis.asyncio.connection import SSLConnection, parse_url
    from redis.commands.core import AsyncScript
    from redis.exceptions import NoScriptError, ResponseError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ConfigurationError(
        "RevisionedRedisSession needs redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["DEFAULT_PREFIX", "SCHEMA_VERSION", "RevisionedRedisSession"]

SCHEMA_VERSION: Final = 1
DEFAULT_PREFIX: Final = "agents-reconcile-store"

_WRITE_SCRIPT: Final = (
    resources.files(__package__ or "agents_reconcile.stores")
    .joinpath("redis_scripts", "write.lua")
    .read_text(encoding="utf-8")
)
_DROP_BATCH: Final = 500


# -- clients shared by sessions built from one URL ----------------------------------------


@dataclass
class _Shared:
    client: Redis
    users: int = 0


_ShareKey = tuple[str, str]
# Per event loop (a client's connections belong to the loop that opened them), then per URL
# and options. Weak on the loop: a finished loop takes its entries with it.
_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_ShareKey, _Shared]] = (
    weakref.WeakKeyDictionary()
)


def _share_key(url: str, options: dict[str, Any]) -> _ShareKey:
    return url, repr(sorted(options.items(), key=lambda pair: pair[0]))


# -- the session ----------------------------------------------------------------------------


class RevisionedRedisSession:
    """A full SDK ``Session`` (usable with ``Runner.run`` directly) that is also a
    ``RevisionedStore``, on one Redis server.

    Build it around a client you manage (``close()`` then leaves the client alone), or with
    ``from_url``: sessions built from the same URL and options in one event loop share one
    client, which the last of them to ``close()`` closes.
    """

    session_settings: Any

    def __init__(
        self,
        session_id: str,
        client: Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        migrate: bool = True,
    ) -> None:
        self._setup(session_id, prefix, migrate)
        self._given: Redis | None = client
        self._namespace = _namespace(_client_kwargs(client), self.prefix)

    @classmethod
    def from_url(
        cls,
        session_id: str,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        migrate: bool = True,
        **client_options: Any,
    ) -> RevisionedRedisSession:
        """A session on the server at ``url`` (``redis://``, ``rediss://`` or ``unix://``);
        ``client_options`` go to ``redis.asyncio.Redis.from_url``."""
        try:
            parsed = dict(parse_url(url))
        except ValueError as exc:
            # The message of a URL error could repeat the URL, password included.
            raise ConfigurationError("not a Redis URL: use redis://, rediss:// or unix://") from exc
        self = cls.__new__(cls)
        self._setup(session_id, prefix, migrate)
        self._given = None
        self._url = url
        self._options = dict(client_options)
        self._namespace = _namespace({**client_options, **parsed}, self.prefix)
        return self

    def _setup(self, session_id: str, prefix: str, migrate: bool) -> None:
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise ConfigurationError(
                f"prefix must be a non-empty string without braces: {prefix!r}"
            )
        self.session_id = session_id
        self.session_settings = None
        self.prefix = prefix
        base = f"{prefix}:{{{session_id}}}"
        self._items_key = f"{base}:items"
        self._head_key = f"{base}:head"
        self._writes_key = f"{base}:writes"
        self._ids_key = f"{base}:ids"
        self._schema_key = f"{prefix}:store-schema"
        self._migrate_on_open = migrate
        self._url = ""
        self._options: dict[str, Any] = {}
        self._held: _Shared | None = None
        self._held_loop: asyncio.AbstractEventLoop | None = None
        self._script: AsyncScript | None = None
        self._script_client: Redis | None = None
        self._schema_checked = False

    def __repr__(self) -> str:
        return f"RevisionedRedisSession({self.session_id!r}, {self._namespace!r})"

    @property
    def backend_namespace(self) -> str:
        """Which server, database and prefix, without credentials: the backend's identity."""
        return self._namespace

    # -- client ------------------------------------------------------------------------------

    def _client(self) -> Redis:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._held is not None and self._held_loop is loop:
            return self._held.client
        if self._held is not None:
            # Opened in another (finished) loop: its connections cannot serve this one.
            self._held.users -= 1
            self._held = None
        per_loop = _SHARED.setdefault(loop, {})
        key = _share_key(self._url, self._options)
        shared = per_loop.get(key)
        if shared is None:
            shared = per_loop[key] = _Shared(Redis.from_url(self._url, **self._options))
        shared.users += 1
        self._held, self._held_loop = shared, loop
        return shared.client

    async def _ready(self) -> Redis:
        client = self._client()
        if not self._schema_checked:
            await self._prepare(client)
            self._schema_checked = True
        return client

    async def close(self) -> None:
        """Release the client this object holds (a later call opens it again). A client
        passed to the constructor is the caller's and stays open."""
        held, loop = self._held, self._held_loop
        self._held = self._held_loop = None
        self._script = self._script_client = None
        if held is None:
            return
        held.users -= 1
        if held.users > 0:
            return
        if loop is not None:
            per_loop = _SHARED.get(loop)
            if per_loop is not None:
                key = _share_key(self._url, self._options)
                if per_loop.get(key) is held:
                    del per_loop[key]
        if loop is asyncio.get_running_loop():
            await held.client.aclose()

    async def drop(self) -> None:
        """Delete every key under this object's prefix (all its sessions and the schema).
        For tests and operators; walks the keys with SCAN, never KEYS."""
        client = self._client()
        batch: list[Any] = []
        async for key in client.scan_iter(match=f"{_glob_escape(self.prefix)}:*", count=500):
            batch.append(key)
            if len(batch) >= _DROP_BATCH:
                await client.unlink(*batch)
                batch.clear()
        if batch:
            await client.unlink(*batch)
        self._schema_checked = False

    # -- schema ------------------------------------------------------------------------------

    async def _read_version(self, client: Redis) -> int | None:
        raw = await client.get(self._schema_key)
        if raw is None:
            return None
        try:
            version = int(_text(raw))
        except ValueError:
            version = 0
        if version < 1:
            raise SchemaMismatch(
                f"{self._namespace}: {self._schema_key} holds {_text(raw)[:40]!r}, not a "
                "revisioned-store schema version"
            )
        return version

    def _newer(self, version: int) -> SchemaMismatch:
        return SchemaMismatch(
            f"{self._namespace} has revisioned-store schema version {version}, newer than this "
            f"release's {SCHEMA_VERSION}; upgrade agents-reconcile"
        )

    async def _prepare(self, client: Redis) -> None:
        version = await self._read_version(client)
        if version == SCHEMA_VERSION:
            return
        if version is not None:
            raise self._newer(version)
        if not self._migrate_on_open:
            raise SchemaMismatch(
                f"{self._namespace} has no revisioned-store schema; run `agents-reconcile migrate`"
            )
        await self._set_version(client)

    async def _set_version(self, client: Redis) -> bool:
        created = bool(await client.set(self._schema_key, SCHEMA_VERSION, nx=True))
        # Another process may have set it first (to this version, or a newer one).
        version = await self._read_version(client)
        if version is not None and version != SCHEMA_VERSION:
            raise self._newer(version)
        return created

    async def migrate(self) -> list[str]:
        """Record the schema version when absent; return the steps applied (none when
        current). A newer version is refused."""
        client = self._client()
        version = await self._read_version(client)
        if version is not None and version > SCHEMA_VERSION:
            raise self._newer(version)
        steps: list[str] = []
        if version is None and await self._set_version(client):
            steps.append(f"revisioned store schema {SCHEMA_VERSION}")
        self._schema_checked = True
        return steps

    async def check(self) -> str | None:
        """None when the server has this release's schema; else what is wrong. Writes
        nothing."""
        try:
            version = await self._read_version(self._client())
        except SchemaMismatch as exc:
            return str(exc)
        if version is None:
            return f"{self._namespace}: no revisioned-store schema (run migrate)"
        if version > SCHEMA_VERSION:
            return f"{self._namespace}: schema version {version} is newer than {SCHEMA_VERSION}"
        return None

    # -- writes ------------------------------------------------------------------------------

    async def _write(
        self, kind: str, *, expected: int | None, write_id: str, writer: str, rows: list[bytes]
    ) -> tuple[str, int, Any]:
        """Run the write script once; return its verdict, the revision and a popped item."""
        client = await self._ready()
        if self._script is None or self._script_client is not client:
            self._script, self._script_client = client.register_script(_WRITE_SCRIPT), client
        script = self._script
        keys = (self._items_key, self._head_key, self._writes_key, self._ids_key)
        args = (kind, "" if expected is None else str(int(expected)), write_id, writer, *rows)
        try:
            reply = await _send_once(client, "EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            # The server does not know the script (restarted, flushed, or another server):
            # nothing ran, so loading it and sending once more is not a repeated write.
            script.sha = _text(await client.script_load(script.script))
            reply = await _send_once(client, "EVALSHA", script.sha, len(keys), *keys, *args)
        verdict, revision = _text(reply[0]), int(reply[1])
        if verdict == "head":
            assert expected is not None
            raise RevisionConflict(
                f"session {self.session_id!r} is at revision {revision}, not {expected}",
                expected=expected,
                actual=revision,
            )
        if verdict == "known":
            raise RevisionConflict(
                f"write {write_id} is already recorded for session {self.session_id!r}",
                expected=revision if expected is None else expected,
                actual=revision,
            )
        return verdict, revision, reply[2] if len(reply) > 2 else None

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        rows = [encode_item(item, index) for index, item in enumerate(items)]
        _, revision, _ = await self._write(
            "append", expected=expected, write_id=write_id, writer=writer, rows=rows
        )
        return revision

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        rows = [encode_item(item, index) for index, item in enumerate(items)]
        await self._write(
            "append", expected=None, write_id=new_write_id(), writer=ANONYMOUS, rows=rows
        )

    async def pop_item(self) -> Any | None:
        verdict, _, raw = await self._write(
            "pop", expected=None, write_id=new_write_id(), writer=ANONYMOUS, rows=[]
        )
        return None if verdict == "empty" else decode_item(raw)

    async def clear_session(self) -> None:
        await self._write(
            "clear", expected=None, write_id=new_write_id(), writer=ANONYMOUS, rows=[]
        )

    # -- reads -------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        limit = valid_limit(limit)
        client = await self._ready()
        if limit == 0:
            return []
        start = 0 if limit is None else -limit
        rows = await cast("Awaitable[list[Any]]", client.lrange(self._items_key, start, -1))
        return [decode_item(row) for row in rows]

    async def head(self) -> int:
        client = await self._ready()
        raw = await client.get(self._head_key)
        return 0 if raw is None else int(raw)

    async def find_write(self, write_id: str) -> WriteRecord | None:
        client = await self._ready()
        raw = await cast("Awaitable[bytes | str | None]", client.hget(self._ids_key, write_id))
        return None if raw is None else _record(raw)

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        client = await self._ready()
        rows = await client.zrangebyscore(
            self._writes_key, f"({int(revision)}", "+inf", start=0, num=int(limit)
        )
        return [_record(row) for row in rows]


# -- helpers --------------------------------------------------------------------------------


async def _send_once(client: Redis, *args: Any) -> Any:
    """Send one command on a connection of ``client``'s pool, without the driver's retry.

    A connection the server dropped while idle is replaced before sending (the pool checks
    it); an error after sending leaves the write's fate unknown and is raised as it is.
    """
    pool: Any = client.connection_pool  # its methods are untyped
    connection = await pool.get_connection()
    try:
        await connection.send_command(*args)
        return await connection.read_response()
    except ResponseError:
        raise  # the server answered: the connection is in a clean state
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    finally:
        await pool.release(connection)


def _record(raw: bytes | str) -> WriteRecord:
    data = decode_item(raw)
    return WriteRecord(
        revision=int(data["revision"]),
        write_id=str(data["write_id"]),
        writer=str(data["writer"]),
        kind=str(data["kind"]),
        count=int(data["count"]),
        at=float(data["at"]),
    )


def _text(value: bytes | str | int) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


def _client_kwargs(client: Redis) -> dict[str, Any]:
    kwargs = dict(client.connection_pool.connection_kwargs)
    kwargs.setdefault("connection_class", client.connection_pool.connection_class)
    return kwargs


def _namespace(kwargs: dict[str, Any], prefix: str) -> str:
    """The server, database and prefix, as a URL without credentials."""
    db = kwargs.get("db") or 0
    path = kwargs.get("path")
    if path:
        return f"unix://{path}?db={db} prefix={prefix}"
    connection_class = kwargs.get("connection_class")
    secure = isinstance(connection_class, type) and issubclass(connection_class, SSLConnection)
    host = str(kwargs.get("host") or "localhost")
    if ":" in host:
        host = f"[{host}]"
    port = kwargs.get("port") or 6379
    return f"{'rediss' if secure else 'redis'}://{host}:{port}/{db} prefix={prefix}"
