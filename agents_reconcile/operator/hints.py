"""What ``status`` tells an operator to run next: for each intent or tool effect that waits
for a person, the ``show`` command that gives its evidence and the ``resolve`` command that
settles it, with its id and the journal options this status was given (an address without its
password), so that each runs as printed from the same directory once its choices are made."""

from __future__ import annotations

import argparse
import shlex
from typing import Any, Final

from ..backends.redaction import redacted

__all__ = ["journal_options", "operator_hints"]

PROG: Final = "agents-reconcile"
_INTENT_CHOICES: Final = "CHOICE is committed (it is stored), replay (append it once) or abandon"
_EFFECT_CHOICES: Final = (
    "CHOICE is committed (it happened: add --output 'WHAT THE SYSTEM SHOWS'), retry (run "
    "the body again) or abandon"
)


def journal_options(args: argparse.Namespace) -> list[str]:
    """The options naming the journal and its keys, as this command was given them."""
    found: list[str] = []
    for option, name in (
        ("--journal", "journal"),
        ("--namespace", "namespace"),
        ("--payload-key-file", "payload_key_file"),
        ("--payload-key-env", "payload_key_env"),
    ):
        value = getattr(args, name, None)
        if value is not None:
            found += [option, redacted(value) if name == "journal" else value]
    return found


def operator_hints(found: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Lines to print after a status (none when nothing waits for a person)."""
    intents = [i["intent_id"] for i in found["pending"] if i["needs_operator"]]
    effects = [e["effect"] for e in found["effects"] if e["needs_operator"]]
    waiting = len(intents) + len(effects) + len(found["damaged"])
    if not waiting:
        return []
    options = journal_options(args)
    lines = [f"\n{waiting} need an operator."]
    for kind, ids, choices in (
        ("intent", intents, _INTENT_CHOICES),
        ("effect", effects, _EFFECT_CHOICES),
    ):
        for ident in ids:
            lines.append(f"The {kind} {ident}: its evidence, then its resolution:")
            lines.append("    " + shlex.join([PROG, "show", ident, *options]))
            resolve = [PROG, "resolve", ident, *options, "--as", "CHOICE", "--reason", "WHY"]
            lines.append("    " + shlex.join(resolve))
        if ids:
            lines.append(f"  ({choices}; WHY is what you checked, kept in the trail.)")
    return lines
