"""``agents-reconcile prune``: remove what the retention lets go from a journal, in batches,
and say what went (``--dry-run``: what would go) and how many bytes. Wrappers prune as they
append (``_session/pruning.py``); this is for a journal nobody appends to, a first prune of a
journal that grew before, or a retention changed."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Final

from .._backends.redaction import redacted
from .._core.retention import KINDS, Pruned, Retention
from ..errors import ConfigurationError
from .durations import FOREVER
from .journals import command_journal
from .output import EXIT_OK, print_json, print_table

__all__ = ["prune"]

_MOST_BATCHES: Final = 1_000_000
"""A bound on one command's batches (ten billion rows at the default batch): it ends."""


def prune(args: argparse.Namespace) -> int:
    retention = _retention_of(args)

    async def run() -> tuple[Pruned, int]:
        journal = await command_journal(args, writing=not args.dry_run)
        try:
            pruning = journal.retention
            if pruning is None:
                raise ConfigurationError(
                    f"{type(journal).__qualname__} does not prune (it has no retention "
                    "component: journal.retention is None): it keeps everything"
                )
            if args.dry_run:
                return await pruning.prune(retention, dry_run=True), 1
            total, steps = Pruned(), 0
            while steps < _MOST_BATCHES:
                total, steps = total + await pruning.prune(retention, limit=args.batch), steps + 1
                if total.done:
                    break
            return total, steps
        finally:
            await journal.close()

    pruned, steps = asyncio.run(run())
    kept = {kind: retention.seconds(kind) for kind in KINDS}
    if args.json:
        print_json(
            {
                "journal": redacted(args.journal or "agents-reconcile.db"),
                "dry_run": args.dry_run,
                "kept_seconds": kept,
                "decisions": pruned.decisions,
                "set_aside": pruned.set_aside,
                "receipts": pruned.receipts,
                "write_counts": pruned.write_counts,
                "bytes": pruned.bytes,
                "done": pruned.done,
                "steps": steps,
            }
        )
        return EXIT_OK
    steps_text = f"{steps} step{'s' if steps != 1 else ''}"
    print("Dry run: would remove:" if args.dry_run else f"Removed, in {steps_text}:")
    print_table(
        [
            ("decisions", f"{pruned.decisions:,}"),
            ("set-aside entries", f"{pruned.set_aside:,}"),
            ("receipts", f"{pruned.receipts:,}"),
            ("idle sessions' write counts", f"{pruned.write_counts:,}"),
            ("bytes", _size(pruned.bytes)),
        ]
    )
    print("kept: " + ", ".join(f"{k.replace('_', ' ')} {_span(s)}" for k, s in kept.items()))
    if not pruned.done:
        print(f"stopped after {steps} steps with more due: run it again")
    return EXIT_OK


def _retention_of(args: argparse.Namespace) -> Retention:
    default = Retention()
    spans: dict[str, Any] = {}
    for kind in KINDS:
        given = getattr(args, f"keep_{kind}")
        if given is None:
            given = args.keep if args.keep is not None else getattr(default, kind)
        spans[kind] = None if given == FOREVER else given
    return Retention(**spans)


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "for good"
    if seconds and seconds % 86_400 == 0:
        return f"{int(seconds // 86_400)}d"
    return f"{seconds:g}s"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count:,} B"
    size = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:,.1f} {unit} ({count:,} B)"
