"""The SDK sessions the suites run over, each opened on real files under a test directory."""

from __future__ import annotations

import pytest

from agents_reconcile.selftest.stores import STORES, Store, close_store

Backend = Store
close = close_store
BACKENDS = list(STORES)
BACKEND_PARAMS = [pytest.param(backend, id=backend.name) for backend in BACKENDS]
