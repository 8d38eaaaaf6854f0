"""Real Redis and PostgreSQL servers for the suites, found through environment variables.

``.ci/run`` (through ``scripts/services.sh``) starts both on loopback and exports
``AGENTS_RECONCILE_TEST_REDIS_URL`` and ``AGENTS_RECONCILE_TEST_POSTGRES_URL``. Without them,
tests that need a server are skipped, and the run's summary says which and why.
"""

from __future__ import annotations

import os
from typing import Final

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
