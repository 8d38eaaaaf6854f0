"""How the Redis journal sends its commands and scripts, and what it makes of the driver's
errors: the half of ``RedisJournal`` below its operations.

A script is one command (``wire.run``: its bytes made in one pass, on a connection kept for
the scripts). A writing script checks the layout version itself, so only reads check it first,
once per journal object; one refused for an older layout has the journal upgraded and runs
again. With the replica wait (``replicas.py``) a writing script is sent once and ``WAIT``
follows it on the same connection. Every driver error becomes the journal's own
(``replies.translate``), here and nowhere else: ``JournalUnavailable``, ``JournalCorrupt`` or
a schema refusal. A connection torn down under the client (a cluster's failover closing a
node's connections while a command is on its way: the driver's ``AttributeError``, its
``ConnectionError`` or ``TimeoutError``, ``CLUSTERDOWN``, ``TRYAGAIN``, a slot that keeps
moving) is ``JournalUnavailable``, which the wrapper's journal calls retry (every operation
of the journal is safe to run again after a lost reply) and then report.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Final

from redis import exceptions as redis_errors

from ..connections import Connections
from ..lua import LuaScript, Send, send_once
from ..redaction import Redacted
from . import replies, wire
from .backend import VersionKey
from .nodes import send_once as cluster_send_once
from .replicas import ReplicaWait

__all__ = ["RedisSending"]

_ERRORS: Final = replies.DRIVER_ERRORS
"""What the driver raises (``replies.DRIVER_ERRORS``); an ``AttributeError`` is the driver's
only when ``replies.torn_down`` says so, and raised as it is otherwise."""


class RedisSending:
    """Commands, scripts and errors of ``RedisJournal``, which provides what is declared
    here."""

    _scripts: ClassVar[dict[str, LuaScript]]
    _on_cluster: ClassVar[bool]
    _connections: Connections[Any]
    _where: str
    _address: Redacted
    _version: VersionKey
    _schema_checked: bool
    _wait: ReplicaWait | None
    _scripted: tuple[Any, asyncio.AbstractEventLoop] | None

    if TYPE_CHECKING:

        async def _migrate(self, send: Send) -> list[str]: ...

        async def _refused(self, error: redis_errors.ResponseError, client: Any) -> None: ...

    @contextmanager
    def _translated(self, operation: str) -> Iterator[None]:
        """Translate the driver's errors (``replies.is_driver_error``) met inside, once: the
        one edge every command and script of the journal goes through."""
        try:
            yield
        except _ERRORS as exc:
            if not replies.is_driver_error(exc):
                raise  # an AttributeError of ours: a bug, never a journal error
            raise self._translate(exc, operation) from exc

    def _translate(self, exc: Exception, operation: str) -> Exception:
        return replies.translate(
            exc,
            operation,
            where=self._where,
            address=self._address,
            refused=self._version.refused,
            cluster=self._on_cluster,
        )

    async def _send(self) -> Send:
        client = await self._connections.get()
        send: Send = client.execute_command
        return send

    async def _script(
        self, name: str, keys: list[bytes], args: list[str | bytes], *, read_only: bool = False
    ) -> object:
        """Run a script as one command. A writing script checks the schema version itself
        (and stores it in an empty journal), so only reads check it first, once."""
        with self._translated(name):
            client = await self._connections.get()
            if read_only and not self._schema_checked:
                await self._migrate(client.execute_command)
            if self._scripted is None or self._scripted[0] is not client:
                self._scripted = (client, asyncio.get_running_loop())
            script = self._scripts[name]
            waiting = self._wait is not None and not read_only
            try:
                reply: object = await self._sent(client, script, keys, args, waiting)
            except redis_errors.ResponseError as exc:
                await self._refused(exc, client)
                reply = await self._sent(client, script, keys, args, waiting)
        if not read_only:
            self._schema_checked = True
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
        once = cluster_send_once if self._on_cluster else send_once
        send = functools.partial(once, client, wait=self._wait)
        reply: object = await script.run(send, keys, args)
        return reply

    async def _command(self, operation: str, *args: str | bytes | int) -> object:
        with self._translated(operation):
            send = await self._send()
            if not self._schema_checked:
                await self._migrate(send)
            reply: object = await send(*args)
        return reply
