"""Shared test setup: offline tracing, an isolated working directory, a clean flag, and every
registered journal for the tests that take ``journal`` (or ``place``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import set_tracing_disabled

from agents_reconcile._backends.registry import BACKENDS

from .support.backends import Place, registered
from .support.rotation import rotate

set_tracing_disabled(True)

EXHAUSTIVE = "AGENTS_RECONCILE_TEST_EXHAUSTIVE"
"""Set (to anything but empty), the cells of the matrices marked ``exhaustive`` run: the
default run keeps one cell of each equivalent kind, this adds the rest."""


def pytest_configure(config: pytest.Config) -> None:
    """Register a marker per registered backend: ``-m "not redis"`` skips a server's tests."""
    for backend in BACKENDS:
        where = "a server" if backend.server else "no server"
        config.addinivalue_line("markers", f"{backend.name}: the {backend.name} backend ({where})")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Size the matrices marked ``rotation``, and skip the exhaustive cells of the matrices
    unless asked for them."""
    rotate(items)
    if os.environ.get(EXHAUSTIVE):
        return
    skip = pytest.mark.skip(reason=f"an exhaustive cell: set {EXHAUSTIVE}=1 to run it")
    for item in items:
        if item.get_closest_marker("exhaustive") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def isolated_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run every test in its own directory, so the default journal file never leaks, and
    without the variables an operator may have set for the command line."""
    monkeypatch.chdir(tmp_path)
    for name in (
        "AGENTS_RECONCILE",
        "AGENTS_RECONCILE_JOURNAL",
        "AGENTS_RECONCILE_JOURNAL_NAMESPACE",
    ):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path


@pytest.fixture(params=registered("journal"))
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    """Where each registered backend keeps this test's journal (on a server, a namespace of
    its own); every journal opened there is closed and its data deleted afterwards."""
    found = Place(request.param, tmp_path, "journal")
    yield found
    await found.cleanup()


@pytest.fixture
def journal(place: Place) -> Any:
    """Each registered backend's journal, empty."""
    return place.journal()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which server-backed suites did not run, and how to run them."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if "server" in reason:
            reason = reason.removeprefix("Skipped: ")
            reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.write_sep("-", "skipped for want of a server")
        for reason, count in sorted(reasons.items()):
            terminalreporter.write_line(f"{count:5d}  {reason}")
        terminalreporter.write_line(
            '       start them with: eval "$(scripts/services.sh start)" (Debian, root or sudo)'
        )
