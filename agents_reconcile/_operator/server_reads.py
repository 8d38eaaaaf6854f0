"""The reads an operator's command makes on a Redis or PostgreSQL server beside those of a
journal or store object: the namespaces holding a revisioned store, whether a key is there,
whether a Redis address is one node of a cluster. Each is read-only and bounded (a ``SCAN``
over a limited number of keys, one catalog query), opens a connection of its own and gives it
back, and says a driver's error as a ``JournalUnavailable`` naming the address without its
password: the callers that only look for a better sentence fall back to the one they had."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from .._backends.redaction import Redacted
from .._backends.registry import backend_for
from ..errors import ConfigurationError, JournalUnavailable

__all__ = [
    "cluster_address",
    "postgres_rows",
    "redis_cluster_enabled",
    "redis_keys",
    "redis_prefixes",
    "redis_refused",
    "served_by",
]

_CONNECT_TIMEOUT: Final = 10.0
_COMMAND_TIMEOUT: Final = 30.0


def served_by(address: str) -> str | None:
    """The name of the backend serving ``address`` (``redis``, ``redis-cluster``,
    ``postgres``, ...), or None for an address no backend serves."""
    try:
        return backend_for(address, what="journal").name
    except ConfigurationError:
        return None


def cluster_address(address: str) -> str:
    """The ``redis+cluster://`` address of the cluster whose node ``address`` (``redis://``
    or ``rediss://``) names, without its password: the node itself as the seed."""
    shown = urlsplit(Redacted.of(address).shown)
    scheme = "rediss+cluster" if shown.scheme == "rediss" else "redis+cluster"
    return urlunsplit((scheme, shown.netloc, "", "", ""))


@asynccontextmanager
async def _redis(address: str, doing: str) -> AsyncIterator[Any]:
    """A client of the Redis server or cluster at ``address`` (its replica wait and its
    ``?prefix=`` left out: nothing here writes, and every read names the prefixes it looks
    under), given back on leaving; a driver's error met inside is a ``JournalUnavailable``
    saying what was being done."""
    from redis.exceptions import RedisError

    from .._backends.addresses import split_prefix
    from .._backends.redis.backend import shared_client
    from .._backends.redis.replicas import split

    url, _ = split(split_prefix(address)[0])
    where = Redacted.of(address)
    connections = shared_client("redis-operator", url, {})
    try:
        yield await connections.get()
    except (RedisError, OSError) as exc:
        detail = where.scrub(f"{type(exc).__name__}: {exc}")
        raise JournalUnavailable(f"{where}: {doing} failed: {detail}") from exc
    finally:
        await connections.release()


def redis_refused(exc: BaseException) -> bool:
    """Whether ``exc`` was raised from a Redis server's answer (a redirection, a refusal),
    not from a connection that failed: a server that answered can be asked what it is."""
    try:
        from redis.exceptions import ResponseError
    except ImportError:
        return False
    return isinstance(exc.__cause__, ResponseError)


async def redis_cluster_enabled(address: str) -> bool:
    """Whether the server at a plain ``redis://`` address says it is a node of a cluster
    (``INFO cluster``)."""
    async with _redis(address, "asking whether it is a cluster's node") as client:
        found = await client.info("cluster")
    return bool(isinstance(found, dict) and int(found.get("cluster_enabled", 0) or 0))


async def redis_keys(address: str, prefix: str, *, most: int, budget: int) -> list[str]:
    """Up to ``most`` names of keys under ``prefix`` (``prefix:*``), found by ``SCAN`` over
    at most ``budget`` keys."""
    from .._backends.redis.backend import glob_escape

    async with _redis(address, "looking at its keys") as client:
        found, _ = await _scan(client, address, f"{glob_escape(prefix)}:*", most, budget)
    return [key.decode("utf-8", "backslashreplace") for key in found]


async def redis_prefixes(
    address: str, suffix: str, *, most: int, budget: int
) -> tuple[list[str], bool]:
    """The prefixes ``P`` under which the server (every primary of a cluster) holds a key
    ``P:<suffix>`` whose value is a version number, sorted, up to ``most``, found by ``SCAN``
    over at most ``budget`` keys; and whether the scan saw every key."""
    from .._backends.redis.backend import glob_escape
    from .._backends.redis.nodes import is_cluster, run_all

    ending = f":{suffix}".encode()
    async with _redis(address, "looking for namespaces") as client:
        keys, complete = await _scan(client, address, f"*:{glob_escape(suffix)}", budget, budget)
        keys = [key for key in keys if key.endswith(ending)]
        commands = [("GET", key) for key in keys]
        values = (
            await run_all(client, commands)
            if is_cluster(address)
            else [await client.get(key) for key in keys]
        )
    prefixes = sorted(
        {
            key[: -len(ending)].decode("utf-8", "backslashreplace")
            for key, value in zip(keys, values, strict=True)
            if isinstance(value, bytes) and value.strip().isdigit()
        }
    )
    return prefixes[:most], complete and len(prefixes) <= most


async def _scan(
    client: Any, address: str, pattern: str, most: int, budget: int
) -> tuple[list[bytes], bool]:
    """Keys matching ``pattern``, up to ``most``, by ``SCAN`` on the server (on every primary
    of a cluster, sharing ``budget`` among them: ``nodes.scan_keys``); and whether every key
    was seen."""
    from .._backends.redis.nodes import each_primary, is_cluster, scan_keys

    nodes: Sequence[Any] = await each_primary(client) if is_cluster(address) else [None]
    return await scan_keys(client, nodes, pattern, most, budget)


async def postgres_rows(
    address: str, schema: str, statement: str, *args: object
) -> list[tuple[Any, ...]]:
    """The rows ``statement`` (read only, run in a read-only transaction) answers on the
    database at ``address``, through the pool a journal in ``schema`` there would use."""
    from .._backends.postgres.database import JournalDatabase

    database = JournalDatabase(
        address,
        schema=schema,
        migrate=False,
        connect_timeout=_CONNECT_TIMEOUT,
        command_timeout=_COMMAND_TIMEOUT,
        pool=None,
    )

    async def read(conn: Any) -> list[tuple[Any, ...]]:
        async with conn.transaction(readonly=True):
            return [tuple(row) for row in await conn.fetch(statement, *args)]

    try:
        return await database.run(read, prepare=False)
    finally:
        await database.close()
