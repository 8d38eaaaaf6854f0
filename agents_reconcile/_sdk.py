"""The ``openai-agents`` releases this package supports, checked when it is imported.

The range is the one ``pyproject.toml`` declares (a test keeps the two equal). It starts where
the SDK refuses to resume a ``RunState`` whose final-output save failed (0.22.1): before that,
such a resume makes its last model call again, and over a wrapper that has completed the
failed save both answers would be stored. Before 0.21.0 there is no ``agents.testing`` either
(which the examples and the tests run on), and the ``openai`` client is 2.x. Above the range
nothing has been measured. No setting widens it: a process outside it is refused, with the
range. The installed version is read from the distribution's metadata, so the check loads
nothing of the SDK.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Final

from .errors import UnsupportedSDK

__all__ = ["OLDEST", "SUPPORTED", "UPPER", "check_sdk", "release"]

OLDEST: Final = (0, 22, 1)
"""The oldest supported release."""
UPPER: Final = (0, 25, 0)
"""The first release not supported."""
SUPPORTED: Final = "openai-agents>=0.22.1,<0.25"
"""The range as ``pyproject.toml`` declares it."""

_RELEASE: Final = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def release(version: str) -> tuple[int, int, int] | None:
    """The ``(major, minor, micro)`` a version string starts with, or None."""
    found = _RELEASE.match(version.strip())
    if found is None:
        return None
    major, minor, micro = found.groups()
    return int(major), int(minor or 0), int(micro or 0)


def check_sdk(version: str | None = None) -> None:
    """Refuse an ``openai-agents`` outside ``SUPPORTED`` (``version``: the installed one)."""
    if version is None:
        try:
            version = metadata.version("openai-agents")
        except metadata.PackageNotFoundError:
            raise UnsupportedSDK(
                f"agents-reconcile needs {SUPPORTED}, and openai-agents is not installed"
            ) from None
    found = release(version)
    if found is None or not OLDEST <= found < UPPER or _pre_release_of(version, found):
        raise UnsupportedSDK(
            f"agents-reconcile supports {SUPPORTED}; openai-agents {version} is installed. "
            "Install a release in that range (or an agents-reconcile release that supports "
            "this one)"
        )


def _pre_release_of(version: str, found: tuple[int, int, int]) -> bool:
    """Whether ``version`` is a pre-release of the oldest release (before it, so refused)."""
    rest = version.strip()[len(".".join(map(str, found))) :]
    return found == OLDEST and bool(re.match(r"\.?(a|b|rc|dev)", rest))
