"""The journal engines ``growth.py`` measures, each able to fill a journal of N other sessions
in bulk, in its own schema, with the rows the journal itself writes.

Every other session has appended once (its intent opened and acknowledged: two writes
counted); 1% hold an abandoned intent besides (in flight, its owner a process on a host long
gone, a day old), 1% a decision that settled an earlier failure. Records are built by the
package's own builders and encoders (``conformance._records``, ``PendingWrite.encode``,
``Decision.encode``), rows by the journal's own row builders or key layout; ``check`` then reads
a sample back through the journal itself (which decodes, so checks, every record it reads).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from blake3 import blake3

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.ownership import Owner
from agents_reconcile._core.records import BackendIdentity, Decision, PendingWrite
from agents_reconcile.conformance._records import make_decision, make_intent

BACKEND: Final = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/app/chat.db")
GONE: Final = Owner(host="retired-host#0badf00d", pid=4242, started="5eed")
"""The owner of every abandoned intent: a process on a host that is gone."""
DAY_AGO: Final = time.time() - 86_400.0
CHUNK: Final = 20_000
POSTGRES_VAR: Final = "AGENTS_RECONCILE_TEST_POSTGRES_URL"
REDIS_VAR: Final = "AGENTS_RECONCILE_TEST_REDIS_URL"


class Other:
    """One other session, and what it left in the journal."""

    __slots__ = ("decision", "intent", "session_id", "writes")

    def __init__(self, n: int) -> None:
        self.session_id = f"other-{n:07d}"
        self.writes = 2
        self.intent: PendingWrite | None = None
        self.decision: Decision | None = None
        if n % 100 == 0:
            self.intent = self._intent(n)
            self.writes = 3
        elif n % 100 == 50:
            self.decision = make_decision(self._intent(n), decided_at=DAY_AGO + n * 1e-3)
            self.writes = 4

    def _intent(self, n: int) -> PendingWrite:
        # Ids as random as the journal's own (new_write_id), and the same on every call.
        return make_intent(
            blake3(f"growth {n}".encode()).hexdigest()[:32],
            session_id=self.session_id,
            backend=BACKEND,
            created_at=DAY_AGO + n * 1e-3,
            text=f"turn {n} of {self.session_id}",
        )


def others(size: int) -> Iterator[list[Other]]:
    """The other sessions of a journal of ``size``, a chunk at a time."""
    for start in range(0, size, CHUNK):
        yield [Other(n) for n in range(start, min(start + CHUNK, size))]


def unavailable(name: str) -> str | None:
    """Why engine ``name`` cannot run here (None when it can)."""
    needs = {"postgres": (POSTGRES_VAR, "asyncpg"), "redis": (REDIS_VAR, "redis")}.get(name)
    if needs is None:
        return None
    variable, driver = needs
    if not os.environ.get(variable):
        return f"{variable} is not set"
    try:
        __import__(driver)
    except ImportError:
        return f"its driver ({driver}) is not installed"
    return None


class Engine:
    name = ""
    title = ""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.opened: list[Any] = []

    async def prepare(self, largest: int) -> list[str]:
        return []

    async def fill(self, size: int) -> None:
        raise NotImplementedError

    async def journal(self, size: int) -> Any:
        raise NotImplementedError

    def command_options(self, size: int) -> list[str]:
        raise NotImplementedError

    async def footprint(self, size: int) -> int:
        """The bytes the journal of ``size`` other sessions takes where it is kept."""
        raise NotImplementedError

    async def check(self, size: int, journal: Any) -> None:
        """Read a sample of the bulk rows back through the journal (which checks them)."""
        sample = [other for chunk in others(min(size, 200)) for other in chunk]
        for other in sample:
            if other.intent is not None:
                [entry] = await journal.pending(other.session_id)
                assert entry.intent == other.intent and entry.state is IntentState.IN_FLIGHT
            if other.decision is not None:
                assert await journal.is_settled(other.decision.intent_id)
                [found] = await journal.decisions(session_id=other.session_id, limit=5)
                assert found == other.decision
            assert await journal.write_count(other.session_id, BACKEND) == other.writes

    async def cleanup(self) -> None:
        for journal in self.opened:
            await journal.close()


class SQLiteEngine(Engine):
    name = "sqlite"
    title = "SQLite journal (a file), sessions in a file SQLiteSession"

    def path(self, size: int) -> Path:
        return self.workdir / f"journal-{size}.db"

    async def fill(self, size: int) -> None:
        from agents_reconcile._backends.sqlite.journal import SQLiteJournal

        journal = SQLiteJournal(self.path(size))
        await journal.migrate()
        await journal.close()
        await asyncio.to_thread(self._bulk, self.path(size), size)

    @staticmethod
    def _bulk(path: Path, size: int) -> None:
        # The journal's own row builders: what open_intent and settle insert.
        from agents_reconcile._backends.sqlite.journal import (
            _INSERT_INTENT_SQL,
            _insert_decision,
            _intent_row,
        )

        conn = sqlite3.connect(path, isolation_level=None)
        try:
            for chunk in others(size):
                conn.execute("BEGIN")
                # An intent's insert counts a write itself (the trigger intents_count_write).
                conn.executemany(
                    "INSERT INTO session_writes (session_id, backend, write_count)"
                    " VALUES (?, ?, ?)",
                    [
                        (o.session_id, str(BACKEND), o.writes - (o.intent is not None))
                        for o in chunk
                    ],
                )
                rows = []
                for other in chunk:
                    if other.intent is not None:
                        blob = other.intent.encode()
                        row = _intent_row(other.intent, IntentState.IN_FLIGHT, GONE, blob)
                        rows.append((*row[:6], DAY_AGO, row[7], 2))
                    if other.decision is not None:
                        _insert_decision(conn, other.decision)
                conn.executemany(_INSERT_INTENT_SQL, rows)
                conn.execute("COMMIT")
            conn.execute("ANALYZE")
        finally:
            conn.close()

    async def journal(self, size: int) -> Any:
        from agents_reconcile._backends.sqlite.journal import SQLiteJournal

        journal = SQLiteJournal(self.path(size))
        self.opened.append(journal)
        return journal

    def command_options(self, size: int) -> list[str]:
        return ["--journal", str(self.path(size))]

    async def footprint(self, size: int) -> int:
        path = self.path(size)
        return sum(
            place.stat().st_size
            for place in (path, path.with_name(path.name + "-wal"))
            if place.exists()
        )


class PostgresEngine(Engine):
    name = "postgres"
    title = "PostgreSQL journal, sessions in a file SQLiteSession"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.url = os.environ[POSTGRES_VAR]
        self.schemas: list[str] = []

    def schema(self, size: int) -> str:
        return f"growth_{os.getpid()}_{size}"

    async def fill(self, size: int) -> None:
        import asyncpg

        from agents_reconcile._backends.postgres.journal import PostgresJournal
        from agents_reconcile._backends.postgres.statements import decision_args

        schema = self.schema(size)
        self.schemas.append(schema)
        journal = PostgresJournal(self.url, schema=schema)
        await journal.migrate()
        await journal.close()
        conn = await asyncpg.connect(self.url)
        try:
            for chunk in others(size):
                writes = [(o.session_id, str(BACKEND), o.writes) for o in chunk]
                intents = [
                    (*_pg_intent(o.intent), o.intent.encode())
                    for o in chunk
                    if o.intent is not None
                ]
                decisions = [decision_args(o.decision) for o in chunk if o.decision is not None]
                for table, records, columns in (
                    ("session_writes", writes, ["session_id", "backend", "write_count"]),
                    ("intents", intents, _PG_INTENT_COLUMNS),
                    ("decisions", decisions, _PG_DECISION_COLUMNS),
                ):
                    if records:
                        await conn.copy_records_to_table(
                            table, records=records, columns=columns, schema_name=schema
                        )
            await conn.execute(
                f"ANALYZE {schema}.intents, {schema}.session_writes, {schema}.decisions"
            )
        finally:
            await conn.close()

    async def journal(self, size: int) -> Any:
        from agents_reconcile._backends.postgres.journal import PostgresJournal

        journal = PostgresJournal(self.url, schema=self.schema(size))
        self.opened.append(journal)
        return journal

    def command_options(self, size: int) -> list[str]:
        return ["--journal", self.url, "--namespace", self.schema(size)]

    async def footprint(self, size: int) -> int:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            total = await conn.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = $1 AND c.relkind = 'r'",
                self.schema(size),
            )
        finally:
            await conn.close()
        return int(total)

    async def cleanup(self) -> None:
        import asyncpg

        await super().cleanup()
        conn = await asyncpg.connect(self.url)
        try:
            for schema in self.schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


# The columns open_intent and settle insert (decision_args' order for decisions).
_PG_INTENT_COLUMNS: Final = [
    "intent_id", "session_id", "backend", "state", "owner", "created_at", "updated_at",
    "fence", "record",
]  # fmt: skip
_PG_DECISION_COLUMNS: Final = [
    "intent_id", "session_id", "backend", "outcome", "reason", "action", "decided_at", "record",
]  # fmt: skip


def _pg_intent(intent: PendingWrite) -> tuple[Any, ...]:
    return (
        intent.intent_id, intent.session_id, str(intent.backend), IntentState.IN_FLIGHT.value,
        str(GONE), intent.created_at, DAY_AGO, 2,
    )  # fmt: skip


class RedisEngine(Engine):
    name = "redis"
    title = "Redis journal, sessions in a file SQLiteSession"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.url = os.environ[REDIS_VAR]
        self.prefixes: list[str] = []
        self.grown: dict[int, int] = {}

    def prefix(self, size: int) -> str:
        return f"growth-{os.getpid()}-{size}"

    async def prepare(self, largest: int) -> list[str]:
        # About 250 bytes of server memory per other session (its write count's hash, and
        # the 1% of intents and decisions), measured on Redis 7.
        need = largest * 250 * 1.1 / 2**20
        available = _available_mb()
        said = (
            f"redis: the largest journal needs about {need:,.0f} MB of server memory (every "
            f"size together about {need * 1.12:,.0f} MB); {available:,.0f} MB available here"
        )
        if need * 1.12 > available / 2:
            raise SystemExit(f"{said}: too much for this machine; give smaller --sizes")
        return [said + ": run"]

    async def footprint(self, size: int) -> int:
        # The server's memory grown by the fill (each size has a prefix of its own).
        return self.grown.get(size, 0)

    async def used_memory(self) -> int:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            return int((await client.info("memory"))["used_memory"])
        finally:
            await client.aclose()

    async def fill(self, size: int) -> None:
        before = await self.used_memory()
        await self._fill(size)
        self.grown[size] = max(0, await self.used_memory() - before)

    async def _fill(self, size: int) -> None:
        import redis.asyncio as aioredis

        from agents_reconcile._backends.redis.journal import RedisJournal
        from agents_reconcile._backends.redis.layout import JournalKeys

        prefix = self.prefix(size)
        self.prefixes.append(prefix)
        journal = RedisJournal.from_url(self.url, prefix=prefix)
        await journal.migrate()
        await journal.close()
        layout = JournalKeys(prefix)
        names = layout.names
        client = aioredis.Redis.from_url(self.url)
        seq = 0
        try:
            for chunk in others(size):
                pipe = client.pipeline(transaction=False)
                for other in chunk:
                    keys = layout.session(other.session_id)
                    opened, record, backend, state, owner, updated, count, decided, fence = keys
                    pipe.hset(count, str(BACKEND), other.writes)
                    intent = other.intent
                    if intent is not None:
                        ident = intent.intent_id
                        # What store_intent (scripts/prelude.lua) keeps of an opened intent.
                        pipe.zadd(opened, {ident: intent.created_at})
                        pipe.hset(record, ident, intent.encode())
                        pipe.hset(backend, ident, str(intent.backend))
                        pipe.hset(state, ident, IntentState.IN_FLIGHT.value)
                        pipe.hset(owner, ident, str(GONE))
                        pipe.hset(updated, ident, f"{DAY_AGO:.6f}")
                        pipe.hset(fence, ident, 2)
                        pipe.hset(names["index"], ident, other.session_id)
                    if other.decision is not None:
                        # What store_decision and settle keep of a settling decision.
                        seq += 1
                        ident = other.decision.intent_id
                        pipe.hset(names["decision"], seq, other.decision.encode())
                        pipe.rpush(names["log"], seq)
                        pipe.rpush(decided, seq)
                        pipe.hset(names["decided"], ident, seq)
                        pipe.sadd(names["settled"], ident)
                await pipe.execute()
            if seq:
                await client.set(names["seq"], seq)
        finally:
            await client.aclose()

    async def journal(self, size: int) -> Any:
        from agents_reconcile._backends.redis.journal import RedisJournal

        journal = RedisJournal.from_url(self.url, prefix=self.prefix(size))
        self.opened.append(journal)
        return journal

    def command_options(self, size: int) -> list[str]:
        return ["--journal", self.url, "--namespace", self.prefix(size)]

    async def cleanup(self) -> None:
        from agents_reconcile._backends.redis.journal import RedisJournal

        for prefix in self.prefixes:
            journal = RedisJournal.from_url(self.url, prefix=prefix)
            await journal.drop()
            await journal.close()
        await super().cleanup()


def _available_mb() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("inf")


ENGINES: Final[dict[str, type[Engine]]] = {
    "sqlite": SQLiteEngine,
    "postgres": PostgresEngine,
    "redis": RedisEngine,
}
