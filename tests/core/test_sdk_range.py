"""What the package needs of openai-agents is checked by feature, where it is used: the
releases it is tested with are the ones the project declares, no version number refuses or
admits anything at run time, and a missing internal is an ``UnsupportedSDK`` naming it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from agents import SQLiteSession

import agents_reconcile
from agents_reconcile import ReconcileConfig, ReconcilingSession, UnsupportedSDK
from agents_reconcile._sdk import SDK_FEATURES, TESTED, Feature, release, require
from agents_reconcile._session import default_runner, gate

ROOT = Path(__file__).resolve().parents[2]


def test_the_tested_releases_are_the_ones_the_project_declares() -> None:
    """pyproject.toml pins the releases the package is tested with, and says the same."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert TESTED in declared


@pytest.mark.parametrize("feature", SDK_FEATURES, ids=lambda f: f.name.split(" ")[0])
def test_every_internal_the_package_relies_on_is_in_the_installed_sdk(feature: Feature) -> None:
    """Each release CI runs at has every internal the package relies on."""
    assert feature.present(), feature.name


def test_a_missing_internal_is_refused_naming_it_and_what_needs_it() -> None:
    """``require`` names the internal, what needs it, what to do instead, and the releases."""
    missing = Feature("agents.nowhere.thing", "a purpose", lambda: False)
    with pytest.raises(UnsupportedSDK) as refused:
        require(missing, instead="Do this instead.")
    text = str(refused.value)
    assert "agents.nowhere.thing" in text and "a purpose" in text
    assert "Do this instead." in text and TESTED in text
    assert isinstance(refused.value, ImportError)


def test_a_probe_that_raises_counts_as_missing() -> None:
    """A probe that fails to import is an absent feature, not a crash."""

    def broken() -> bool:
        raise ImportError("gone")

    assert not Feature("x", "y", broken).present()


def test_install_without_the_default_runner_hook_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs would go ungated while the caller believes otherwise: ``install()`` raises."""
    monkeypatch.setattr(default_runner, "set_default_agent_runner", None)
    monkeypatch.setattr(
        default_runner,
        "DEFAULT_RUNNER",
        replace(default_runner.DEFAULT_RUNNER, probe=lambda: False),
    )
    with pytest.raises(UnsupportedSDK, match="set_default_agent_runner") as refused:
        agents_reconcile.install()
    assert "run_config=session.run_config" in str(refused.value)


def test_merging_retried_input_without_the_sdk_pruning_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The gate's input callback prunes exactly as the SDK does, or is not installed at all;
    without merging, the gate needs nothing of it."""
    monkeypatch.setattr(gate, "_drop_orphans", None)
    monkeypatch.setattr(gate, "ORPHAN_PRUNING", replace(gate.ORPHAN_PRUNING, probe=lambda: False))
    merging = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"), config=ReconcileConfig(journal=tmp_path / "j.db")
    )
    with pytest.raises(UnsupportedSDK, match="drop_orphan_function_calls"):
        merging.run_config()
    plain = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j.db", merge_retried_input=False),
    )
    assert plain.run_config().call_model_input_filter is not None


def test_release_reads_the_numbers_a_version_starts_with() -> None:
    assert release("0.24.0") == (0, 24, 0)
    assert release("0.24") == (0, 24, 0)
    assert release("0.24.0.post1") == (0, 24, 0)
    assert release("nope") is None


def test_importing_the_package_over_any_release_reads_no_version_number() -> None:
    """A process whose openai-agents reports a release outside the tested ones imports the
    package: what it needs is checked where it is used, not inferred from the number."""
    code = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "m.version = lambda name: '0.19.0' if name == 'openai-agents' else real(name)\n"
        "import agents_reconcile\n"
        "print('imported')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "imported" in done.stdout


def test_importing_the_package_without_the_sdk_fails_at_once() -> None:
    """Without openai-agents at all, the import says so, naming the releases."""
    code = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "def version(name):\n"
        "    if name == 'openai-agents':\n"
        "        raise m.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "m.version = version\n"
        "import agents_reconcile\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "UnsupportedSDK" in done.stderr and TESTED in done.stderr


def test_a_conversations_session_without_its_client_is_refused_naming_it() -> None:
    """The wrapper writes a Conversations batch through the session's own client, request by
    request; an SDK whose session keeps no ``_openai_client`` is named, never worked around."""
    from agents.memory import OpenAIConversationsSession

    from agents_reconcile._session.conversation_calls import ConversationCalls

    session = OpenAIConversationsSession.__new__(OpenAIConversationsSession)
    with pytest.raises(UnsupportedSDK, match="_openai_client"):
        ConversationCalls(session)
