"""The operator's commands on the command line (``status``, ``show``, ``trail``, ``resolve``,
``check``, ``decisions``, ``prune``): their options, built by one builder each for what several
share (the journal's address, the payload keys, the store), and their handlers, which import
what they run only when run, so that ``--help`` answers at once."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from .durations import duration
from .placeholders import filled_in

__all__ = [
    "JOURNAL_ENV",
    "NAMESPACE_ENV",
    "add_operator_commands",
    "command_parser",
    "journal_from_environment",
    "journal_options",
    "key_options",
    "positive",
    "store_options",
]

_P = TypeVar("_P", bound=argparse.ArgumentParser)
_PAGE: Final = 50
"""``status``'s page (``paging.DEFAULT_LIMIT``, not imported here: ``--help`` stays light)."""
_BATCH: Final = 10_000
_KEPT_DAYS: Final = 30
"""``Retention()``'s default for each kind (not imported here: ``--help`` stays light)."""
_KINDS: Final = ("decisions", "receipts", "idle_sessions")
JOURNAL_ENV: Final = "AGENTS_RECONCILE_JOURNAL"
"""The journal's address for a command given no ``--journal`` (the operator's commands and
``migrate``; read by the command line only, never by the package in an application)."""
NAMESPACE_ENV: Final = "AGENTS_RECONCILE_JOURNAL_NAMESPACE"
"""The journal's namespace for a command given no ``--namespace``."""


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def journal_options(
    command: argparse.ArgumentParser,
    *,
    repeatable: bool = False,
    json: bool = True,
    default: str = "agents-reconcile.db here",
) -> None:
    """The options that address a journal, the same on every command that reads or writes
    one: ``--journal`` and ``--namespace`` (and ``--json``)."""
    where = "the journal: a path, sqlite:///..., redis://..., redis+cluster://..., postgresql://..."
    command.add_argument(
        "--journal",
        metavar="ADDRESS",
        action="append" if repeatable else "store",
        default=[] if repeatable else None,
        help=f"{where} (repeatable; default: ${JOURNAL_ENV} when set)"
        if repeatable
        else f"{where} (default: ${JOURNAL_ENV} when set, else {default})",
    )
    command.add_argument(
        "--namespace",
        metavar="NAME",
        help="the journal's Redis key prefix or PostgreSQL schema, when not the default "
        f"(default: ${NAMESPACE_ENV} when set)",
    )
    command.set_defaults(journal_from_environment=True)
    if json:
        command.add_argument(
            "--json",
            action="store_true",
            help="one JSON document instead of text (in it positions count from 0, as records "
            "keep them, and times are seconds since the epoch)",
        )


def journal_from_environment(
    args: argparse.Namespace, environment: Mapping[str, str] = os.environ
) -> None:
    """Fill in what a command's journal options leave unsaid from the environment
    (``JOURNAL_ENV``, ``NAMESPACE_ENV``), on the commands whose options ``journal_options``
    made: an option given on the command line wins, an empty variable counts as unset. Hints
    printed afterwards name the journal explicitly, so they run as printed anywhere."""
    if not getattr(args, "journal_from_environment", False):
        return
    address = environment.get(JOURNAL_ENV, "").strip()
    if address and not args.journal:
        args.journal = [address] if isinstance(args.journal, list) else address
    namespace = environment.get(NAMESPACE_ENV, "").strip()
    if namespace and args.namespace is None:
        args.namespace = namespace


def key_options(command: argparse.ArgumentParser) -> None:
    # Where the payload keys come from; never their value on the command line, which other
    # users of the host and the shell's history would see.
    keys = command.add_mutually_exclusive_group()
    keys.add_argument(
        "--payload-key-file",
        metavar="PATH",
        help="a file holding the deployment's payload keys (ReconcileConfig payload_key) as "
        "base64, the sealing one first, one a line: sealed records open, what is written is "
        "sealed",
    )
    keys.add_argument(
        "--payload-key-env",
        metavar="NAME",
        help="the environment variable holding them, comma-separated (default: "
        "AGENTS_RECONCILE_PAYLOAD_KEY, when set)",
    )


def store_options(command: argparse.ArgumentParser, what: str, *, required: bool = False) -> None:
    command.add_argument("--store", metavar="ADDRESS", required=required, help=what)
    command.add_argument(
        "--store-namespace",
        metavar="NAME",
        help="the store's Redis key prefix or PostgreSQL schema, when not the default",
    )


def command_parser(
    commands: argparse._SubParsersAction[_P], name: str, *, said: str, **options: Any
) -> _P:
    """A command of the command line, whose line in the list of commands (``said``) also heads
    its own ``--help``."""
    return commands.add_parser(name, help=said, description=said, **options)


def add_operator_commands(commands: argparse._SubParsersAction[_P]) -> None:
    """Add the operator's commands to the command line's ``commands``."""
    status = command_parser(
        commands,
        "status",
        aliases=["pending"],
        said="pending intents and tool effects without a receipt, by session, owner and age "
        "(exit 1: an operator is needed)",
    )
    journal_options(status)
    key_options(status)
    status.add_argument(
        "--session",
        metavar="ID",
        help="only this session (not found, exit 1: the journal holds nothing of it)",
    )
    status.add_argument(
        "--limit",
        type=positive,
        default=_PAGE,
        metavar="N",
        help=f"at most N intents and N tool effects a page (default {_PAGE})",
    )
    status.add_argument(
        "--after",
        metavar="TOKEN",
        help="show the page after the one that printed TOKEN (its last line says the command)",
    )
    status.set_defaults(handler=_status)

    show = command_parser(
        commands,
        "show",
        said="one intent or tool effect and its evidence: pending, what each resolution would "
        "do; settled, how, when and by whom (exit 1: no such id in the journal)",
    )
    show.add_argument(
        "intent", metavar="ID", help="an intent id or effect key, or a prefix naming one"
    )
    journal_options(show)
    key_options(show)
    store_options(show, "judge the intent against this store (read only)")
    show.add_argument(
        "--limit", type=positive, default=20, metavar="N", help="at most N decisions (default 20)"
    )
    show.set_defaults(handler=_show)

    trail = command_parser(
        commands,
        "trail",
        said="a session's decisions, oldest first (exit 1: the journal holds nothing of it)",
    )
    trail.add_argument("session", metavar="SESSION", help="the session id")
    journal_options(trail)
    trail.add_argument(
        "--limit", type=positive, default=100, metavar="N", help="the newest N (default 100)"
    )
    trail.set_defaults(handler=_trail)

    resolve = command_parser(
        commands,
        "resolve",
        said="resolve a pending intent (or a tool effect) as committed, replay or abandon, "
        "with a reason",
    )
    resolve.add_argument("intent", metavar="ID", help="the whole intent id or effect key")
    resolve.add_argument(
        "--as",
        dest="resolution",
        required=True,
        choices=("committed", "replay", "retry", "abandon"),
        help="committed: settle, never replay (an effect: its --output is the receipt); "
        "replay: append the batch once (an effect: retry); retry: run an effect's body again; "
        "abandon: drop the intent, write nothing",
    )
    resolve.add_argument(
        "--output",
        metavar="TEXT",
        type=filled_in("--output"),
        help="an effect resolved as committed: the output it gave",
    )
    resolve.add_argument(
        "--reason",
        required=True,
        metavar="TEXT",
        type=filled_in("--reason"),
        help="why (kept in the trail); a printed hint's placeholder is refused: replace it",
    )
    resolve.add_argument(
        "--actor", metavar="NAME", help="who, kept in the trail (default: user@host)"
    )
    resolve.add_argument(
        "--override",
        action="store_true",
        help="replay even where the rule does not see the history the write was meant for; "
        "settle as committed even where the store shows the batch missing",
    )
    journal_options(resolve)
    key_options(resolve)
    store_options(
        resolve, "the intent's store (default: the one its record names): to judge, and to replay"
    )
    resolve.set_defaults(handler=_resolve)

    check = command_parser(
        commands,
        "check",
        said="report damage in a stored history (duplicates, calls without outputs, outputs "
        "without calls); --repair fixes what the evidence proves (exit 1: damage left, or no "
        "such session in the store)",
    )
    check.add_argument("session", metavar="SESSION", help="the session id")
    store_options(check, "the session's store", required=True)
    journal_options(check, default="none is read; a repair is recorded in it")
    check.add_argument("--repair", action="store_true", help="repair what the evidence proves")
    check.add_argument("--reason", help="why (kept in the trail; needed with --repair)")
    check.add_argument(
        "--actor", metavar="NAME", help="who repairs, kept in the trail (default: user@host)"
    )
    key_options(check)
    check.set_defaults(handler=_check)

    decisions = command_parser(
        commands, "decisions", said="every session's decisions, newest first (payload-free)"
    )
    journal_options(decisions)
    decisions.add_argument(
        "--session",
        metavar="ID",
        help="only this session (exit 1: the journal holds nothing of it)",
    )
    decisions.add_argument(
        "--limit", type=positive, default=20, metavar="N", help="at most N (default 20)"
    )
    decisions.set_defaults(handler=_decisions)
    _add_prune(commands)


def _add_prune(commands: argparse._SubParsersAction[_P]) -> None:
    prune = command_parser(
        commands,
        "prune",
        said="remove settled decisions, receipts and idle sessions' write counts older than "
        "the retention, never what a guarantee needs (--dry-run: count them)",
    )
    journal_options(prune)
    for kind in _KINDS:
        prune.add_argument(
            f"--keep-{kind.replace('_', '-')}",
            type=duration,
            metavar="DURATION",
            help=f"keep {kind.replace('_', ' ')} this long (default: --keep, else "
            f"{_KEPT_DAYS}d): the deployment's ReconcileConfig(retention=...)",
        )
    prune.add_argument(
        "--keep", type=duration, metavar="DURATION", help="the default of the three --keep-*"
    )
    prune.add_argument("--dry-run", action="store_true", help="count what would go; remove nothing")
    prune.add_argument(
        "--batch",
        type=positive,
        default=_BATCH,
        metavar="N",
        help=f"rows of each kind one step examines at most (default {_BATCH}): each step is "
        "short, so writers wait little",
    )
    prune.set_defaults(handler=_prune)


def _prune(args: argparse.Namespace) -> int:
    from .pruning import prune

    return prune(args)


def _status(args: argparse.Namespace) -> int:
    from . import commands

    return commands.status(args)


def _show(args: argparse.Namespace) -> int:
    from . import commands

    return commands.show(args)


def _trail(args: argparse.Namespace) -> int:
    from . import commands

    return commands.trail(args)


def _resolve(args: argparse.Namespace) -> int:
    from . import commands

    return commands.resolve(args)


def _decisions(args: argparse.Namespace) -> int:
    from . import commands

    return commands.decisions(args)


def _check(args: argparse.Namespace) -> int:
    from . import commands

    return commands.check(args)
