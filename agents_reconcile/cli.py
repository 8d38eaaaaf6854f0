"""The ``agents-reconcile`` command: run the demo, and look into an intent journal.

::

    agents-reconcile demo [--dir DIR]
    agents-reconcile pending --journal PATH [--session ID]
    agents-reconcile decisions --journal PATH [--session ID] [--limit N]
    agents-reconcile selftest [--store NAME] [--path PATH] [--no-foreign] [--workers N]
    agents-reconcile migrate [--check] [--journal ADDRESS ...] [--store ADDRESS ...]

``pending`` and ``decisions`` open the SQLite journal read-only and never print a batch's
contents: only ids, states, owners, counts and digests. Problems with the journal (missing,
damaged, a record that fails its digest) are reported on one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

from . import __version__
from .backends.redaction import redacted
from .config import ReconcileConfig
from .errors import ConfigurationError, JournalError, RecordError, SchemaMismatch
from .journal import SQLiteJournal, journal_path
from .selftest.scenario import RecoveryPath
from .selftest.stores import STORES

__all__ = ["main"]

PROG: Final = "agents-reconcile"
EXIT_OK: Final = 0
EXIT_TROUBLE: Final = 2
_T = TypeVar("_T")


async def _read_only(address: str, read: Callable[[SQLiteJournal], Awaitable[_T]]) -> _T:
    path = journal_path(address)
    if path is None:
        raise ConfigurationError(
            f"{redacted(address)} is not an SQLite journal: give its file's path or an "
            "sqlite:/// URL"
        )
    # Inspecting a journal must never create, migrate or write it.
    journal = SQLiteJournal(path, read_only=True)
    try:
        return await read(journal)
    finally:
        await journal.close()


# -- commands ----------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    if args.dir is None:
        directory = Path(tempfile.mkdtemp(prefix="agents-reconcile-demo-"))
        print(f"Demo files go to a new temporary directory: {directory}")
    else:
        directory = Path(args.dir)
    return asyncio.run(run_demo(directory, sys.stdout))


def _cmd_pending(args: argparse.Namespace) -> int:
    entries = asyncio.run(_read_only(args.journal, lambda journal: journal.pending(args.session)))
    if not entries:
        where = f" for session {args.session!r}" if args.session else ""
        print(f"No pending intents{where}.")
        return EXIT_OK
    now = time.time()
    lease = ReconcileConfig().lease_seconds
    rows = [("INTENT", "SESSION", "STATE", "AGE", "ITEMS", "OWNER", "BACKEND")]
    for entry in entries:
        intent = entry.intent
        live = entry.owner.is_live(age_seconds=now - entry.updated_at, lease_seconds=lease)
        rows.append(
            (
                intent.intent_id,
                intent.session_id,
                entry.state.value,
                _age(now - intent.created_at),
                str(len(intent.batch)),
                f"{entry.owner.host}/{entry.owner.pid} ({'live' if live else 'gone'})",
                str(intent.backend),
            )
        )
    _table(rows)
    return EXIT_OK


def _cmd_decisions(args: argparse.Namespace) -> int:
    decisions = asyncio.run(
        _read_only(
            args.journal,
            lambda journal: journal.decisions(session_id=args.session, limit=args.limit),
        )
    )
    if not decisions:
        where = f" for session {args.session!r}" if args.session else ""
        print(f"No decisions recorded{where}.")
        return EXIT_OK
    rows = [("DECIDED (UTC)", "SESSION", "INTENT", "OUTCOME", "REASON", "ACTION")]
    for decision in decisions:
        rows.append(
            (
                datetime.fromtimestamp(decision.decided_at, UTC).strftime("%Y-%m-%d %H:%M:%S"),
                decision.session_id,
                decision.intent_id,
                decision.outcome.value,
                decision.reason.value,
                decision.action.value,
            )
        )
    widths = _widths(rows)
    print(_row(rows[0], widths))
    for row, decision in zip(rows[1:], decisions, strict=True):
        print(_row(row, widths))
        # Digests and counts only: the evidence never holds an item's content.
        print(f"    evidence: {decision.evidence_text()}")
    return EXIT_OK


def _age(seconds: float) -> str:
    whole = max(int(seconds), 0)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]


def _row(row: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = _widths(rows)
    for row in rows:
        print(_row(row, widths))


def _cmd_selftest(args: argparse.Namespace) -> int:
    from .selftest.command import run_selftest

    return run_selftest(
        stores=args.store,
        paths=args.path,
        foreign=not args.no_foreign,
        workers=args.workers,
        keep=None if args.keep is None else Path(args.keep),
        redis_url=args.redis_url,
        postgres_url=args.postgres_url,
    )


def _cmd_migrate(args: argparse.Namespace) -> int:
    from .migrate import Target, run

    targets = [Target("journal", address, args.namespace) for address in args.journal]
    targets += [Target("store", address, args.namespace) for address in args.store]
    if not targets:
        print(f"{PROG} migrate: name at least one --journal or --store", file=sys.stderr)
        return EXIT_TROUBLE
    results = asyncio.run(run(targets, check=args.check))
    for target, current, what in results:
        print(f"{'ok     ' if current else 'MIGRATE'} {target}: {what}")
    return EXIT_OK if all(current for _, current, _ in results) else 1


# -- entry point -------------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Reconcile uncertain OpenAI Agents SDK session writes: demo and journal "
        "inspection.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run three offline scenes: replayed, committed, denied")
    demo.add_argument(
        "--dir", metavar="DIR", help="where to keep the demo's files (default: a new temp dir)"
    )
    demo.set_defaults(handler=_cmd_demo)

    pending = commands.add_parser(
        "pending", help="list unresolved intents (ids, states, owners; never item contents)"
    )
    pending.add_argument("--journal", required=True, metavar="PATH", help="SQLite journal file")
    pending.add_argument("--session", metavar="ID", help="only this session")
    pending.set_defaults(handler=_cmd_pending)

    decisions = commands.add_parser(
        "decisions", help="show the decision trail, newest first (payload-free)"
    )
    decisions.add_argument("--journal", required=True, metavar="PATH", help="SQLite journal file")
    decisions.add_argument("--session", metavar="ID", help="only this session")
    decisions.add_argument(
        "--limit", type=_positive, default=20, metavar="N", help="at most N (default 20)"
    )
    decisions.set_defaults(handler=_cmd_decisions)

    selftest = commands.add_parser(
        "selftest",
        help="kill agent runs with SIGKILL at every crash point, recover, and check (offline)",
    )
    selftest.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="NAME",
        help="only this store (repeatable): " + ", ".join(s.name for s in STORES),
    )
    selftest.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="PATH",
        help="only this recovery path (repeatable): " + ", ".join(p.value for p in RecoveryPath),
    )
    selftest.add_argument(
        "--no-foreign",
        action="store_true",
        help="skip the scenarios where another writer appends before the recovery",
    )
    selftest.add_argument(
        "--workers",
        type=_positive,
        default=2,
        metavar="N",
        help="scenarios run at once (default 2)",
    )
    selftest.add_argument("--keep", metavar="DIR", help="keep every scenario's files under DIR")
    selftest.add_argument(
        "--redis-url", metavar="URL", help="also run the revisioned Redis store on this server"
    )
    selftest.add_argument(
        "--postgres-url",
        metavar="URL",
        help="also run the revisioned PostgreSQL store on this server",
    )
    selftest.set_defaults(handler=_cmd_selftest)

    migrate = commands.add_parser(
        "migrate",
        help="create or upgrade journal and revisioned-store schemas (--check: verify only)",
    )
    migrate.add_argument(
        "--journal",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a journal: SQLite path, sqlite:///..., redis://..., postgresql://... (repeatable)",
    )
    migrate.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a revisioned store: the same forms (repeatable)",
    )
    migrate.add_argument(
        "--namespace",
        metavar="NAME",
        help="Redis key prefix or PostgreSQL schema, when not the default",
    )
    migrate.add_argument(
        "--check",
        action="store_true",
        help="run no DDL and write nothing; exit 1 when something needs migrating",
    )
    migrate.set_defaults(handler=_cmd_migrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 demo check failed, 2 trouble)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:
        # --help, --version and usage errors: report their code instead of leaving the caller.
        code = exit_request.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_TROUBLE)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (JournalError, RecordError, SchemaMismatch, ConfigurationError, OSError) as exc:
        print(f"{PROG}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_TROUBLE
    except KeyboardInterrupt:
        return 130


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
