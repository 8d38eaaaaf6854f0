"""Shared test setup: offline tracing, an isolated working directory, a clean flag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import set_tracing_disabled

from agents_reconcile.backends.registry import BACKENDS

set_tracing_disabled(True)


def pytest_configure(config: pytest.Config) -> None:
    """Register a marker per registered backend: ``-m "not redis"`` skips a server's tests."""
    for backend in BACKENDS:
        where = "a server" if backend.server else "no server"
        config.addinivalue_line("markers", f"{backend.name}: the {backend.name} backend ({where})")


@pytest.fixture(autouse=True)
def isolated_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run every test in its own directory, so the default journal file never leaks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTS_RECONCILE", raising=False)
    yield tmp_path


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
