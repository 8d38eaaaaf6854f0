"""What the suites run over: the registered backends (their journals and revisioned stores,
each in a namespace of its own), and the SDK sessions the self-test knows, each opened on real
files (or a namespace of its own on a real server) under a test directory."""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from blake3 import blake3

from agents_reconcile._backends import registry
from agents_reconcile._backends.sqlite.backend import path_of
from agents_reconcile._selftest.stores import STORES, Store, close_store

from .servers import server_url

# The self-test's server stores find their servers where the suites do.
for _backend in registry.BACKENDS:
    if _backend.server and os.environ.get(_backend.environment("TEST")):
        os.environ.setdefault(
            _backend.environment("SELFTEST"), os.environ[_backend.environment("TEST")]
        )


def registered(role: str) -> list[Any]:
    """One param per registered backend with a ``role`` (``journal`` or ``store``), marked
    with the backend's name, so ``-m "not redis"`` leaves its server alone."""
    return [
        pytest.param(backend, id=backend.name, marks=getattr(pytest.mark, backend.name))
        for backend in registry.BACKENDS
        if getattr(backend, role) is not None
    ]


def address(backend: registry.Backend, directory: Path, name: str) -> str:
    """Where a test's own instance of ``backend`` lives: its test server (skipped without
    one), or a new embedded one called ``name`` under ``directory``."""
    if backend.server:
        return server_url(backend)
    return backend.address_in(directory, name)


def redis_client(address: str) -> Any:
    """A client of the Redis server or cluster at ``address``, as the backends open one."""
    from agents_reconcile._backends.redis.nodes import cluster_client, is_cluster

    if is_cluster(address):
        return cluster_client(address, {})
    from redis.asyncio import Redis

    return Redis.from_url(address)


def namespace() -> str:
    """A Redis prefix or PostgreSQL schema no other test uses."""
    return f"t{uuid.uuid4().hex[:16]}"


# The SDK sessions of the self-test, for the suites that run the runner over each.
Backend = Store
close = close_store
# The Conversations store is left out: the runner suites put FaultInjectingSession around the
# store, which a Conversations session cannot sit behind (tests/conversations and the self-test
# matrices run it, with its client's faults).
BACKENDS = [store for store in STORES if store.name != "conversations"]
REFERENCE_STORES = ("sqlite", "revisioned_sqlite")
"""The stores that meet every cell of a store matrix: one the wrapper judges by fingerprints,
one by its record of writes (the two ways a recovery decides)."""


def store_rotation(param: str = "world") -> pytest.MarkDecorator:
    """Size a store matrix (``tests/support/rotation.py``): each combination of its other
    parameters on the reference stores and on one other store in turn."""
    return pytest.mark.rotation(param, REFERENCE_STORES)


BACKEND_PARAMS = [
    pytest.param(
        backend,
        id=backend.name,
        marks=pytest.mark.skipif(
            not backend.available(), reason=f"{backend.name}: no driver, or no server"
        ),
    )
    for backend in BACKENDS
]


# -- behind a backend's back -------------------------------------------------------------------


class Storage:
    """Raw access to one backend's storage, for tests that edit it behind the backend's back.
    A backend without one here skips those tests (they are capabilities, not the contract)."""

    def __init__(self, address: str, space: str) -> None:
        self.address, self.space = address, space

    async def stamp(self, component: str, version: int) -> None:
        """Record schema ``version`` for ``component`` (``journal`` or ``store``)."""
        raise NotImplementedError

    async def intent_record(self, session_id: str, intent_id: str) -> bytes:
        raise NotImplementedError

    async def replace_intent_record(self, session_id: str, intent_id: str, record: bytes) -> None:
        raise NotImplementedError

    async def effect_record(self, session_id: str, key: str) -> bytes:
        raise NotImplementedError

    async def replace_effect_record(self, session_id: str, key: str, record: bytes) -> None:
        raise NotImplementedError


class SQLiteStorage(Storage):
    _TABLES: ClassVar[dict[str, str]] = {"journal": "journal_schema", "store": "revisioned_schema"}

    def _run(self, sql: str, *args: object) -> list[Any]:
        conn = sqlite3.connect(path_of(self.address), isolation_level=None)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    async def stamp(self, component: str, version: int) -> None:
        table = self._TABLES[component]
        self._run(f"INSERT INTO {table} (version, applied_at) VALUES (?, 0)", version)

    async def intent_record(self, session_id: str, intent_id: str) -> bytes:
        [(record,)] = self._run("SELECT record FROM unresolved WHERE intent_id = ?", intent_id)
        return bytes(record)

    async def replace_intent_record(self, session_id: str, intent_id: str, record: bytes) -> None:
        # Live in its session's row, or recorded beside it: the table holding it changes.
        for table in ("live", "intents"):
            self._run(f"UPDATE {table} SET record = ? WHERE intent_id = ?", record, intent_id)

    async def effect_record(self, session_id: str, key: str) -> bytes:
        [(record,)] = self._run("SELECT record FROM effects WHERE key = ?", key)
        return bytes(record)

    async def replace_effect_record(self, session_id: str, key: str, record: bytes) -> None:
        self._run("UPDATE effects SET record = ? WHERE key = ?", record, key)


class RedisStorage(Storage):
    _KEYS: ClassVar[dict[str, str]] = {"journal": "schema", "store": "store-schema"}

    async def _run(self, *command: Any) -> Any:
        from redis.asyncio import Redis

        client = Redis.from_url(self.address)
        try:
            return await client.execute_command(*command)
        finally:
            await client.aclose()

    def _record_key(self, session_id: str, name: str = "record") -> str:
        tag = blake3(session_id.encode()).hexdigest()[:32]
        return f"{self.space}:{{{tag}}}:{name}"

    async def stamp(self, component: str, version: int) -> None:
        await self._run("SET", f"{self.space}:{self._KEYS[component]}", version)

    async def intent_record(self, session_id: str, intent_id: str) -> bytes:
        from agents_reconcile._backends.redis.layout import INTENTS, unpacked_row

        found = unpacked_row(
            await self._run("HGET", self._record_key(session_id, INTENTS), intent_id)
        )
        assert found is not None
        record: bytes = found["record"]
        return record

    async def replace_intent_record(self, session_id: str, intent_id: str, record: bytes) -> None:
        from agents_reconcile._backends.redis.layout import INTENTS, packed_row, unpacked_row

        key = self._record_key(session_id, INTENTS)
        found = unpacked_row(await self._run("HGET", key, intent_id))
        assert found is not None
        await self._run("HSET", key, intent_id, packed_row(**{**found, "record": record}))

    async def effect_record(self, session_id: str, key: str) -> bytes:
        found: bytes = await self._run("HGET", self._record_key(session_id, "effect_record"), key)
        return found

    async def replace_effect_record(self, session_id: str, key: str, record: bytes) -> None:
        await self._run("HSET", self._record_key(session_id, "effect_record"), key, record)


class RedisClusterStorage(RedisStorage):
    """A journal on a Redis Cluster keeps each session's keys, and a copy of the journal's own,
    in one of 256 buckets (``<space>:{bNNN}``); a store keeps its schema where one server does."""

    async def _run(self, *command: Any) -> Any:
        from agents_reconcile._backends.redis.nodes import cluster_client

        client = cluster_client(self.address, {})
        try:
            return await client.execute_command(*command)
        finally:
            await client.aclose()

    def _record_key(self, session_id: str, name: str = "record") -> str:
        digest = blake3(session_id.encode()).hexdigest()
        return f"{self.space}:{{b{int(digest[:2], 16):03d}}}:{{{digest[:32]}}}:{name}"

    async def stamp(self, component: str, version: int) -> None:
        if component == "store":
            await super().stamp(component, version)
            return
        from agents_reconcile._backends.redis.nodes import cluster_client

        client = cluster_client(self.address, {})
        try:
            for bucket in range(256):
                await client.set(f"{self.space}:{{b{bucket:03d}}}:schema", version)
        finally:
            await client.aclose()


class PostgresStorage(Storage):
    _TABLES: ClassVar[dict[str, str]] = {
        "journal": "schema_version",
        "store": "store_schema_version",
    }

    async def _run(self, sql: str, *args: object) -> list[Any]:
        import asyncpg

        conn = await asyncpg.connect(self.address)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def stamp(self, component: str, version: int) -> None:
        table = f'"{self.space}".{self._TABLES[component]}'
        await self._run(f"INSERT INTO {table} (version, name) VALUES ($1, 'later')", version)

    async def intent_record(self, session_id: str, intent_id: str) -> bytes:
        rows = await self._run(
            f'SELECT record FROM "{self.space}".intents WHERE intent_id = $1', intent_id
        )
        return bytes(rows[0][0])

    async def replace_intent_record(self, session_id: str, intent_id: str, record: bytes) -> None:
        await self._run(
            f'UPDATE "{self.space}".intents SET record = $1 WHERE intent_id = $2', record, intent_id
        )

    async def effect_record(self, session_id: str, key: str) -> bytes:
        rows = await self._run(
            f'SELECT record FROM "{self.space}".effects WHERE key = $1 AND session_id = $2',
            key,
            session_id,
        )
        return bytes(rows[0][0])

    async def replace_effect_record(self, session_id: str, key: str, record: bytes) -> None:
        await self._run(
            f'UPDATE "{self.space}".effects SET record = $1 WHERE key = $2 AND session_id = $3',
            record,
            key,
            session_id,
        )


_STORAGE: dict[str, type[Storage]] = {
    "sqlite": SQLiteStorage,
    "redis": RedisStorage,
    "redis-cluster": RedisClusterStorage,
    "postgres": PostgresStorage,
}


def storage(backend: registry.Backend, where: str, space: str) -> Storage:
    """Raw access to ``backend``'s storage at ``where`` (namespace ``space``), or skip."""
    kind = _STORAGE.get(backend.name)
    if kind is None:
        pytest.skip(f"{backend.name}: the tests have no raw access to its storage")
    return kind(where, space)


class Place:
    """Where one test's instance of a registered backend lives. Journals and stores opened
    here are workers on the same data (where the backend's data outlives an object: not in
    memory); ``cleanup`` closes them and deletes a server's data."""

    def __init__(self, backend: registry.Backend, directory: Path, name: str) -> None:
        self.backend = backend
        self.address = address(backend, directory, name)
        self.space = namespace()
        self.opened: list[Any] = []

    def journal(self) -> Any:
        """Another journal object on this place (a new worker)."""
        journal = self.backend.open_journal(self.address, namespace=self.space)
        self.opened.append(journal)
        return journal

    def store(self, session_id: str, *, migrate: bool = True) -> Any:
        """Another store object on this place (a new worker)."""
        store = self.backend.open_store(
            session_id, self.address, namespace=self.space, migrate=migrate
        )
        self.opened.append(store)
        return store

    def storage(self) -> Storage:
        return storage(self.backend, self.address, self.space)

    async def cleanup(self) -> None:
        if self.opened and hasattr(self.opened[0], "drop"):
            await self.opened[0].drop()
        for thing in self.opened:
            await thing.close()


def closed_port() -> int:
    """A loopback TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
