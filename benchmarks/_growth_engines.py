"""The journal engines ``journal_growth.py`` measures: each makes journals by name (``label``),
fills them in bulk in its own schema (``_growth_fills``), opens them as the package does,
names them to the ``agents-reconcile`` command, and says what they hold: rows by kind and
bytes where they are kept.

Engines: SQLite (a file in the run's temporary directory), PostgreSQL (``AGENTS_RECONCILE_TEST_
POSTGRES_URL``; a schema of its own per journal, dropped afterwards) and Redis (``AGENTS_
RECONCILE_TEST_REDIS_URL``; a key prefix of its own per journal, deleted afterwards).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from _growth_fills import Left, postgres_fill, redis_fill, sqlite_fill

POSTGRES_VAR: Final = "AGENTS_RECONCILE_TEST_POSTGRES_URL"
REDIS_VAR: Final = "AGENTS_RECONCILE_TEST_REDIS_URL"
KINDS: Final = ("write counts", "decisions", "receipts", "intents")
"""The kinds of rows ``Engine.rows`` counts: sessions' counts, decisions, tool receipts (on
Redis every effect kept: the fills make only receipts) and unresolved intents."""


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
    bytes_said = ""
    """What ``stored`` measures, in a sentence."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.opened: list[Any] = []

    async def prepare(self, sessions: int, per_session: int) -> list[str]:
        """Notes on whether journals of ``sessions`` sessions (``per_session`` bytes each, about,
        where that matters) fit here; ``SystemExit`` when they do not."""
        return []

    async def fill(self, label: str, chunks: Iterable[list[Left]]) -> None:
        """Make the journal ``label`` (migrated as the package does) and write ``chunks``."""
        raise NotImplementedError

    async def journal(self, label: str) -> Any:
        raise NotImplementedError

    def command_options(self, label: str) -> list[str]:
        raise NotImplementedError

    async def footprint(self, label: str) -> int:
        """The bytes the journal takes where it is kept (file, tables, server memory)."""
        raise NotImplementedError

    async def stored(self, label: str) -> dict[str, int]:
        """The journal's bytes as the retention figure reports them, by measure."""
        raise NotImplementedError

    async def rows(self, label: str) -> dict[str, int]:
        """How many rows of each of ``KINDS`` the journal holds."""
        raise NotImplementedError

    async def cleanup(self) -> None:
        for journal in self.opened:
            await journal.close()
        self.opened.clear()


class SQLiteEngine(Engine):
    name = "sqlite"
    title = "SQLite journal (a file), sessions in a file SQLiteSession"
    bytes_said = (
        "bytes in use: (page_count - freelist_count) x page_size; the file keeps its size "
        "(freed pages are reused, not returned, until a VACUUM)"
    )

    def path(self, label: str) -> Path:
        return self.workdir / f"journal-{label}.db"

    async def fill(self, label: str, chunks: Iterable[list[Left]]) -> None:
        from agents_reconcile._backends.sqlite.journal import SQLiteJournal

        journal = SQLiteJournal(self.path(label))
        await journal.migrate()
        await journal.close()
        await asyncio.to_thread(sqlite_fill, self.path(label), chunks)

    async def journal(self, label: str) -> Any:
        from agents_reconcile._backends.sqlite.journal import SQLiteJournal

        journal = SQLiteJournal(self.path(label))
        self.opened.append(journal)
        return journal

    def command_options(self, label: str) -> list[str]:
        return ["--journal", str(self.path(label))]

    async def footprint(self, label: str) -> int:
        path = self.path(label)
        return sum(
            place.stat().st_size
            for place in (path, path.with_name(path.name + "-wal"))
            if place.exists()
        )

    async def stored(self, label: str) -> dict[str, int]:
        def read() -> dict[str, int]:
            conn = sqlite3.connect(self.path(label), isolation_level=None)
            try:
                # Every commit copied into the file, so that its size is the file's alone.
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                pages, free, size = (
                    conn.execute(f"PRAGMA {pragma}").fetchone()[0]
                    for pragma in ("page_count", "freelist_count", "page_size")
                )
            finally:
                conn.close()
            return {"in use": (pages - free) * size}

        found = await asyncio.to_thread(read)
        found["file"] = await self.footprint(label)
        return found

    async def rows(self, label: str) -> dict[str, int]:
        def read() -> dict[str, int]:
            conn = sqlite3.connect(self.path(label), isolation_level=None)
            try:
                return {
                    kind: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    for kind, table in zip(KINDS, _SQLITE_TABLES, strict=True)
                }
            finally:
                conn.close()

        return await asyncio.to_thread(read)


_TABLES: Final = ("slots WHERE slot = 0", "decisions", "effects WHERE state = 'done'", "intents")
"""Where each of ``KINDS`` is, in SQL (PostgreSQL's journal, whose counts and live intents
share a row too: a session's slot 0, schema 4)."""
_SQLITE_TABLES: Final = ("live", "decisions", "effects WHERE state = 'done'", "unresolved")
"""The same in the SQLite journal, whose counts and live intents share a row (schema 4)."""


class PostgresEngine(Engine):
    name = "postgres"
    title = "PostgreSQL journal, sessions in a file SQLiteSession"
    bytes_said = (
        "pg_total_relation_size of the journal schema's tables (indexes and TOAST included) "
        "after a plain VACUUM: the space of pruned rows is reused by later rows, not returned "
        "to the file system"
    )

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.url = os.environ[POSTGRES_VAR]
        self.schemas: list[str] = []

    def schema(self, label: str) -> str:
        return f"growth_{os.getpid()}_{label}"

    async def fill(self, label: str, chunks: Iterable[list[Left]]) -> None:
        from agents_reconcile._backends.postgres.journal import PostgresJournal

        schema = self.schema(label)
        self.schemas.append(schema)
        journal = PostgresJournal(self.url, schema=schema)
        await journal.migrate()
        await journal.close()
        await postgres_fill(self.url, schema, chunks)

    async def journal(self, label: str) -> Any:
        from agents_reconcile._backends.postgres.journal import PostgresJournal

        journal = PostgresJournal(self.url, schema=self.schema(label))
        self.opened.append(journal)
        return journal

    def command_options(self, label: str) -> list[str]:
        return ["--journal", self.url, "--namespace", self.schema(label)]

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()

    async def footprint(self, label: str) -> int:
        total = await self._fetchval(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind = 'r'",
            self.schema(label),
        )
        return int(total)

    async def stored(self, label: str) -> dict[str, int]:
        import asyncpg

        schema = self.schema(label)
        conn = await asyncpg.connect(self.url)
        try:
            tables = await conn.fetch(
                "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
                schema,
            )
            for table in tables:
                await conn.execute(f'VACUUM "{schema}"."{table[0]}"')
        finally:
            await conn.close()
        return {"tables": await self.footprint(label)}

    async def rows(self, label: str) -> dict[str, int]:
        s = self.schema(label)
        found = {}
        for kind, table in zip(KINDS, _TABLES, strict=True):
            found[kind] = int(await self._fetchval(f"SELECT count(*) FROM {s}.{table}"))
        return found

    async def cleanup(self) -> None:
        import asyncpg

        await super().cleanup()
        conn = await asyncpg.connect(self.url)
        try:
            for schema in self.schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
        self.schemas.clear()


class RedisEngine(Engine):
    name = "redis"
    title = "Redis journal, sessions in a file SQLiteSession"
    bytes_said = (
        "the server's used_memory grown by the fill (the server is shared: other clients' "
        "keys move it too)"
    )

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.url = os.environ[REDIS_VAR]
        self.prefixes: list[str] = []
        self.before: dict[str, int] = {}

    def prefix(self, label: str) -> str:
        return f"growth-{os.getpid()}-{label}"

    async def prepare(self, sessions: int, per_session: int) -> list[str]:
        need = sessions * per_session * 1.1 / 2**20
        available = _available_mb()
        said = (
            f"redis: these journals need about {need:,.0f} MB of server memory; "
            f"{available:,.0f} MB available here"
        )
        if need > available / 2:
            raise SystemExit(f"{said}: too much for this machine; give smaller sizes")
        return [said + ": run"]

    async def used_memory(self) -> int:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            return int((await client.info("memory"))["used_memory"])
        finally:
            await client.aclose()

    async def fill(self, label: str, chunks: Iterable[list[Left]]) -> None:
        from agents_reconcile._backends.redis.journal import RedisJournal

        self.before[label] = await self.used_memory()
        prefix = self.prefix(label)
        self.prefixes.append(prefix)
        journal = RedisJournal.from_url(self.url, prefix=prefix)
        await journal.migrate()
        await journal.close()
        await redis_fill(self.url, prefix, chunks)

    async def journal(self, label: str) -> Any:
        from agents_reconcile._backends.redis.journal import RedisJournal

        journal = RedisJournal.from_url(self.url, prefix=self.prefix(label))
        self.opened.append(journal)
        return journal

    def command_options(self, label: str) -> list[str]:
        return ["--journal", self.url, "--namespace", self.prefix(label)]

    async def footprint(self, label: str) -> int:
        # The server's memory grown since the fill began (each journal has a prefix of its
        # own; measured right after the fill, before any other journal is filled).
        return max(0, await self.used_memory() - self.before.get(label, 0))

    async def stored(self, label: str) -> dict[str, int]:
        return {"memory": await self.footprint(label)}

    async def rows(self, label: str) -> dict[str, int]:
        import redis.asyncio as aioredis

        from agents_reconcile._backends.redis.layout import EFFECT_INDEX, JournalKeys

        layout = JournalKeys(self.prefix(label))
        names = layout.names
        client = aioredis.Redis.from_url(self.url)
        try:
            counts = 0
            async for key in client.scan_iter(match=layout.counts_pattern(), count=10_000):
                counts += layout.tagged(key) is not None
            return {
                "write counts": counts,
                "decisions": int(await client.hlen(names["decision"])),
                "receipts": int(await client.hlen(names[EFFECT_INDEX])),
                "intents": int(await client.hlen(names["index"])),
            }
        finally:
            await client.aclose()

    async def cleanup(self) -> None:
        from agents_reconcile._backends.redis.journal import RedisJournal

        for prefix in self.prefixes:
            journal = RedisJournal.from_url(self.url, prefix=prefix)
            await journal.drop()
            await journal.close()
        self.prefixes.clear()
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
