"""Real Redis and PostgreSQL servers for the suites, found through environment variables.

``.ci/run`` (through ``scripts/services.sh``) starts both on loopback and exports
``AGENTS_RECONCILE_TEST_REDIS_URL`` and ``AGENTS_RECONCILE_TEST_POSTGRES_URL``. Without them,
tests that need a server are skipped, and the run's summary says which and why.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Final

import pytest

REDIS_ENV: Final = "AGENTS_RECONCILE_TEST_REDIS_URL"
POSTGRES_ENV: Final = "AGENTS_RECONCILE_TEST_POSTGRES_URL"


def redis_url() -> str:
    """The test Redis server's URL, or skip the test saying how to provide one."""
    url = os.environ.get(REDIS_ENV)
    if not url:
        pytest.skip(f"no Redis server: set {REDIS_ENV} (scripts/services.sh start does)")
    return url


def postgres_url() -> str:
    """The test PostgreSQL server's URL, or skip the test saying how to provide one."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL server: set {POSTGRES_ENV} (scripts/services.sh start does)")
    return url


class Wire:
    """Counts what an asyncpg connection sends: statements (its query logger) and protocol
    flushes (each one a request the client then waits on: a round trip)."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.flushes = 0

    async def attach(self, conn: Any) -> None:
        conn.add_query_logger(lambda record: self.statements.append(record.query))
        transport = conn._transport
        send = transport.write

        def write(data: Any) -> Any:
            self.flushes += 1
            return send(data)

        transport.write = write

    async def settled(self) -> None:
        # Query loggers are called soon after the statement, not during it.
        for _ in range(3):
            await asyncio.sleep(0)

    def clear(self) -> None:
        self.statements.clear()
        self.flushes = 0
