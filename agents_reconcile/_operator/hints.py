"""What a command tells an operator to run next, as complete command lines that run as printed
from the same directory: the journal options this command was given, the store where one is
needed, a reason to replace with what was checked, and the id (or session) last, after
``--``. An address is printed without its password (where it has one, put it back before
running the line).
``status`` points at ``show`` for each intent or effect that waits for a person; ``show``
prints one ``resolve`` line per resolution it would take."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .._backends.redaction import redacted
from .items import printable
from .paging import DEFAULT_LIMIT
from .placeholders import OUTPUT, REASON

__all__ = [
    "OUTPUT",
    "REASON",
    "journal_options",
    "more_lines",
    "next_page_hint",
    "operator_hints",
    "resolve_hints",
    "show_hint",
    "trail_hint",
]

PROG: Final = "agents-reconcile"


def journal_options(args: argparse.Namespace) -> list[str]:
    """The options naming the journal and its keys, as this command was given them."""
    return _options(
        args,
        (
            ("--journal", "journal"),
            ("--namespace", "namespace"),
            ("--payload-key-file", "payload_key_file"),
            ("--payload-key-env", "payload_key_env"),
        ),
    )


def store_options(store: str | None, namespace: str | None) -> list[str]:
    found = [] if store is None else ["--store", redacted(store)]
    return found + ([] if namespace is None else ["--store-namespace", namespace])


def _options(args: argparse.Namespace, names: Iterable[tuple[str, str]]) -> list[str]:
    found: list[str] = []
    for option, name in names:
        value = getattr(args, name, None)
        if value is not None:
            found += [option, redacted(value) if name == "journal" else value]
    return found


def show_hint(ident: str, args: argparse.Namespace) -> str:
    """The ``show`` command of an intent or effect, with this command's journal options."""
    return _command("show", journal_options(args), ident)


def trail_hint(session_id: str, args: argparse.Namespace) -> str:
    """The ``trail`` command of a session, with this command's journal options."""
    return _command("trail", journal_options(args), session_id)


def _command(name: str, options: list[str], ident: str) -> str:
    """A command line as every hint prints it: its options first, then ``--``, then the id or
    session (one read from a damaged row may begin with a dash, which ``--`` keeps an
    argument)."""
    return shlex.join([PROG, name, *options, "--", printable(ident)])


def resolve_hints(
    ident: str,
    args: argparse.Namespace,
    choices: Mapping[str, list[str]],
    *,
    store: str | None = None,
    store_namespace: str | None = None,
) -> list[str]:
    """One ``resolve`` line per choice (its extra options after it), each complete."""
    where = [*journal_options(args), *store_options(store, store_namespace)]
    return [
        _command("resolve", [*where, "--as", choice, *extra, "--reason", REASON], ident)
        for choice, extra in choices.items()
    ]


def operator_hints(found: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Lines to print after a status (none when nothing waits for a person)."""
    intents = [i["intent_id"] for i in found["pending"] if i["needs_operator"]]
    effects = [e["effect"] for e in found["effects"] if e["needs_operator"]]
    damaged = [d["id"] for d in found["damaged"] if d["kind"] == "intent"]
    waiting = len(intents) + len(effects) + len(found["damaged"])
    if not waiting:
        return []
    lines = [f"\n{waiting} need an operator. For each, its evidence and the ways to resolve it:"]
    for ident in [*intents, *effects, *damaged]:
        lines.append("    " + show_hint(ident, args))
    return lines


def next_page_hint(token: str, args: argparse.Namespace) -> str:
    """The ``status`` command that shows the page after this one: the same options, and the
    page's token."""
    narrowed = _options(args, (("--session", "session"),))
    if getattr(args, "limit", None) not in (None, DEFAULT_LIMIT):
        narrowed += ["--limit", str(args.limit)]
    return shlex.join([PROG, "status", *journal_options(args), *narrowed, "--after", token])


def more_lines(page: dict[str, Any], listing: str) -> list[str]:
    """What follows a page of ``listing`` (``pending`` or ``effects``), in a line; none when
    nothing does."""
    more = page[f"{listing}_more"]
    if not more:
        return []
    if listing == "pending":
        noun, waiting = "pending intent", page["pending_more_waiting"]
        said = "denied or left for an operator"
    else:
        noun, waiting = "started tool effect", page["effects_more_overdue"]
        said = "begun longer ago than the lease, perhaps waiting for an operator"
    if page[f"{listing}_counted_all"]:
        counted, among = f"{more:,} more {noun}{'s' if more != 1 else ''} after these", "them"
    else:
        counted = (
            f"at least {more:,} more {noun}s after these (counted to {more:,}: page on to see them)"
        )
        among = "those counted"
    extra = f", {waiting:,} of {among} {said}" if waiting else ""
    return [f"... and {counted}{extra}"]


def as_offered(outlook: Mapping[str, str]) -> dict[str, list[str]]:
    """The resolutions an outlook (``views.outlook``) does not refuse, with no extra options."""
    return {name: [] for name, said in outlook.items() if not said.startswith("refused")}


EFFECT_CHOICES: Final[dict[str, list[str]]] = {
    "committed": ["--output", OUTPUT],
    "retry": [],
    "abandon": [],
}
