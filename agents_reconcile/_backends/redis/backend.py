"""What the Redis journal and the Redis store share: where a client points, its schema
version key, and deleting a namespace's keys; on one server or on a Redis Cluster
(``nodes.py``: a ``redis+cluster://`` address opens the driver's cluster client).

A Redis schema has no tables: a step leaves only the version under one key (the journal's
``<prefix>:schema``, the store's ``<prefix>:store-schema``). Storing it when absent and
reading what is there is one script (``scripts/schema_version.lua``), so workers
starting together agree on one value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from ...errors import ConfigurationError
from ..connections import Connections, Opener
from ..lua import LuaScript, Send
from ..registry import check_address
from ..schema import Schema
from .nodes import (
    ClusterNode,
    RedisCluster,
    cluster_client,
    cluster_location,
    cluster_secrets,
    each_primary,
    is_cluster,
    scan,
)

try:
    from redis.asyncio import Redis
    from redis.asyncio.connection import SSLConnection
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis backends need redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = [
    "SCHEMES",
    "VersionKey",
    "client_location",
    "client_secrets",
    "client_user",
    "server_client",
    "shared_client",
    "unlink_matching",
]

SCHEMES: Final = ("redis", "rediss", "unix")
_VERSION_SCRIPT: Final = LuaScript("agents_reconcile._backends.redis", "scripts", "schema_version")
_UNLINK_BATCH: Final = 500


def server_client(url: str, options: dict[str, Any]) -> Redis:
    """The driver's client for the server at a plain ``url`` (``redis://``, ``rediss://``,
    ``unix://``), given ``options`` after the URL's own. Nothing is connected until the first
    command."""
    return Redis.from_url(url, **options)


def shared_client(kind: str, url: str, options: dict[str, Any]) -> Connections[Redis]:
    """A share of the client every ``kind`` object on ``url`` with ``options`` uses; a URL
    the driver would misread (``redis://host/abc`` is database 0 to it) is refused first. A
    ``redis+cluster://`` URL gets the driver's cluster client (which speaks as a ``Redis``
    does to the journal and the store: commands, scripts, pipelines)."""
    check_address(url, what=kind.removeprefix("redis-"))

    async def open_client() -> Redis:
        if is_cluster(url):
            cluster = cluster_client(url, options)
            # Its slot map loaded once, before anyone uses it: the driver's client, first used
            # by many commands at once, loads it while some of them are already sending, and
            # closes their connections under them.
            try:
                await cluster.initialize()
            except BaseException:
                await cluster.aclose()
                raise
            # Typed as a Redis: the commands the journal and the store use are the same.
            return cast("Redis", cluster)
        return server_client(url, options)

    async def close_client(client: Redis) -> None:
        await client.aclose()

    key = (kind, url, repr(sorted(options.items(), key=lambda pair: pair[0])))
    return Connections(key=key, opener=Opener(open_client, close_client))


def server_of(client: object) -> tuple[object, ...] | None:
    """Which server and database a plain (not cluster) asyncio client talks to, as a value
    two clients can be compared by; None for anything else."""
    if type(client) is not Redis:
        return None
    kwargs = client.connection_pool.connection_kwargs
    return tuple(kwargs.get(name) for name in ("host", "port", "path", "db", "username"))


def client_location(client: Redis) -> str:
    """Which server and database ``client`` uses, as a URL without credentials (which cluster,
    for a cluster client)."""
    if isinstance(client, RedisCluster):
        return cluster_location(client)
    pool = client.connection_pool
    kwargs: dict[str, Any] = dict(getattr(pool, "connection_kwargs", {}) or {})
    kwargs.setdefault("connection_class", getattr(pool, "connection_class", None))
    return location(kwargs)


def location(kwargs: dict[str, Any]) -> str:
    """The server and database that connection settings name, as a URL without credentials."""
    db = kwargs.get("db") or 0
    path = kwargs.get("path")
    if path:
        return f"unix://{path}?db={db}"
    connection_class = kwargs.get("connection_class")
    secure = isinstance(connection_class, type) and issubclass(connection_class, SSLConnection)
    host = str(kwargs.get("host") or "localhost")
    if ":" in host:
        host = f"[{host}]"
    port = kwargs.get("port") or 6379
    return f"{'rediss' if secure else 'redis'}://{host}:{port}/{db}"


def client_user(client: Redis) -> str | None:
    """The ACL user ``client`` was configured with (None: the default user)."""
    if isinstance(client, RedisCluster):
        kwargs: Any = client.get_connection_kwargs()
    else:
        kwargs = getattr(client.connection_pool, "connection_kwargs", {})
    user = kwargs.get("username") if isinstance(kwargs, dict) else None
    return user if isinstance(user, str) and user else None


def client_secrets(client: Redis) -> list[str]:
    """The password ``client`` was configured with, to scrub from messages."""
    if isinstance(client, RedisCluster):
        return cluster_secrets(client)
    kwargs = getattr(client.connection_pool, "connection_kwargs", {})
    password = kwargs.get("password") if isinstance(kwargs, dict) else None
    return [password] if isinstance(password, str) and password else []


def glob_escape(text: str) -> str:
    """``text`` matched literally in a SCAN pattern."""
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


async def unlink_matching(
    client: Redis, prefix: str, wanted: Callable[[bytes], bool] = lambda _: True
) -> int:
    """Delete the keys under ``prefix:`` that ``wanted`` accepts; return how many went.
    Walks the keyspace with SCAN, never KEYS, so a large server is not blocked; on a cluster,
    the keyspace of every primary."""
    pattern = f"{glob_escape(prefix)}:*"
    nodes: list[ClusterNode | None] = [None]
    if isinstance(client, RedisCluster):
        nodes = [*await each_primary(client)]
    deleted = 0
    for node in nodes:
        cursor = 0
        while True:
            cursor, keys = await scan(client, node, cursor, pattern, 1000)
            deleted += await _unlink(client, [key for key in keys if wanted(key)])
            if cursor == 0:
                break
    return deleted


async def _unlink(client: Redis, keys: list[bytes]) -> int:
    """``UNLINK`` of ``keys`` in batches (a cluster client splits each by slot)."""
    deleted = 0
    for start in range(0, len(keys), _UNLINK_BATCH):
        deleted += int(await client.unlink(*keys[start : start + _UNLINK_BATCH]))
    return deleted


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class VersionKey:
    """A schema version kept under one Redis key, read and stored the same way by every
    Redis backend. ``where`` names the backend in messages."""

    def __init__(self, key: str, schema: Schema, where: str) -> None:
        self.key, self.schema, self.where = key, schema, where

    def parse(self, raw: object) -> int:
        """The version ``raw`` holds; ``schema.error`` when it holds no version."""
        text = _text(raw)
        if not text.strip().isdigit() or int(text) < 1:
            raise self.schema.unreadable(f"{self.where}: {self.key}", raw)
        return int(text)

    def refused(self, raw: object) -> Exception:
        """The error for a stored version a write was refused on (never current)."""
        try:
            found = self.parse(raw)
        except self.schema.error as exc:
            return exc
        return self.schema.error(self.schema.problem(self.where, found) or "")

    async def read(self, send: Send) -> int | None:
        """The version stored (None when the key is absent)."""
        raw = await send("GET", self.key)
        return None if raw is None else self.parse(raw)

    async def problem(self, send: Send) -> str | None:
        """``check``: None when current, else why not. Only reads."""
        try:
            found = await self.read(send)
        except self.schema.error as exc:
            return str(exc)
        return self.schema.problem(self.where, found)

    async def ensure(self, send: Send, *, create: bool) -> list[str]:
        """Store the version when absent (with ``create``) and refuse any other than this
        release's; return the steps applied."""
        if not create:
            found = await self.read(send)
            self.schema.refuse(self.where, found)
            return []
        reply = await _VERSION_SCRIPT.run(send, [self.key], [str(self.schema.version)])
        parts = list(reply) if isinstance(reply, list | tuple) else []
        status = _text(parts[0]) if parts else ""
        if status == "created" and len(parts) == 1:
            return [self.schema.applied(self.schema.version)]
        if status != "found" or len(parts) != 2:
            raise self.schema.unreadable(f"{self.where}: {self.key}", reply)
        self.schema.refuse(self.where, self.parse(parts[1]))
        return []
