"""How the cluster journal's halves reach the cluster: commands and scripts run in every bucket
(or some) at once, grouped by node (``nodes.run_all``, ``nodes.scripts_all``), each read first
making sure of the schema, once per journal object, as every read of the journal does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...lua import LuaScript
from ..nodes import RedisCluster, run_all, scripts_all
from .layout import BUCKETS, BucketKeys

if TYPE_CHECKING:
    from contextlib import _GeneratorContextManager

    from ...connections import Connections
    from ...lua import Send

__all__ = ["ClusterIO"]


class ClusterIO:
    """Fan-out for ``RedisClusterJournal``, which provides what is declared here."""

    _layout: BucketKeys
    _schema_checked: bool
    _connections: Connections[Any]

    if TYPE_CHECKING:

        def _translated(self, operation: str) -> _GeneratorContextManager[None]: ...

        async def _migrate(self, send: Send) -> list[str]: ...

    async def _cluster(self) -> RedisCluster:
        client: RedisCluster = await self._connections.get()
        return client

    async def _fan(self, operation: str, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """The replies of read-only (or idempotent) ``commands``, run at once."""
        with self._translated(operation):
            client = await self._cluster()
            if not self._schema_checked:
                await self._migrate(client.execute_command)
            return await run_all(client, commands)

    async def _fan_scripts(
        self,
        operation: str,
        calls: Sequence[tuple[LuaScript, Sequence[bytes], Sequence[str | bytes]]],
    ) -> list[Any]:
        """The replies of read-only (or idempotent) scripts, run at once."""
        with self._translated(operation):
            client = await self._cluster()
            if not self._schema_checked:
                await self._migrate(client.execute_command)
            return await scripts_all(client, calls)

    async def _every_bucket(
        self, operation: str, command: str, key: str, *args: str | bytes
    ) -> list[Any]:
        """The replies of ``command`` on every bucket's key named ``key`` (a name of
        ``JournalKeys.names``), with ``args``: bucket 0's first."""
        buckets = [self._layout.bucket(number) for number in range(BUCKETS)]
        return await self._fan(operation, [(command, keys.names[key], *args) for keys in buckets])
