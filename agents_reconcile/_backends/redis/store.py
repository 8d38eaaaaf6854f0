"""``RevisionedRedisSession``: a revisioned SDK session on Redis.

Items are kept as the SDK's ``RedisSession`` keeps them, as JSON text in a Redis list. Every
write (an append, a pop, a clear) is one server-side Lua script (``scripts/write.lua``)
that checks the head, stores or removes the items, records the write and moves the head, with
nothing able to run in between.

Keys, all of one session under one hash tag (a cluster keeps them on one slot); ``<tag>`` is
the session id, or ``#{<digest of the id>}`` for an id holding ``}`` (``session_base``)::

    <prefix>:{<session_id>}:items    list of items, JSON text, oldest first
    <prefix>:{<session_id>}:head     the head revision (absent = 0)
    <prefix>:{<session_id>}:writes   sorted set of write records, scored by revision
    <prefix>:{<session_id>}:ids      hash: write id -> its record
    <prefix>:store-schema            the layout's version (apart from a journal's key)

``get_items(limit)`` reads only the tail it needs (``LRANGE -limit -1``); ``writes_after``
reads a score range of the sorted set. A write script is sent exactly once
(``_backends.lua.send_once``; on a cluster ``nodes.send_once``, to the node owning the
session's slot), whatever retry policy the client has: a retry after a lost reply would run
the write again (popping twice, or refusing a committed append as a conflict). A write's
connection error reaches the caller as the driver raised it, and the caller settles the write
by its id. Reads go through the client and keep its retries.

On a Redis Cluster (``redis+cluster://``) nothing else changes: every script and command
touches one session's keys (one slot), and the schema version is read and stored by a command
of its own, never inside a session's script; ``drop`` walks every primary.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any, Final, cast

from blake3 import blake3

from ..._core.revision import WriteRecord
from ...errors import ConfigurationError, RevisionConflict, SchemaMismatch
from ..addresses import checked_prefix, chosen_prefix, split_prefix, user_of
from ..connections import Connections
from ..lua import LuaScript, Send, send_once
from ..registry import check_address
from ..schema import Schema
from ..store_items import ANONYMOUS, decode_item, encode_item, new_write_id, valid_limit
from .backend import (
    VersionKey,
    client_location,
    client_user,
    location,
    server_of,
    shared_client,
    unlink_matching,
)
from .nodes import RedisCluster, is_cluster, url_location
from .nodes import send_once as send_once_to_slot
from .replicas import ReplicaWait
from .replicas import split as split_wait

try:
    from redis.asyncio import Redis
    from redis.asyncio.connection import parse_url
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ConfigurationError(
        "RevisionedRedisSession needs redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = ["DEFAULT_PREFIX", "SCHEMA", "SCHEMA_VERSION", "RevisionedRedisSession"]

SCHEMA: Final = Schema("revisioned store", ("0001_initial",), SchemaMismatch)
"""The store's layout steps: each leaves only its number under ``<prefix>:store-schema``."""
SCHEMA_VERSION: Final = SCHEMA.version
DEFAULT_PREFIX: Final = "agents-reconcile-store"

_WRITE_SCRIPT: Final = LuaScript("agents_reconcile._backends.redis", "scripts", "write")


def session_base(prefix: str, session_id: str) -> str:
    """The prefix of a session's keys.

    The hash tag (between braces) keeps a session's keys on one cluster slot. It is the
    session id itself when that is a non-empty text without ``}``; otherwise (an id a ``}``
    would cut short, or empty) a digest of the id, in keys shaped ``<prefix>:#{<digest>}``,
    which no id of the first kind can produce."""
    if session_id and "}" not in session_id:
        return f"{prefix}:{{{session_id}}}"
    tag = blake3(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{prefix}:#{{{tag}}}"


class RevisionedRedisSession:
    """A full SDK ``Session`` (usable with ``Runner.run`` directly) that is also a
    ``RevisionedStore``, on one Redis server or a Redis Cluster.

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
        replica_wait: ReplicaWait | None = None,
    ) -> None:
        self._setup(
            session_id, prefix, migrate, Connections(client), client_location(client), replica_wait
        )
        self._user = client_user(client)

    @classmethod
    def from_url(
        cls,
        session_id: str,
        url: str,
        *,
        prefix: str | None = None,
        migrate: bool = True,
        **client_options: Any,
    ) -> RevisionedRedisSession:
        """A session on the server at ``url`` (``redis://``, ``rediss://`` or ``unix://``), or
        on the cluster at ``redis+cluster://`` (``rediss+cluster://``); ``client_options`` go to
        ``redis.asyncio.Redis.from_url`` (to ``RedisCluster`` for a cluster). ``prefix`` is the
        key prefix of the store's keys (``DEFAULT_PREFIX`` unless given here or as ``?prefix=``
        in the URL; given both ways, the two must be the same).
        ``?replicas=N&replica_timeout=S`` in the query makes each write wait for N replicas
        (``replicas.py``): one that too few acknowledge raises ``ReplicasBehind``, a write
        whose fate a failover decides, settled from the store's record as any failed write."""
        check_address(url, what="store")
        url, in_address = split_prefix(url)
        prefix = chosen_prefix(in_address, prefix, DEFAULT_PREFIX)
        url, wait = split_wait(url)
        options = dict(client_options)
        user = user_of(url)
        if is_cluster(url):
            where = url_location(url)
        else:
            try:
                parsed = dict(parse_url(url))
            except ValueError as exc:
                # The message of a URL error could repeat the URL, password included.
                raise ConfigurationError(
                    "not a Redis URL: use redis://, rediss:// or unix://"
                ) from exc
            where = location({**options, **parsed})
        shared = shared_client("redis-store", url, options)
        self = cls.__new__(cls)
        self._setup(session_id, prefix, migrate, shared, where, wait)
        given = options.get("username")
        self._user = user or (given if isinstance(given, str) and given else None)
        return self

    @classmethod
    def from_address(
        cls,
        session_id: str,
        address: str,
        *,
        namespace: str | None = None,
        migrate: bool = True,
    ) -> RevisionedRedisSession:
        """The store the registry opens for ``address``; ``namespace`` is the prefix (the
        address's ``?prefix=`` when None)."""
        return cls.from_url(session_id, address, prefix=namespace or None, migrate=migrate)

    def _setup(
        self,
        session_id: str,
        prefix: str,
        migrate: bool,
        connections: Connections[Redis],
        where: str,
        wait: ReplicaWait | None,
    ) -> None:
        checked_prefix(prefix)
        self.session_id = session_id
        self.session_settings = None
        self._wait = wait
        self.prefix = prefix
        base = session_base(prefix, session_id)
        self._items_key = f"{base}:items"
        self._head_key = f"{base}:head"
        self._writes_key = f"{base}:writes"
        self._ids_key = f"{base}:ids"
        self._script_keys: tuple[bytes, ...] | None = None
        self._migrate_on_open = migrate
        self._connections = connections
        self._namespace = f"{where} prefix={prefix}"
        self._version = VersionKey(f"{prefix}:store-schema", SCHEMA, self._namespace)
        self._schema_checked = False

    def __repr__(self) -> str:
        return f"RevisionedRedisSession({self.session_id!r}, {self._namespace!r})"

    @property
    def backend_namespace(self) -> str:
        """Which server, database and prefix, without credentials: the backend's identity."""
        return self._namespace

    @property
    def backend_user(self) -> str | None:
        """The ACL user it connects as, where its address (or client) names one: kept in its
        intents' records beside the identity, so that an operator reopens the store as the
        application does (never the password)."""
        return self._user

    # -- client and schema -------------------------------------------------------------------

    async def _ready(self) -> Redis:
        client = await self._connections.get()
        if not self._schema_checked:
            await self._version.ensure(client.execute_command, create=self._migrate_on_open)
            self._schema_checked = True
        return client

    async def close(self) -> None:
        """Release the client this object holds (a later call opens it again). A client
        passed to the constructor is the caller's and stays open."""
        await self._connections.release()

    async def drop(self) -> None:
        """Delete every key under this object's prefix (all its sessions and the schema).
        For tests and operators; walks the keys with SCAN, never KEYS."""
        await unlink_matching(await self._connections.get(), self.prefix)
        self._schema_checked = False

    async def migrate(self) -> list[str]:
        """Record the schema version when absent; return the steps applied (none when
        current). A newer version is refused."""
        client = await self._connections.get()
        steps = await self._version.ensure(client.execute_command, create=True)
        self._schema_checked = True
        return steps

    async def check(self) -> str | None:
        """None when the server has this release's schema; else what is wrong. Writes
        nothing."""
        return await self._version.problem((await self._connections.get()).execute_command)

    async def schema_version(self) -> int | None:
        """The version stored (None when the key is absent); writes nothing."""
        return await self._version.read((await self._connections.get()).execute_command)

    @property
    def replica_wait(self) -> ReplicaWait | None:
        """How many replicas each write waits for, and how long (``replicas.py``); None: none."""
        return self._wait

    async def server(self) -> tuple[object, ...] | None:
        """The server and database this store lives on (``backend.server_of``)."""
        return server_of(await self._connections.get())

    async def prepared(self) -> list[bytes]:
        """The schema checked (once), and this session's keys for a script that appends as
        ``write.lua`` does (``IntentJournal`` scripts on the same server): items, head,
        writes, ids."""
        await self._ready()
        keys = self._script_keys
        if keys is None:
            names = (self._items_key, self._head_key, self._writes_key, self._ids_key)
            keys = self._script_keys = tuple(name.encode("utf-8") for name in names)
        return list(keys)

    # -- writes ------------------------------------------------------------------------------

    async def _write(
        self, kind: str, *, expected: int | None, write_id: str, writer: str, rows: list[bytes]
    ) -> tuple[str, int, Any]:
        """Run the write script once; return its verdict, the revision and a popped item."""
        client = await self._ready()
        keys = (self._items_key, self._head_key, self._writes_key, self._ids_key)
        args = (kind, "" if expected is None else str(int(expected)), write_id, writer, *rows)
        once = send_once_to_slot if isinstance(client, RedisCluster) else send_once
        send: Send = functools.partial(once, client, wait=self._wait)
        reply = await _WRITE_SCRIPT.run(send, keys, args)
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


# Its public name: the identity a journal records for this store (``BackendIdentity.kind``)
# does not change when the file that defines it moves.
RevisionedRedisSession.__module__ = "agents_reconcile"
