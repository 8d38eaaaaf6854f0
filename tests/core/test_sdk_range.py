"""The supported openai-agents releases: the range the package declares, and the refusal of
any other release when the package is imported."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agents_reconcile import UnsupportedSDK
from agents_reconcile._sdk import SUPPORTED, check_sdk, release

ROOT = Path(__file__).resolve().parents[2]


def test_the_range_is_the_one_the_project_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert SUPPORTED in declared


@pytest.mark.parametrize("version", ["0.22.1", "0.22.3", "0.23.1", "0.24.0", "0.24.7"])
def test_a_release_in_the_range_is_accepted(version: str) -> None:
    check_sdk(version)


@pytest.mark.parametrize(
    "version", ["0.22.0", "0.21.1", "0.20.0", "0.1.0", "0.25.0", "0.25.0.dev1", "0.22.1rc1", "x"]
)
def test_a_release_outside_the_range_is_refused_naming_the_range(version: str) -> None:
    with pytest.raises(UnsupportedSDK, match=r"openai-agents>=0\.22\.1,<0\.25") as refused:
        check_sdk(version)
    assert version in str(refused.value)
    assert isinstance(refused.value, ImportError)


def test_release_reads_the_numbers_a_version_starts_with() -> None:
    assert release("0.24.0") == (0, 24, 0)
    assert release("0.24") == (0, 24, 0)
    assert release("0.24.0.post1") == (0, 24, 0)
    assert release("nope") is None


def test_importing_the_package_over_an_unsupported_sdk_fails_at_once() -> None:
    """The process that imports it with openai-agents 0.22.0 installed gets the refusal, not a
    failure somewhere later."""
    code = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "m.version = lambda name: '0.22.0' if name == 'openai-agents' else real(name)\n"
        "import agents_reconcile\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "UnsupportedSDK" in done.stderr
    assert "openai-agents>=0.22.1,<0.25" in done.stderr
    assert "0.22.0 is installed" in done.stderr
