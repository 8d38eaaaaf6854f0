"""The ``agents-reconcile`` command: run the demo, look into any intent journal, resolve what
needs an operator, check a stored history for damage, migrate schemas, and run the self-test.

::

    agents-reconcile demo [--dir DIR]
    agents-reconcile status [--journal ADDRESS] [--session ID] [--limit N] [--after TOKEN]
                            [--json]
    agents-reconcile show [--journal ADDRESS] [--store ADDRESS] [--json] -- INTENT|EFFECT
    agents-reconcile trail [--journal ADDRESS] [--limit N] [--json] -- SESSION
    agents-reconcile resolve --as committed|replay|retry|abandon --reason TEXT [--actor NAME]
                             [--journal ADDRESS] [--store ADDRESS] [--override]
                             [--output TEXT] [--json] -- INTENT|EFFECT
    agents-reconcile check --store ADDRESS [--journal ADDRESS] [--repair --reason TEXT]
                           [--json] -- SESSION
    agents-reconcile decisions [--journal ADDRESS] [--session ID] [--limit N] [--json]
    agents-reconcile selftest [--store NAME] [--path PATH] [--no-foreign] [--workers N]
                             [--only kill|cancel]
    agents-reconcile selftest --fleet [--workers N] [--sessions N] [--rounds N] [--lease S]
                             [--journal NAME] [--store NAME] [--own-servers] [--seed N]
                             [--redis-cluster-url URL] [--replicas N]
    agents-reconcile migrate [--check] [--journal ADDRESS ...] [--store ADDRESS ...] [--json]

A journal address is any the library takes: a path, ``sqlite:///``, ``redis://``,
``redis+cluster://``, ``postgresql://`` (default: ``AGENTS_RECONCILE_JOURNAL`` when set, else
the library's default file in the working directory; the namespace likewise from
``AGENTS_RECONCILE_JOURNAL_NAMESPACE``; an option given wins). Where the
deployment seals payloads, ``status``, ``show``, ``resolve`` and ``check`` take its payload keys
from a file (``--payload-key-file PATH``) or a variable (``--payload-key-env NAME``, default
``AGENTS_RECONCILE_PAYLOAD_KEY``), never from the command line; the signing keys come from
``AGENTS_RECONCILE_SIGNING_KEY``. Reading
never creates, migrates or writes a journal, and nothing printed holds an item's content:
only ids, states, owners, counts, digests and reasons. An id or session goes last, after
``--``, as every printed hint has it; text counts positions from 1 and gives times in UTC,
``--json`` counts from 0 and gives seconds since the epoch. Exit codes: 0 fine; 1 something
needs an operator (or was refused, or a check failed, or nothing has the id or session
named); 2 the journal or store could not be used.

Everything is imported when its command runs, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, NoReturn

from ._operator.options import (
    add_operator_commands,
    command_parser,
    journal_from_environment,
    journal_options,
    positive,
)

__all__ = ["main"]

PROG: Final = "agents-reconcile"
EXIT_OK: Final = 0
EXIT_ATTENTION: Final = 1
EXIT_TROUBLE: Final = 2
_STORE_NAMES: Final = (
    "sqlite, async_sqlite, advanced_sqlite, encrypted_sqlite, sqlalchemy_sqlite, "
    "revisioned_<backend>, conversations (with AGENTS_RECONCILE_SELFTEST_CONVERSATIONS_URL)"
)
_RECOVERY_PATHS: Final = "run, streamed, resume_run, resume_streamed"
_CONVENTIONS: Final = """\
conventions (every command, and every command line printed as a hint):
  options first, then --, then the id or session:
    agents-reconcile show --journal journal.db -- 6091a6005d7c
  text counts positions from 1, --json from 0; text gives times in UTC
  (2026-12-01 10:20:51), --json as seconds since the epoch
exit codes: 0 fine; 1 something needs an operator, was refused, or was not
  found (no such id or session); 2 the journal, store or command line could
  not be used"""


# -- commands ----------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import check_settings, run_demo

    # A setting the scenes would refuse (AGENTS_RECONCILE=maybe) is refused before any
    # directory is made, the temporary one included.
    check_settings(None if args.dir is None else Path(args.dir))
    if args.dir is None:
        directory = Path(tempfile.mkdtemp(prefix="agents-reconcile-demo-"))
        print(f"Demo files go to a new temporary directory: {directory}")
    else:
        directory = Path(args.dir)
    return asyncio.run(run_demo(directory, sys.stdout))


def _cmd_selftest(args: argparse.Namespace) -> int:
    if args.fleet:
        return _fleet(args)
    from ._selftest.command import run_selftest

    return run_selftest(
        stores=args.store,
        paths=args.path,
        foreign=not args.no_foreign,
        workers=args.workers or 2,
        keep=None if args.keep is None else Path(args.keep),
        redis_url=args.redis_url,
        postgres_url=args.postgres_url,
        only=args.only,
        out=sys.stdout,  # the stream of now, not the one of when the module was imported
    )


def _fleet(args: argparse.Namespace) -> int:
    from ._selftest.fleet import JOURNALS, STORES, FleetOptions, run_fleet

    for flag, given, known in (
        ("--journal", args.journal, JOURNALS),
        ("--store", args.store, STORES),
    ):
        unknown = [name for name in given if name not in known]
        if unknown:
            print(
                f"{PROG} selftest --fleet: unknown {flag} {', '.join(unknown)}; "
                f"known: {', '.join(known)}",
                file=sys.stderr,
            )
            return EXIT_TROUBLE
    options = FleetOptions(
        workers=args.workers or 8,
        sessions=args.sessions,
        rounds=args.rounds,
        settle_sessions=args.settle_sessions,
        lease=args.lease,
        pause=args.lease * 1.6,
        journals=tuple(args.journal) or JOURNALS,
        stores=tuple(args.store) or STORES,
        redis_url=args.redis_url,
        postgres_url=args.postgres_url,
        redis_cluster_url=args.redis_cluster_url,
        replicas=args.replicas,
        own_servers=args.own_servers,
        seed=args.seed,
        keep=None if args.keep is None else Path(args.keep),
    )
    return run_fleet(options)


def _lease(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.1 <= value <= 60:
        raise argparse.ArgumentTypeError(f"must be between 0.1 and 60 seconds, not {value}")
    return value


def _cmd_migrate(args: argparse.Namespace) -> int:
    from ._backends.migrate import Target, run

    targets = [Target("journal", address, args.namespace) for address in args.journal]
    store_namespace = args.store_namespace or args.namespace
    targets += [Target("store", address, store_namespace) for address in args.store]
    if not targets:
        said = "name at least one --journal or --store"
        if args.json:
            return _json_error(said, "usage", EXIT_TROUBLE)
        print(f"{PROG} migrate: {said}", file=sys.stderr)
        return EXIT_TROUBLE
    results = asyncio.run(run(targets, check=args.check))
    current = all(done for _, done, _ in results)
    if args.json:
        import orjson

        from ._backends.migrate import safe_address

        document = {
            "check": args.check,
            "current": current,
            "targets": [
                {
                    "kind": target.kind,
                    "address": safe_address(target.address),
                    "namespace": target.namespace,
                    "current": done,
                    "result": what,
                }
                for target, done, what in results
            ],
        }
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for target, done, what in results:
            print(f"{'ok     ' if done else 'MIGRATE'} {target}: {what}")
    return EXIT_OK if current else EXIT_ATTENTION


# -- entry point -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Reconcile uncertain OpenAI Agents SDK session writes: the demo, what an\n"
        "operator needs (status, show, trail, resolve, check), schemas and the self-test.",
        epilog=_CONVENTIONS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = command_parser(
        commands, "demo", said="run three offline scenes: replayed, committed, denied"
    )
    demo.add_argument(
        "--dir", metavar="DIR", help="where to keep the demo's files (default: a new temp dir)"
    )
    demo.set_defaults(handler=_cmd_demo)
    add_operator_commands(commands)

    selftest = command_parser(
        commands,
        "selftest",
        said="kill agent runs with SIGKILL at every crash point, recover, and check (offline)",
    )
    selftest.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="NAME",
        help=f"only this store (repeatable): {_STORE_NAMES}",
    )
    selftest.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="PATH",
        help=f"only this recovery path (repeatable): {_RECOVERY_PATHS} (the cancellation "
        "matrix: a fresh run's cells for run and streamed, a resumed checkpoint's for resume_*)",
    )
    selftest.add_argument(
        "--no-foreign",
        action="store_true",
        help="skip the scenarios where another writer appends before the recovery",
    )
    selftest.add_argument(
        "--workers",
        type=positive,
        metavar="N",
        help="scenarios run at once (default 2); with --fleet, worker processes (default 8)",
    )
    selftest.add_argument("--keep", metavar="DIR", help="keep every scenario's files under DIR")
    selftest.add_argument(
        "--only",
        choices=("kill", "cancel"),
        help="run only the SIGKILL crash-point matrix, or only the cancellation matrix "
        "(default: both; the cancellation matrix also runs the store sqlite_late)",
    )
    selftest.add_argument(
        "--redis-url", metavar="URL", help="also run the revisioned Redis store on this server"
    )
    selftest.add_argument(
        "--postgres-url",
        metavar="URL",
        help="also run the revisioned PostgreSQL store on this server",
    )
    fleet = selftest.add_argument_group(
        "fleet",
        "--fleet: worker processes on simulated hosts append to shared sessions through one "
        "journal while workers are killed, paused past their lease, their replies lost and "
        "the servers restarted; a judge then counts duplicates, losses, double settlements, "
        "stale writes and continuations on doubt (--store then names sqlite or "
        "revisioned_<backend>)",
    )
    fleet.add_argument("--fleet", action="store_true", help="run the fleet self-test instead")
    fleet.add_argument(
        "--journal",
        action="append",
        default=[],
        metavar="NAME",
        help="only this journal (repeatable): sqlite, redis, postgres, redis_cluster",
    )
    fleet.add_argument(
        "--sessions", type=positive, default=3, metavar="N", help="shared sessions (default 3)"
    )
    fleet.add_argument(
        "--rounds", type=positive, default=20, metavar="N", help="faults per cell (default 20)"
    )
    fleet.add_argument(
        "--settle-sessions",
        type=positive,
        default=240,
        metavar="N",
        help="sessions with a failed intent that the workers settle at once, per journal, "
        "for the throughput figure (default 240)",
    )
    fleet.add_argument(
        "--lease", type=_lease, default=1.0, metavar="SECONDS", help="lease (default 1.0)"
    )
    fleet.add_argument(
        "--own-servers",
        action="store_true",
        help="start private Redis and PostgreSQL servers and a private six-node Redis Cluster "
        "here; restart the servers and kill the cluster's primaries as faults",
    )
    fleet.add_argument(
        "--redis-cluster-url",
        metavar="URL",
        help="run the Redis Cluster cells on this cluster (redis+cluster://HOST:PORT,...); "
        "its primaries are failed over (CLUSTER FAILOVER) as a fault, never killed",
    )
    fleet.add_argument(
        "--replicas",
        type=positive,
        default=0,
        metavar="N",
        help="run the Redis Cluster cells again with the replica wait: every journal and store "
        "write waits for N replicas (?replicas=N in their addresses; default 0: not)",
    )
    fleet.add_argument("--seed", type=int, metavar="N", help="seed of the driver's choices")
    selftest.set_defaults(handler=_cmd_selftest)

    migrate = command_parser(
        commands,
        "migrate",
        said="create or upgrade journal and revisioned-store schemas (--check: verify only)",
    )
    journal_options(migrate, repeatable=True)
    migrate.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a revisioned store: the same forms (repeatable)",
    )
    migrate.add_argument(
        "--store-namespace",
        metavar="NAME",
        help="the stores' Redis key prefix or schema (default: --namespace)",
    )
    migrate.add_argument(
        "--check",
        action="store_true",
        help="run no DDL and write nothing; exit 1 when something needs migrating",
    )
    migrate.set_defaults(handler=_cmd_migrate)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


class _UsageError(Exception):
    """A command line argparse refused: said by ``main``, as text or as JSON."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (0 fine, 1 an operator is needed, a
    resolution was refused or a check failed, 2 trouble). Under ``--json`` an error is one
    JSON object on standard output too: ``{"error": ..., "kind": ..., "exit": N}``."""
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as usage:
        if any(word.startswith("--js") for word in argv):
            return _json_error(str(usage), "usage", EXIT_TROUBLE)
        usage.parser.print_usage(sys.stderr)
        print(f"{usage.parser.prog}: error: {usage}", file=sys.stderr)
        return EXIT_TROUBLE
    except SystemExit as exit_request:
        # --help and --version: report their code instead of leaving the caller.
        code = exit_request.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_TROUBLE)
    from sqlite3 import Error as SQLiteError

    from ._operator.presence import NotFound
    from .errors import ReconcileError

    journal_from_environment(args)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except NotFound as missing:
        # Nothing by the name given: said plainly, exit 1, as a refusal is (never "nothing
        # found" with exit 0, which a mistyped name would pass for).
        said = _one_line(missing)
        if getattr(args, "json", False):
            named = {"what": missing.what, "name": missing.name}
            return _json_error(said, type(missing).__name__, EXIT_ATTENTION, named)
        print(f"{PROG}: {said}", file=sys.stderr)
        return EXIT_ATTENTION
    except Exception as exc:
        # Every failure is trouble (exit 2), never "an operator is needed" (1): a driver's
        # error, a missing extra, a value no check foresaw. Ours are one line; others say
        # their type too.
        known = isinstance(exc, (ReconcileError, OSError, SQLiteError))
        said = _one_line(exc) if known else f"{type(exc).__name__}: {_one_line(exc)}"
        if getattr(args, "json", False):
            return _json_error(said, type(exc).__name__, EXIT_TROUBLE)
        print(f"{PROG}: {said}", file=sys.stderr)
        return EXIT_TROUBLE


def _json_error(
    message: str, kind: str, code: int, fields: Mapping[str, object] | None = None
) -> int:
    import orjson

    document = {"error": message, "kind": kind, "exit": code, **(fields or {})}
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
