"""The SDK sessions the suites run over, each opened on real files (or a namespace of its own on
a real server) under a test directory."""

from __future__ import annotations

import os

import pytest

from agents_reconcile.selftest.stores import POSTGRES_ENV, REDIS_ENV, STORES, Store, close_store

from .servers import POSTGRES_ENV as POSTGRES_TEST_ENV
from .servers import REDIS_ENV as REDIS_TEST_ENV

# The revisioned server stores find their servers where the suites do.
for _test_env, _store_env in ((REDIS_TEST_ENV, REDIS_ENV), (POSTGRES_TEST_ENV, POSTGRES_ENV)):
    if os.environ.get(_test_env):
        os.environ.setdefault(_store_env, os.environ[_test_env])

Backend = Store
close = close_store
BACKENDS = list(STORES)
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
