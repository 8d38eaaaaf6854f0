"""Redis Cluster, as the Redis journal and store use it: the driver's cluster client for a
``redis+cluster://`` address, a command sent exactly once to the node that owns its keys' slot,
many commands run at once (grouped by node: one pipeline each), and a bounded ``SCAN`` over every
primary (or over the one server of a plain client).

The cluster client (``redis.asyncio.cluster.RedisCluster``) routes each command by the slot of
its keys, follows ``MOVED`` and ``ASK``, and after a connection error loads the slot map again
and retries: right for reads and for the journal's scripts (as on one server, where the
connection's retry policy sends them again), wrong for a write that must run at most once.
``send_once`` is that write's way: one attempt on a connection of the node owning the slot; a
``MOVED`` or ``ASK`` answer (the server ran nothing) is followed, once the slot map says where;
an error after sending leaves the command's fate unknown and is raised as it is (the slot map is
loaded again before the next command sent this way).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, Final

from ...errors import ConfigurationError
from ..addresses import cluster_settings
from ..lua import LuaScript
from .replicas import ReplicaWait, waited

try:
    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from redis.asyncio.connection import SSLConnection
    from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError(
        "the Redis backends need redis-py: pip install 'agents-reconcile[redis]'"
    ) from exc

__all__ = [
    "CLUSTER_SCHEMES",
    "ClusterNode",
    "RedisCluster",
    "cluster_client",
    "cluster_location",
    "cluster_secrets",
    "each_primary",
    "is_cluster",
    "run_all",
    "scan",
    "scan_keys",
    "scripts_all",
    "send_once",
    "url_location",
]

CLUSTER_SCHEMES: Final = ("redis+cluster", "rediss+cluster")
_SCAN_STEP: Final = 1000
"""Keys a ``SCAN`` looks at per call in ``scan_keys``."""
_REDIRECTS: Final = 3
"""``MOVED`` or ``ASK`` answers followed at most by one ``send_once``."""

# Clients whose slot map ``send_once`` found out of date (a connection failed): it is loaded
# again before their next command. Weak: a client that is gone needs nothing.
_STALE: weakref.WeakSet[RedisCluster] = weakref.WeakSet()


def is_cluster(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``)."""
    return url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def cluster_client(url: str, options: dict[str, Any]) -> RedisCluster:
    """The driver's cluster client for ``url`` (checked whole first: ``cluster_settings``), its
    seed nodes those the URL lists; ``options`` go to ``RedisCluster`` after the URL's own.
    Nothing is connected until the first command."""
    seeds, settings = cluster_settings(url)
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in seeds],
        **{**settings, **options},
    )


def cluster_location(client: RedisCluster) -> str:
    """Which cluster ``client`` reaches, as a URL without credentials: its seed nodes."""
    kind = client.get_connection_kwargs().get("connection_class")
    secure = isinstance(kind, type) and issubclass(kind, SSLConnection)
    return _shown(secure, [(str(node.host), int(node.port)) for node in client.startup_nodes])


def url_location(url: str) -> str:
    """Which cluster ``url`` names, as a URL without credentials or settings: its seeds."""
    seeds, settings = cluster_settings(url)
    return _shown(bool(settings.get("ssl")), seeds)


def _shown(secure: bool, seeds: list[tuple[str, int]]) -> str:
    nodes = ",".join(
        f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in seeds
    )
    return f"{'rediss' if secure else 'redis'}+cluster://{nodes}"


def cluster_secrets(client: RedisCluster) -> list[str]:
    """The password ``client`` was configured with, to scrub from messages."""
    password = client.get_connection_kwargs().get("password")
    return [password] if isinstance(password, str) and password else []


# -- sending once ------------------------------------------------------------------------------


async def send_once(client: RedisCluster, *args: Any, wait: ReplicaWait | None = None) -> Any:
    """Send one ``EVAL`` or ``EVALSHA`` (``args`` as for ``execute_command``) to the node owning
    its keys' slot, outside the client's retries; its reply.

    A connection the server dropped while idle is opened again before sending. A ``MOVED`` or
    ``ASK`` answer (nothing ran) is followed; an error after sending leaves the command's fate
    unknown and is raised as it is. With ``wait``, a ``WAIT`` for replicas follows the command
    on the same connection (``replicas``)."""
    keys = args[3 : 3 + int(args[2])]
    slot = client.keyslot(keys[0])
    if client in _STALE:
        _STALE.discard(client)
        await client.nodes_manager.initialize()
    await client.initialize()
    asking: ClusterNode | None = None
    for _ in range(_REDIRECTS):
        node = asking or client.nodes_manager.get_node_from_slot(slot)
        connection = node.acquire_connection()
        try:
            await _ready(connection)
            if asking is not None:
                await connection.send_command("ASKING")
                await connection.read_response()
            await connection.send_command(*args)
            reply = await connection.read_response()
            if wait is not None:
                await waited(connection, wait)
            return reply
        except MovedError as exc:
            client.nodes_manager.move_slot(exc)
            asking = None
        except AskError as exc:
            settings: Any = client.get_connection_kwargs()
            asking = client.nodes_manager.get_node(exc.host, exc.port) or ClusterNode(
                exc.host, exc.port, **settings
            )
        except ResponseError:
            raise  # the server answered: the connection is in a clean state
        except BaseException:
            await connection.disconnect(nowait=True)
            _STALE.add(client)
            raise
        finally:
            node.release(connection)
    raise ResponseError("the slot kept moving while the command was redirected")


async def _ready(connection: Any) -> None:
    """As a pool checks a connection it hands out: connected, and nothing waiting to be read
    (a reply nobody asked for, or the server's close); connected again otherwise."""
    marked = getattr(connection, "should_reconnect", None)
    if marked is not None and marked():
        await connection.disconnect()
    await connection.connect()
    if await connection.can_read_destructive():
        await connection.disconnect()
        await connection.connect()


# -- many at once ------------------------------------------------------------------------------


async def run_all(client: RedisCluster, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """The replies of ``commands`` (each the arguments of one command), run at once: grouped by
    the node owning their keys' slot, one pipeline per node. Read-only or idempotent commands
    only: a pipeline the cluster interrupts runs again. A reply that is an error is raised."""
    if not commands:
        return []
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    found: list[Any] = await pipe.execute(raise_on_error=True)
    return found


async def scripts_all(
    client: RedisCluster,
    calls: Sequence[tuple[LuaScript, Sequence[str | bytes], Sequence[Any]]],
) -> list[Any]:
    """The replies of scripts (script, keys, args), run as ``run_all`` runs commands: by
    ``EVALSHA``, and those a node lacks sent again by their source."""
    if not calls:
        return []
    pipe = client.pipeline(transaction=False)
    for script, keys, args in calls:
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    found: list[Any] = await pipe.execute(raise_on_error=False)
    missing = [at for at, reply in enumerate(found) if isinstance(reply, NoScriptError)]
    if missing:
        pipe = client.pipeline(transaction=False)
        for at in missing:
            script, keys, args = calls[at]
            pipe.execute_command("EVAL", script.source, len(keys), *keys, *args)
        for at, reply in zip(missing, await pipe.execute(raise_on_error=False), strict=True):
            found[at] = reply
    for reply in found:
        if isinstance(reply, Exception):
            raise reply
    return found


# -- every primary -----------------------------------------------------------------------------


async def each_primary(client: RedisCluster) -> list[ClusterNode]:
    """The primaries of the cluster, in a stable order (by name)."""
    await client.initialize()
    return sorted(client.get_primaries(), key=lambda node: str(node.name))


async def scan(
    client: Any, node: ClusterNode | None, cursor: int, pattern: str, count: int
) -> tuple[int, list[bytes]]:
    """One ``SCAN`` step on ``node`` of a cluster's ``client`` (or, ``node`` None, on the
    server of a plain client): the next cursor and the keys found."""
    if node is None:
        following, keys = await client.execute_command(
            "SCAN", cursor, "MATCH", pattern, "COUNT", count
        )
    else:
        cursors, keys = await client.execute_command(
            "SCAN", cursor, "MATCH", pattern, "COUNT", count, target_nodes=node
        )
        following = cursors.get(node.name, 0) if isinstance(cursors, dict) else cursors
    return int(following), [
        key.encode() if isinstance(key, str) else bytes(key) for key in keys or []
    ]


async def scan_keys(
    client: Any, nodes: Sequence[ClusterNode | None], pattern: str, most: int, budget: int
) -> tuple[list[bytes], bool]:
    """Keys matching ``pattern``, up to ``most`` (each once, in the order found), by ``SCAN`` on
    each of ``nodes`` in turn (``[None]``: the server of a plain ``client``), over at most
    ``budget`` keys shared among them; and whether every key was seen. Only reads."""
    share = max(_SCAN_STEP, budget // len(nodes))
    found: list[bytes] = []
    known: set[bytes] = set()
    complete = True
    for node in nodes:
        cursor, seen = 0, 0
        while True:
            cursor, keys = await scan(client, node, cursor, pattern, _SCAN_STEP)
            for key in keys:
                if key not in known:
                    known.add(key)
                    found.append(key)
            seen += _SCAN_STEP
            if cursor == 0:
                break
            if seen >= share or len(found) >= most:
                complete = False
                break
        if len(found) >= most:
            break
    return found[:most], complete and len(found) <= most
