"""How the Redis journal reaches its server or cluster (``RedisLink``): its commands and scripts,
what it makes of the driver's errors, its layout version, and commands run in every bucket at
once. The journal and each of its components speak through it, over one key layout
(``layout.KeyLayout``): one bucket on a server, 256 on a cluster.

A script is one command (``wire.run``: its bytes made in one pass, on a connection kept for
the scripts). A writing script checks the layout version itself, so only reads check it first,
once per journal object. With the replica wait (``replicas.py``) a writing script is sent once
and ``WAIT`` follows it on the same connection. Every driver error becomes the journal's own
(``replies.translate``), here and nowhere else: ``JournalUnavailable``, ``JournalCorrupt`` or
a schema refusal. A connection torn down under the client (a cluster's failover closing a
node's connections while a command is on its way: the driver's ``AttributeError``, its
``ConnectionError`` or ``TimeoutError``, ``CLUSTERDOWN``, ``TRYAGAIN``, a slot that keeps
moving) is ``JournalUnavailable``, which the wrapper's journal calls retry (every operation
of the journal is safe to run again after a lost reply) and then report.

The layout version. A step leaves only its number under the version key. ``migrate`` and the
first use of a journal object (a read checks first; a writing script refuses any other version
before it runs anything) store the version in an empty journal, in one script per bucket
(``scripts/schema_version.lua``); any other version is refused, before anything touches it.
Layout 4 (``0004_intent_rows``) keeps each unresolved intent as one row of its session's
``intents`` (``layout.ROW``) where the layouts before it kept a hash per field of an intent:
those were never released, so a journal of one is refused as such (``RetiringSchema``), with
what to do, never upgraded. On a cluster every bucket keeps its own version (a bucket gets it
with its first write, as a server does): ``check`` and ``schema_version`` read them all at once
and report the worst (unreadable, then newer, then the oldest), and the first use stores the
version where it is missing once none is newer, older or unreadable.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from ...errors import JournalCorrupt
from ..connections import Connections
from ..lua import LuaScript, Send, send_once
from ..redaction import Redacted
from ..schema import Schema
from . import replies, wire
from .backend import VersionKey, server_of
from .layout import KeyLayout
from .nodes import each_primary, run_all, scan, scan_keys, scripts_all
from .nodes import send_once as cluster_send_once
from .replicas import ReplicaWait

__all__ = ["SCHEMA", "SCHEMA_VERSION", "VERSION", "RedisLink", "RetiringSchema"]


@dataclass(frozen=True)
class RetiringSchema(Schema):
    """A schema whose versions up to ``retired`` were laid out in a way no release wrote: a
    journal holding one is refused as such, with what to do, never upgraded."""

    retired: int = 0

    def problem(self, where: str, found: int | None) -> str | None:
        if found is not None and 0 < found <= self.retired:
            return (
                f"{where} has {self.noun} version {found}, a layout from before this release's "
                f"{self.version} that no release wrote (each intent kept as a hash per field); "
                "this release neither reads nor upgrades it: delete the journal's keys "
                "(RedisJournal.drop()) or give it another prefix"
            )
        return super().problem(where, found)


SCHEMA: Final = RetiringSchema(
    "journal",
    ("0001_initial", "0002_retention", "0003_listing", "0004_intent_rows"),
    JournalCorrupt,
    retired=3,
)
"""The journal's layout steps, oldest first; layouts 1 to 3 are refused (``retired``)."""
SCHEMA_VERSION: Final = SCHEMA.version
VERSION: Final = str(SCHEMA_VERSION).encode()
"""The version every writing script is given (it refuses a journal holding another)."""
_STORE_VERSION: Final = LuaScript("agents_reconcile._backends.redis", "scripts", "schema_version")
_ERRORS: Final = replies.DRIVER_ERRORS
"""What the driver raises (``replies.DRIVER_ERRORS``); an ``AttributeError`` or ``IndexError``
is the driver's only when ``replies.is_driver_error`` says so, and raised as it is otherwise."""


class RedisLink:
    """One journal's way to its server or cluster: ``connections`` (its client), ``layout``
    (its keys), ``where`` (the journal named in messages), ``wait`` (the replicas each write
    waits for, or None), ``scripts`` (by name) and ``on_cluster`` (whether the client is a
    cluster's, which sends a write exactly once its own way)."""

    def __init__(
        self,
        connections: Connections[Any],
        layout: KeyLayout,
        *,
        address: Redacted,
        where: str,
        wait: ReplicaWait | None,
        scripts: dict[str, LuaScript],
        on_cluster: bool,
    ) -> None:
        self.connections = connections
        self.layout = layout
        self.address = address
        self.where = where
        self.wait = wait
        self.scripts = scripts
        self.on_cluster = on_cluster
        self.version = VersionKey(layout.version_key, SCHEMA, where)
        self.schema_checked = False
        """Whether this object has checked (or stored) the layout version: reads check it
        first until then."""
        self._scripted: tuple[Any, asyncio.AbstractEventLoop] | None = None
        """The client the last script went through, and its loop: the connection kept for the
        scripts (``wire``) goes back to its pool on close, from that loop."""

    # -- errors ------------------------------------------------------------------------------

    @contextmanager
    def translated(self, operation: str) -> Iterator[None]:
        """Translate the driver's errors (``replies.is_driver_error``) met inside, once: the
        one edge every command and script of the journal goes through."""
        try:
            yield
        except _ERRORS as exc:
            if not replies.is_driver_error(exc):
                raise  # an AttributeError or IndexError of ours: a bug, never a journal error
            raise self.translate(exc, operation) from exc

    def translate(self, exc: Exception, operation: str) -> Exception:
        return replies.translate(
            exc,
            operation,
            where=self.where,
            address=self.address,
            refused=self.version.refused,
            cluster=self.on_cluster,
        )

    # -- sending -----------------------------------------------------------------------------

    async def client(self) -> Any:
        """The client (opened on first use)."""
        return await self.connections.get()

    async def send(self) -> Send:
        client = await self.connections.get()
        send: Send = client.execute_command
        return send

    async def script(
        self, name: str, keys: list[bytes], args: list[str | bytes], *, read_only: bool = False
    ) -> object:
        """Run a script as one command. A writing script checks the schema version itself
        (and stores it in an empty journal), so only reads check it first, once."""
        with self.translated(name):
            client = await self.connections.get()
            if read_only and not self.schema_checked:
                await self.ensure_schema(client.execute_command)
            if self._scripted is None or self._scripted[0] is not client:
                self._scripted = (client, asyncio.get_running_loop())
            script = self.scripts[name]
            waiting = self.wait is not None and not read_only
            reply: object = await self._sent(client, script, keys, args, waiting)
        if not read_only:
            self.schema_checked = True
        return reply

    async def _sent(
        self,
        client: Any,
        script: LuaScript,
        keys: list[bytes],
        args: list[str | bytes],
        waiting: bool,
    ) -> object:
        """``script``'s reply; ``waiting``: sent once, then ``WAIT`` for the replicas on the
        same connection (``replicas.py``)."""
        if not waiting:
            return await wire.run(client, script, keys, args)
        once = cluster_send_once if self.on_cluster else send_once
        send = functools.partial(once, client, wait=self.wait)
        reply: object = await script.run(send, keys, args)
        return reply

    async def command(self, operation: str, *args: str | bytes | int) -> object:
        """One command's reply (the layout version checked first, once)."""
        with self.translated(operation):
            send = await self.send()
            if not self.schema_checked:
                await self.ensure_schema(send)
            reply: object = await send(*args)
        return reply

    async def fan(self, operation: str, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """The replies of read-only (or idempotent) ``commands``, run at once (one pipeline per
        node: ``nodes.run_all``; a single command is sent as it is)."""
        with self.translated(operation):
            client = await self.connections.get()
            if not self.schema_checked:
                await self.ensure_schema(client.execute_command)
            if len(commands) == 1:
                return [await client.execute_command(*commands[0])]
            return await run_all(client, commands)

    async def fan_scripts(
        self,
        operation: str,
        calls: Sequence[tuple[LuaScript, Sequence[bytes], Sequence[str | bytes]]],
    ) -> list[Any]:
        """The replies of read-only (or idempotent) scripts, run at once (a single script is
        sent as it is)."""
        with self.translated(operation):
            client = await self.connections.get()
            if not self.schema_checked:
                await self.ensure_schema(client.execute_command)
            if len(calls) == 1:
                [(script, keys, args)] = calls
                return [await script.run(client.execute_command, keys, args)]
            return await scripts_all(client, calls)

    async def every_bucket(
        self, operation: str, command: str, key: str, *args: str | bytes
    ) -> list[Any]:
        """The replies of ``command`` on every bucket's key named ``key`` (a name of
        ``JournalKeys.names``), with ``args``: bucket 0's first."""
        buckets = self.layout.buckets()
        return await self.fan(operation, [(command, keys.names[key], *args) for keys in buckets])

    async def primaries(self) -> list[tuple[str, Any]]:
        """What a ``SCAN`` of every key goes over, each node with its name: the server itself
        (None) on one server, every primary (by name) on a cluster."""
        if not self.on_cluster:
            return [("server", None)]
        with self.translated("scan"):
            found = await each_primary(await self.connections.get())
        return [(str(node.name), node) for node in found]

    async def scan_from(
        self, node: Any, cursor: int, pattern: str, count: int
    ) -> tuple[int, list[bytes]]:
        """One ``SCAN`` step on ``node`` (of ``primaries``): the next cursor and the keys
        found. Only reads."""
        with self.translated("scan"):
            return await scan(await self.connections.get(), node, cursor, pattern, count)

    async def scan(self, pattern: str, most: int, budget: int) -> tuple[list[bytes], bool]:
        """Keys matching ``pattern``, up to ``most``, found by ``SCAN`` over at most ``budget``
        keys (shared among the primaries of a cluster: ``nodes.scan_keys``); and whether the
        scan saw every key. Only reads."""
        nodes = [node for _, node in await self.primaries()]
        with self.translated("scan"):
            client = await self.connections.get()
            return await scan_keys(client, nodes, pattern, most, budget)

    # -- the layout version -----------------------------------------------------------------

    async def ensure_schema(self, send: Send) -> list[str]:
        """Store the layout version where it is missing (every bucket's); refuse any other
        than this release's, newer, older or unreadable, before writing anything. The steps
        applied."""
        buckets = self.layout.buckets()
        version = [str(SCHEMA_VERSION)]
        if len(buckets) == 1:
            [bucket] = buckets
            reply = await _STORE_VERSION.run(send, [bucket.version_key], version)
            word, parts = replies.status(reply, "migrate")
            if word == "created" and len(parts) == 1:
                lowest = 0
            elif word == "found" and len(parts) == 2:
                lowest = self.version.parse(parts[1])
                SCHEMA.refuse(self.version.where, lowest)
            else:
                raise SCHEMA.unreadable(f"{self.version.where}: {self.version.key}", reply)
        else:
            found = await self._versions()
            present = [version for version in found if version is not None]
            for worst in (max(present, default=None), min(present, default=None)):
                if worst is not None:
                    SCHEMA.refuse(self.version.where, worst)
            lowest = min(present, default=0) if len(present) == len(buckets) else 0
            calls = [
                (_STORE_VERSION, [bucket.version_key], version)
                for number, bucket in enumerate(buckets)
                if found[number] is None
            ]
            if calls:
                await scripts_all(await self.connections.get(), calls)
        self.schema_checked = True
        return [SCHEMA.applied(number) for number in range(lowest + 1, SCHEMA_VERSION + 1)]

    async def _versions(self) -> list[int | None]:
        """Every bucket's version (None where absent), bucket 0 first; unreadable raises."""
        client = await self.connections.get()
        keys = [bucket.version_key for bucket in self.layout.buckets()]
        raw = await run_all(client, [("GET", key) for key in keys])
        return [
            None if value is None else VersionKey(key, SCHEMA, self.version.where).parse(value)
            for key, value in zip(keys, raw, strict=True)
        ]

    async def migrate(self) -> list[str]:
        """Store the schema version where the journal has none; returns the steps applied
        (none when current). Any other version, newer, older or unreadable, raises
        ``JournalCorrupt`` and nothing is written."""
        with self.translated("migrate"):
            return await self.ensure_schema(await self.send())

    async def check(self) -> str | None:
        """None when the journal's schema is current (on a cluster: every bucket holding a
        version holds this release's, and one does), else a sentence saying what is missing
        or wrong. Only reads."""
        with self.translated("the read of its schema version (every command's first)"):
            if len(self.layout.buckets()) == 1:
                return await self.version.problem(await self.send())
            try:
                found = await self._versions()
            except SCHEMA.error as exc:
                return str(exc)
        present = [version for version in found if version is not None]
        newer = [version for version in present if version > SCHEMA_VERSION]
        worst = max(newer) if newer else min(present, default=None)
        return SCHEMA.problem(self.version.where, worst)

    async def schema_version(self) -> int | None:
        """The version stored (on a cluster, the oldest a bucket holds; None when none holds
        one); only reads."""
        with self.translated("schema_version"):
            if len(self.layout.buckets()) == 1:
                return await self.version.read(await self.send())
            present = [version for version in await self._versions() if version is not None]
        return min(present, default=None)

    # -- the server and the connections ------------------------------------------------------

    async def server(self) -> tuple[object, ...] | None:
        """The server and database the client reaches (``backend.server_of``; None for a
        cluster's)."""
        return server_of(await self.connections.get())

    async def close(self) -> None:
        """Release the connections (a client passed in stays open); a later operation opens
        them again."""
        self.schema_checked = False
        with self.translated("close"):
            scripted, self._scripted = self._scripted, None
            if scripted is not None and scripted[1] is asyncio.get_running_loop():
                await wire.give_back(scripted[0])
            await self.connections.release()
