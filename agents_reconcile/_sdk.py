"""What this package needs of ``openai-agents``: checked by feature, where it is used.

``pyproject.toml`` pins the releases this package is tested with (``TESTED``; a test keeps the
two equal), and the installer holds a project to them. At run time nothing is inferred from a
version number: each internal of the SDK the package relies on is looked for where it is
needed, and its absence is an ``UnsupportedSDK`` naming what is missing and what needs it,
never a silent change of behaviour. What the package guarantees does not rest on the SDK's own
checks (a resumed state whose final output's save failed, for one, is refused by the wrapper
itself); ``SDK_FEATURES`` lists what it does take from the SDK.

Importing the package only checks that ``openai-agents`` is installed (read from the
distribution's metadata: nothing of the SDK is loaded).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final

from .errors import UnsupportedSDK

__all__ = [
    "SDK_FEATURES",
    "TESTED",
    "Feature",
    "check_sdk",
    "installed_version",
    "release",
    "require",
]

TESTED: Final = "openai-agents>=0.22.1,<0.25"
"""The releases this package is tested with, as ``pyproject.toml`` declares them."""

_RELEASE: Final = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def release(version: str) -> tuple[int, int, int] | None:
    """The ``(major, minor, micro)`` a version string starts with, or None."""
    found = _RELEASE.match(version.strip())
    if found is None:
        return None
    major, minor, micro = found.groups()
    return int(major), int(minor or 0), int(micro or 0)


def installed_version() -> str | None:
    """The installed ``openai-agents`` version (None: not installed)."""
    try:
        return metadata.version("openai-agents")
    except metadata.PackageNotFoundError:
        return None


def check_sdk() -> None:
    """Refuse a process without ``openai-agents`` (when the package is imported)."""
    if installed_version() is None:
        raise UnsupportedSDK(f"agents-reconcile needs {TESTED}, and openai-agents is not installed")


@dataclass(frozen=True)
class Feature:
    """An internal of the SDK this package relies on: ``name`` (its dotted path), what needs
    it, and how to find it (``probe``: whether it is there)."""

    name: str
    needed_for: str
    probe: Callable[[], bool]

    def present(self) -> bool:
        try:
            return self.probe()
        except Exception:
            return False


def _has(module: str, *names: str) -> Callable[[], bool]:
    def probe() -> bool:
        found = importlib.import_module(module)
        return all(callable(getattr(found, name, None)) for name in names)

    return probe


def _has_members(module: str, cls: str, *names: str) -> Callable[[], bool]:
    def probe() -> bool:
        found: Any = getattr(importlib.import_module(module), cls)
        return all(hasattr(found, name) for name in names)

    return probe


DEFAULT_RUNNER: Final = Feature(
    "agents.run.get_default_agent_runner / set_default_agent_runner / AgentRunner",
    "install(), which puts the gate into every run given a ReconcilingSession",
    _has("agents.run", "get_default_agent_runner", "set_default_agent_runner", "AgentRunner"),
)
ORPHAN_PRUNING: Final = Feature(
    "agents.run_internal.items.drop_orphan_function_calls",
    "the gate's session_input_callback, which builds a history-limited model input exactly as "
    "the SDK does (dropping tool outputs the limit cut off from their calls)",
    _has("agents.run_internal.items", "drop_orphan_function_calls"),
)
CONVERSATIONS: Final = Feature(
    "agents.memory.OpenAIConversationsSession._get_session_id / _clear_session_id",
    "reconciling an OpenAIConversationsSession (binding to its conversation, writing its "
    "requests one by one with the client's retries off)",
    _has_members(
        "agents.memory", "OpenAIConversationsSession", "_get_session_id", "_clear_session_id"
    ),
)
SDK_FEATURES: Final = (DEFAULT_RUNNER, ORPHAN_PRUNING, CONVERSATIONS)
"""Every internal of the SDK the package relies on, each checked where it is used."""


def require(feature: Feature, *, instead: str = "") -> None:
    """Raise ``UnsupportedSDK`` naming ``feature`` when this SDK lacks it (``instead``: what
    the caller can do without it)."""
    if feature.present():
        return
    version = installed_version() or "(not installed)"
    advice = f" {instead}" if instead else ""
    raise UnsupportedSDK(
        f"openai-agents {version} has no {feature.name}, which agents-reconcile needs for "
        f"{feature.needed_for}.{advice} This package is tested with {TESTED}."
    )
