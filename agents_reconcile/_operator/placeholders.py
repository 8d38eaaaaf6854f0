"""The placeholders a printed ``resolve`` line holds for what only the operator can say (the
reason, a tool effect's output), and the check that refuses them as given: a line run as
printed would otherwise keep the placeholder in the trail as the evidence. Defined here once,
for the hints that print them and for the options that refuse them; nothing heavy is imported,
so that ``--help`` stays light."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final

__all__ = ["OUTPUT", "REASON", "filled_in"]

REASON: Final = "WHAT YOU CHECKED"
"""The reason printed in a hint, to be replaced by the operator's own (kept in the trail)."""
OUTPUT: Final = "WHAT THE SYSTEM SHOWS"
"""A tool effect's output printed in a hint, to be replaced by the one the system shows."""
_MEANT: Final = {
    "--reason": "what you checked, in your own words (kept in the trail)",
    "--output": "the output the tool's effect gave, as the system it acted on shows it",
}


def filled_in(option: str) -> Callable[[str], str]:
    """The type of ``option`` (``--reason``, ``--output``): its value as given, refused (a usage
    error, nothing recorded) when it is one of the placeholders, however spaced or cased."""

    def check(value: str) -> str:
        said = " ".join(value.split()).casefold()
        for placeholder in (REASON, OUTPUT):
            if said == placeholder.casefold():
                raise argparse.ArgumentTypeError(
                    f"{value!r} is the placeholder a printed hint holds; replace it with "
                    f"{_MEANT[option]}; nothing was recorded"
                )
        return value

    return check
