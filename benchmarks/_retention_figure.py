"""The retention figure of ``journal_growth.py``: a journal's rows and bytes after a year of
sessions, with and without the default retention.

A journal is filled with N sessions of 10 turns each, spread evenly over the past 365 days
(``_growth_fills.retention_sessions``), its rows counted by kind and its bytes measured; then
``prune(Retention(), limit=10_000)`` is called until it answers done, timed, and both are
measured again. Checked, loudly: the journal holds what was filled; every abandoned intent is
still pending afterwards; and of each kind, the rows removed are the ones older than the
retention by the times the fill gave them (at least those due when the prune began, at most
those due when it ended), as many as ``prune`` said it removed.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

from _common import print_table
from _growth_engines import KINDS, Engine
from _growth_fills import GONE, TURNS, YEAR, Left, check_sample, retention_sessions

from agents_reconcile import Retention
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.retention import Pruned

LABEL: Final = "retention"
LIMIT: Final = 10_000
"""Rows of each kind one ``prune`` call examines at most."""
KEPT: Final = Retention()
"""The default retention: 30 days each."""
REDIS_BYTES_PER_SESSION: Final = 2_500
"""About the server memory the retention fill takes per session (its count's hash, its
receipt's five hashes and list under its tag, its index entry, the decisions), on Redis 7."""
_PRUNED_AS: Final = {
    "write counts": "write_counts",
    "decisions": "decisions",
    "receipts": "receipts",
}
"""The kinds ``prune`` removes, and the ``Pruned`` field counting each."""


class Times:
    """The times the fill gave each row that may be pruned (sorted once the fill is over), and
    the abandoned intents."""

    def __init__(self) -> None:
        self.by_kind: dict[str, list[float]] = {kind: [] for kind in _PRUNED_AS}
        self.abandoned: set[str] = set()

    def noting(self, chunks: Iterable[list[Left]]) -> Iterator[list[Left]]:
        for chunk in chunks:
            for left in chunk:
                if left.intent is None:
                    self.by_kind["write counts"].append(left.counted_at)
                else:
                    # Its session's count is kept while the intent is unresolved.
                    self.abandoned.add(left.intent.intent_id)
                if left.decision is not None:
                    self.by_kind["decisions"].append(left.decision.decided_at)
                if left.receipt is not None and left.intent is None:
                    # A session's receipts are kept while it holds an unresolved intent
                    # (the resolution may need them), so only the others' are ever due.
                    assert left.receipt.finished_at is not None
                    self.by_kind["receipts"].append(left.receipt.finished_at)
            yield chunk
        for times in self.by_kind.values():
            times.sort()

    def due(self, kind: str, cutoff: float) -> int:
        """How many rows of ``kind`` are older than ``cutoff``."""
        return bisect.bisect_left(self.by_kind[kind], cutoff)


async def prune_all(journal: Any, rows: int) -> tuple[Pruned, int, float, bool]:
    """``prune(KEPT, limit=LIMIT)`` until it answers done (at most a few times the calls one
    pass over ``rows`` rows takes): what it removed, the calls, the seconds, whether done."""
    most = 4 * (rows // LIMIT) + 20
    total, calls = Pruned(), 0
    started = time.perf_counter()
    while calls < most:
        answer = await journal.retention.prune(KEPT, limit=LIMIT)
        total, calls = total + answer, calls + 1
        if answer.done:
            break
    return total, calls, time.perf_counter() - started, total.done


def _fail(message: str) -> None:
    raise RuntimeError(f"retention figure: {message}")


async def retention_engine(engine: Engine, sessions: int) -> list[str]:
    """Fill, measure, prune and measure again one engine's journal; print its figure and
    return its summary lines."""
    now = time.time()
    times = Times()
    started = time.perf_counter()
    try:
        await engine.fill(LABEL, times.noting(retention_sessions(sessions, now)))
        journal = await engine.journal(LABEL)
        sample = next(retention_sessions(min(sessions, 200), now))
        await check_sample(journal, sample)
        filled = time.perf_counter() - started
        print(f"  {engine.name}: {sessions:,} sessions filled and checked in {filled:.1f} s")
        before = await engine.rows(LABEL)
        wanted = {
            "write counts": sessions,
            "decisions": (sessions + 9) // 10,
            "receipts": sessions,
            "intents": len(times.abandoned),
        }
        if before != wanted:
            _fail(f"{engine.name} holds {before} after the fill, not {wanted}")
        stored_before = await engine.stored(LABEL)

        began = time.time()
        pruned, calls, took, done = await prune_all(journal, max(before.values()))
        ended = time.time()

        after = await engine.rows(LABEL)
        stored_after = await engine.stored(LABEL)
        await _check(engine, journal, times, before, after, pruned, (began, ended))
    finally:
        await engine.cleanup()

    rows = []
    for kind in KINDS:
        share = f"{after[kind] / before[kind]:.3f}" if before[kind] else "-"
        name = "intents (abandoned)" if kind == "intents" else kind
        rows.append([name, f"{before[kind]:,}", f"{after[kind]:,}", share])
    for measure, size in stored_before.items():
        rows.append(
            [
                f"bytes: {measure} (MiB)",
                f"{size / 2**20:,.1f}",
                f"{stored_after[measure] / 2**20:,.1f}",
                f"{stored_after[measure] / size:.3f}",
            ]
        )
    removed = pruned.decisions + pruned.receipts + pruned.write_counts + pruned.set_aside
    print_table(
        f"{engine.title}: {sessions:,} sessions x {TURNS} turns over 365 days, before and after "
        f"prune(Retention(), limit={LIMIT:,}) (30 days each; {30 * 86_400 / YEAR:.3f} of the "
        "year)",
        ["", "before", "after", "after / before"],
        rows,
    )
    print(f"  bytes: {engine.bytes_said}")
    ending = "" if done else f"; NOT done after {calls} calls"
    print(
        f"  prune: {calls} calls, {took:.1f} s, {removed:,} rows removed, "
        f"{removed / took:,.0f} rows/s; the records' own bytes removed, as prune counts them: "
        f"{pruned.bytes / 2**20:,.1f} MiB{ending}"
    )
    print()
    main = next(iter(stored_before))
    lines = [
        f"  checked: {engine.name} retention: {len(times.abandoned):,} abandoned intents all "
        "still pending after the prune; each row removed was past the retention by the time "
        "the fill gave it, and each row past it when the prune began was removed",
        f"  {engine.name} retention: {after['write counts'] / sessions:.3f} of the counts and "
        f"{after['receipts'] / sessions:.3f} of the receipts kept, bytes ({main}) "
        f"{stored_before[main] / 2**20:,.1f} -> {stored_after[main] / 2**20:,.1f} MiB "
        f"({stored_after[main] / stored_before[main]:.3f}); prune {took:.1f} s "
        f"({removed / took:,.0f} rows/s)",
    ]
    if not done:
        lines.append(
            f"  MISSED: {engine.name} prune did not answer done within {calls} calls of "
            f"limit {LIMIT:,}"
        )
    return lines


async def _check(
    engine: Engine,
    journal: Any,
    times: Times,
    before: dict[str, int],
    after: dict[str, int],
    pruned: Pruned,
    window: tuple[float, float],
) -> None:
    """Fail unless every abandoned intent is still pending, and the rows removed of each kind
    are those older than the retention, as many as ``prune`` said."""
    pending = await journal.pending(None)
    found = {entry.intent.intent_id for entry in pending}
    if found != times.abandoned:
        _fail(
            f"{engine.name}: {len(times.abandoned - found)} abandoned intents are no longer "
            f"pending after the prune ({len(found - times.abandoned)} others are)"
        )
    for entry in pending:
        if entry.state is not IntentState.IN_FLIGHT or entry.owner != GONE:
            _fail(f"{engine.name}: intent {entry.intent.intent_id} changed: {entry}")
    began, ended = window
    for kind, field_name in _PRUNED_AS.items():
        gone = before[kind] - after[kind]
        said = getattr(pruned, field_name)
        span = KEPT.seconds(kind if kind != "write counts" else "idle_sessions")
        assert span is not None
        least, most = times.due(kind, began - span), times.due(kind, ended - span)
        if gone != said or not least <= gone <= most:
            _fail(
                f"{engine.name}: {gone:,} {kind} removed ({said:,} said), where {least:,} to "
                f"{most:,} were due"
            )
    if after["intents"] != before["intents"]:
        _fail(f"{engine.name}: intents went from {before['intents']} to {after['intents']}")
