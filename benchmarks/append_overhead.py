"""What ``ReconcilingSession`` costs on the append path, and what reconciling costs.

Prints, in one run:

(a) p50/p95 latency of a 3-item ``add_items`` (a user message, a function_call and a
    function_call_output of about 300 bytes each) on a bare file ``SQLiteSession`` and on
    ``ReconcilingSession`` around an identical one (write-ahead, as every wrapper is), plain and
    sealed. The variants run interleaved, one append each per round, so that drift
    (page cache, CPU frequency, background load) hits them all alike.
(b) the per-item fingerprint (``item_digest``) next to the SDK's own pending-write
    fingerprint (sha256 over ``fingerprint_input_item``) for items of ~100 B, 1 KiB, 10 KiB.
(c) ``reconcile()`` time for one failed intent over 100, 10,000 and 100,000 stored items.

Usage::

    python benchmarks/append_overhead.py            # full run (about a minute at most)
    python benchmarks/append_overhead.py --quick    # smoke run, a few seconds
    python benchmarks/append_overhead.py --rounds 5000
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    AppendVariant,
    fitted,
    history_items,
    latency_cells,
    microseconds,
    percentile,
    print_machine,
    print_table,
    rounds_settings,
    time_appends,
    turn_items,
    verdict,
    wrapped_session,
)
from agents import SQLiteSession, set_tracing_disabled
from agents.run_internal.items import fingerprint_input_item

from agents_reconcile import Action, Outcome, ReconcilingSession
from agents_reconcile._core.fingerprint import canonical_bytes, item_digest
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

# Aims this benchmark checks (printed as MET / MISSED; the exit status does not depend on them).
# On the file SQLiteSession the aim is tighter than backend_overhead.py's WRITE_AHEAD_P50_AIM.
SQLITE_FILE_P50_AIM = 1.15  # as benchmarks/performance.py
FINGERPRINT_1KIB_AIM_RATIO = 0.25  # ours / the SDK's, per 1 KiB item: at least 4x cheaper
RECONCILE_FLAT_AIM = 1.5  # slowest / fastest median across history sizes


@dataclass(frozen=True)
class Settings:
    rounds: int
    warmup_rounds: int
    fingerprint_batches: int
    history_sizes: tuple[int, ...]
    reconcile_repetitions: int


FULL = Settings(
    rounds=2000,
    warmup_rounds=100,
    fingerprint_batches=101,
    history_sizes=(100, 10_000, 100_000),
    reconcile_repetitions=31,
)
QUICK = Settings(
    rounds=200,
    warmup_rounds=20,
    fingerprint_batches=11,
    history_sizes=(100, 10_000),
    reconcile_repetitions=5,
)


# -- (a) append latency ----------------------------------------------------------------------


async def bench_append(workdir: Path, settings: Settings) -> dict[str, float]:
    variants = [
        AppendVariant(
            "bare SQLiteSession", SQLiteSession("bare", workdir / "bare.sessions.db"), []
        ),
        AppendVariant("write_ahead", wrapped_session(workdir, "write_ahead"), []),
        AppendVariant(
            "write_ahead, sealed",
            wrapped_session(workdir, "sealed", payload_key=os.urandom(32)),
            [],
        ),
    ]
    await time_appends(variants, settings.rounds, settings.warmup_rounds)

    bare = variants[0].samples
    rows = []
    ratios: dict[str, float] = {}
    for variant in variants:
        ratios[variant.name] = statistics.median(variant.samples) / statistics.median(bare)
        rows.append([variant.name, *latency_cells(variant.samples, bare)])
    print_table(
        f"(a) 3-item add_items latency, file SQLiteSession, {settings.rounds} interleaved rounds "
        f"after {settings.warmup_rounds} warm-up rounds (item sizes: "
        f"{', '.join(str(len(json.dumps(item))) for item in turn_items(0))} B)",
        ["variant", "p50 us", "p95 us", "p50 delta us", "ratio p50", "ratio p95"],
        rows,
    )
    with closing(sqlite3.connect(workdir / "bare.sessions.db")) as probe:
        synchronous = probe.execute("PRAGMA synchronous").fetchone()[0]
    print(
        f"  note: SQLiteSession commits with PRAGMA synchronous={synchronous} (2 = FULL, an fsync\n"
        "  per commit), so the bare time and every ratio depend on the disk's fsync latency;\n"
        "  the p50 delta is the wrapper's own cost.\n"
    )

    for variant in variants:
        if isinstance(variant.session, ReconcilingSession):
            leftover = await variant.session.pending()
            if leftover:
                raise RuntimeError(f"{variant.name}: {len(leftover)} intents left pending")
            await variant.session.journal.close()
            variant.session.inner.close()
        else:
            variant.session.close()
    return ratios


# -- (b) fingerprint cost --------------------------------------------------------------------


def sdk_pending_write_digest(item: Any) -> str:
    """The digest ``resume_pending_session_write`` keeps per item (agents 0.24)."""
    serialized = fingerprint_input_item(item) or repr(item)
    return hashlib.sha256(serialized.encode("utf-8")).hexdigest()


def time_per_item(digest: Callable[[Any], str], item: Any, batch_size: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(batch_size):
        digest(item)
    return (time.perf_counter_ns() - started) / batch_size


def bench_fingerprint(settings: Settings) -> dict[int, tuple[float, float]]:
    batch_sizes = {100: 1000, 1024: 500, 10 * 1024: 100}  # item bytes -> items per timed batch
    items = {
        size: fitted(
            lambda pad: {"type": "function_call_output", "call_id": "call_7", "output": pad}, size
        )
        for size in batch_sizes
    }
    schemes: dict[str, Callable[[Any], str]] = {
        "ours": item_digest,
        "sdk": sdk_pending_write_digest,
    }
    samples: dict[tuple[int, str], list[float]] = {
        (size, scheme): [] for size in batch_sizes for scheme in schemes
    }
    for batch_index in range(settings.fingerprint_batches + 1):
        # Sizes and schemes interleaved, the scheme order alternating, so drift hits all alike.
        order = list(schemes.items()) if batch_index % 2 else list(schemes.items())[::-1]
        for size, batch_size in batch_sizes.items():
            for scheme, digest in order:
                per_item = time_per_item(digest, items[size], batch_size)
                if batch_index > 0:  # the first round only warms up
                    samples[size, scheme].append(per_item)

    results: dict[int, tuple[float, float]] = {}
    rows = []
    for size in batch_sizes:
        ours_us = microseconds(statistics.median(samples[size, "ours"]))
        theirs_us = microseconds(statistics.median(samples[size, "sdk"]))
        results[size] = (ours_us, theirs_us)
        rows.append(
            [
                f"{size} B",
                str(len(canonical_bytes(items[size]))),
                f"{ours_us:.2f}",
                f"{theirs_us:.2f}",
                f"{ours_us / theirs_us:.2f}",
            ]
        )
    print_table(
        f"(b) fingerprint per item, median of {settings.fingerprint_batches} timed batches per "
        "cell (ours: item_digest = blake3 over orjson with sorted keys; SDK: sha256 over "
        "fingerprint_input_item, as resume_pending_session_write)",
        ["item", "canonical B", "ours us", "SDK us", "ours/SDK"],
        rows,
    )
    return results


# -- (c) reconcile time ----------------------------------------------------------------------


async def build_history(store: SQLiteSession, size: int, chunk: int = 10_000) -> None:
    for start in range(0, size, chunk):
        await store.add_items(history_items(start, min(start + chunk, size)))


async def time_reconcile(
    session: ReconcilingSession, faulty: FaultInjectingSession, fault: Fault, turn: int
) -> int:
    """Leave one failed intent behind, then time the ``reconcile()`` that settles it."""
    faulty.plan(fault)
    try:
        await session.add_items(turn_items(turn))
    except BackendFailure:
        pass
    else:
        raise RuntimeError(f"the injected {fault.name} did not fire")
    started = time.perf_counter_ns()
    decisions = await session.reconcile()
    elapsed = time.perf_counter_ns() - started
    expected = (
        (Outcome.COMMITTED, Action.SETTLED)
        if fault is Fault.LOST_ACK
        else (Outcome.UNCHANGED, Action.REPLAYED)
    )
    found = [(decision.outcome, decision.action) for decision in decisions]
    if found != [expected]:
        raise RuntimeError(f"{fault.name}: expected one {expected}, got {found}")
    return elapsed


@dataclass
class History:
    size: int
    store: SQLiteSession
    faulty: FaultInjectingSession
    session: ReconcilingSession
    build_seconds: float
    next_turn: int


async def bench_reconcile(workdir: Path, settings: Settings) -> dict[str, list[float]]:
    faults = {"lost ack (committed)": Fault.LOST_ACK, "rejected (replayed)": Fault.REJECT}
    histories: list[History] = []
    for size in settings.history_sizes:
        name = f"history_{size}"
        store = SQLiteSession(name, workdir / f"{name}.sessions.db")
        build_started = time.perf_counter()
        await build_history(store, size)
        build_seconds = time.perf_counter() - build_started
        faulty = FaultInjectingSession(store)
        session = wrapped_session(workdir, name, inner=faulty)
        histories.append(History(size, store, faulty, session, build_seconds, size))

    samples: dict[tuple[int, str], list[int]] = {
        (history.size, fault_name): [] for history in histories for fault_name in faults
    }
    warmup = 2
    for repetition in range(warmup + settings.reconcile_repetitions):
        # History sizes in rotating order, so drift hits them alike.
        for offset in range(len(histories)):
            history = histories[(repetition + offset) % len(histories)]
            for fault_name, fault in faults.items():
                history.next_turn += 1
                elapsed = await time_reconcile(
                    history.session, history.faulty, fault, history.next_turn
                )
                if repetition >= warmup:
                    samples[history.size, fault_name].append(elapsed)

    medians: dict[str, list[float]] = {name: [] for name in faults}
    rows = []
    for history in histories:
        row = [f"{history.size:,}", f"{history.build_seconds:.2f}"]
        for fault_name in faults:
            timings = samples[history.size, fault_name]
            median_us = microseconds(statistics.median(timings))
            medians[fault_name].append(median_us)
            row += [f"{median_us:.1f}", f"{microseconds(percentile(timings, 95)):.1f}"]
        rows.append(row)
        stored = len(await history.store.get_items())
        if stored < history.size:
            raise RuntimeError(f"history of {history.size} holds only {stored} items")
        await history.session.journal.close()
        history.store.close()
    header = ["history items", "build s"]
    for fault_name in faults:
        header += [f"{fault_name} p50 us", "p95 us"]
    print_table(
        "(c) reconcile() of one failed 3-item intent (write_ahead, SQLite journal), median of "
        f"{settings.reconcile_repetitions} repetitions interleaved across history sizes, "
        "a new failed intent each time",
        header,
        rows,
    )
    return medians


# -- main ------------------------------------------------------------------------------------


async def run(settings: Settings, mode: str) -> None:
    with tempfile.TemporaryDirectory(prefix="agents-reconcile-bench-") as directory:
        workdir = Path(directory)
        print_machine("agents-reconcile append overhead benchmark", workdir, mode)
        run_started = time.perf_counter()

        ratios = await bench_append(workdir, settings)
        fingerprints = bench_fingerprint(settings)
        reconcile_medians = await bench_reconcile(workdir, settings)

        print("summary")
        write_ahead = ratios["write_ahead"]
        print(
            f"  {verdict(write_ahead <= SQLITE_FILE_P50_AIM)}: write_ahead p50 is "
            f"{write_ahead:.3f}x bare (aim: within {SQLITE_FILE_P50_AIM}x); sealed write_ahead "
            f"{ratios['write_ahead, sealed']:.3f}x"
        )
        ours_1kib, sdk_1kib = fingerprints[1024]
        print(
            f"  {verdict(ours_1kib / sdk_1kib <= FINGERPRINT_1KIB_AIM_RATIO)}: fingerprint of a "
            f"1 KiB item takes {ours_1kib:.2f} us, {sdk_1kib / ours_1kib:.1f}x cheaper than the "
            f"SDK's (aim: at least {1 / FINGERPRINT_1KIB_AIM_RATIO:.0f}x)"
        )
        cheaper = all(ours < theirs for ours, theirs in fingerprints.values())
        comparison = ", ".join(
            f"{size} B {ours / theirs:.2f}x" for size, (ours, theirs) in fingerprints.items()
        )
        print(
            f"  {verdict(cheaper)}: our fingerprint is cheaper per item than the SDK's "
            f"(ours/SDK: {comparison})"
        )
        spreads = {name: max(values) / min(values) for name, values in reconcile_medians.items()}
        flat = all(spread <= RECONCILE_FLAT_AIM for spread in spreads.values())
        spread_text = ", ".join(f"{name} {spread:.2f}x" for name, spread in spreads.items())
        sizes = ", ".join(f"{size:,}" for size in settings.history_sizes)
        print(
            f"  {verdict(flat)}: reconcile time is flat across {sizes} items of history "
            f"(slowest/fastest median: {spread_text}; aim: within {RECONCILE_FLAT_AIM}x)"
        )
        print(f"\ntotal time {time.perf_counter() - run_started:.1f} s")


def main(argv: Sequence[str] | None = None) -> None:
    settings, mode = rounds_settings(__doc__, argv, FULL, QUICK)
    set_tracing_disabled(True)
    asyncio.run(run(settings, mode))


if __name__ == "__main__":
    main()
