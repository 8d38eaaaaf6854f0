"""Durations on the command line (``prune --keep 30d``): parsed by argparse, read by the
command; a module of their own, light enough for ``--help``."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Final

from .._core.retention import LONGEST

__all__ = ["FOREVER", "duration"]

FOREVER: Final = "forever"
"""What ``duration`` answers for ``forever``: kept for good."""
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def duration(text: str) -> timedelta | str:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or several: ``1d12h``), at most
    ``LONGEST`` (100 years), or ``forever`` (``FOREVER``: kept for good)."""
    word = text.strip().lower()
    if word == FOREVER:
        return FOREVER
    found = _DURATION.findall(word)
    if not found or "".join(n + unit for n, unit in found) != word:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (write 30d, 12h, 90m, 45s, 2w, 1d12h or forever)"
        )
    seconds = sum(float(n) * _UNITS[unit] for n, unit in found)
    if seconds > LONGEST.total_seconds():
        raise argparse.ArgumentTypeError(
            f"{text!r} is longer than a retention may be ({LONGEST.days // 365} years, "
            f"{LONGEST.days:,}d): write forever to keep for good"
        )
    return timedelta(seconds=seconds)
