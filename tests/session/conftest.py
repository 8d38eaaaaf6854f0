"""What the session suites share: one conversation's world over the store kind a test is
parametrized with (``indirect``), closed (and a server store's data dropped) afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ..support.backends import Backend
from ..support.runner_support import World


@pytest.fixture
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    backend: Backend = request.param
    world = World(backend, tmp_path)
    yield world
    await world.close()
