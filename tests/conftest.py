"""Shared test setup: offline tracing, an isolated working directory, a clean flag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import set_tracing_disabled

set_tracing_disabled(True)


@pytest.fixture(autouse=True)
def isolated_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run every test in its own directory, so the default journal file never leaks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTS_RECONCILE", raising=False)
    yield tmp_path
