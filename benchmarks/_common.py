"""What the benchmarks share: the items they write, timing statistics, tables, the machine.

The scripts in this directory run as files (``python benchmarks/<name>.py``), so they import
this module as ``_common``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agents import SQLiteSession

from agents_reconcile import ReconcileConfig, ReconcilingSession

# The p50 ratio to the bare session that the wrapper (it records each intent before its
# append: write-ahead) aims to stay within.
WRITE_AHEAD_P50_AIM = 1.25

ITEM_BYTES = 300
FILLER = (
    "The order shipped from the Rotterdam warehouse on Tuesday and is expected to arrive "
    "within three to five business days; tracking updates appear once the carrier scans it. "
)


# -- items -----------------------------------------------------------------------------------


def filler(length: int) -> str:
    """ASCII text of exactly ``length`` characters (nothing JSON would escape)."""
    repeats = length // len(FILLER) + 1
    return (FILLER * repeats)[: max(length, 0)]


def fitted(make: Callable[[str], dict[str, Any]], size: int) -> dict[str, Any]:
    """The item ``make(padding)`` whose JSON form is ``size`` bytes (or the smallest possible)."""
    empty = make("")
    return make(filler(size - len(json.dumps(empty))))


def user_message(turn: int, size: int = ITEM_BYTES) -> dict[str, Any]:
    return fitted(
        lambda pad: {"role": "user", "content": f"Turn {turn}: where is my order? {pad}"}, size
    )


def function_call(turn: int, size: int = ITEM_BYTES) -> dict[str, Any]:
    def make(pad: str) -> dict[str, Any]:
        arguments = {"order_id": f"ord_{turn:09d}", "include": ["tracking"], "note": pad}
        return {
            "type": "function_call",
            "id": f"fc_{turn:024d}",
            "call_id": f"call_{turn:020d}",
            "name": "lookup_order",
            "arguments": json.dumps(arguments),
            "status": "completed",
        }

    return fitted(make, size)


def function_call_output(turn: int, size: int = ITEM_BYTES) -> dict[str, Any]:
    def make(pad: str) -> dict[str, Any]:
        output = {"order_id": f"ord_{turn:09d}", "status": "in_transit", "detail": pad}
        return {
            "type": "function_call_output",
            "call_id": f"call_{turn:020d}",
            "output": json.dumps(output),
        }

    return fitted(make, size)


def turn_items(turn: int) -> list[dict[str, Any]]:
    """One tool-using turn as the runner saves it: three items of about 300 bytes each."""
    return [user_message(turn), function_call(turn), function_call_output(turn)]


def history_items(start: int, stop: int) -> list[dict[str, Any]]:
    """Stored history: distinct user / function_call / function_call_output items (~300 B)."""
    text = filler(240)
    items: list[dict[str, Any]] = []
    for index in range(start, stop):
        call_id = f"call_{index - index % 3:020d}"
        kind = index % 3
        if kind == 0:
            items.append({"role": "user", "content": f"History {index}: {text}"})
        elif kind == 1:
            arguments = json.dumps({"order_id": f"ord_{index:09d}", "note": text[:180]})
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "lookup_order",
                    "arguments": arguments,
                }
            )
        else:
            items.append(
                {"type": "function_call_output", "call_id": call_id, "output": f"{index} {text}"}
            )
    return items


# -- statistics and printing ---------------------------------------------------------------


def percentile(values: Sequence[float], percent: int) -> float:
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def microseconds(nanoseconds: float) -> float:
    return nanoseconds / 1000.0


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    print(title)
    print("  " + "  ".join(f"{cell:>{width}}" for cell, width in zip(header, widths, strict=True)))
    print("  " + "  ".join("-" * width for width in widths))
    for row in rows:
        print("  " + "  ".join(f"{cell:>{width}}" for cell, width in zip(row, widths, strict=True)))
    print()


def verdict(met: bool) -> str:
    return "MET" if met else "MISSED"


# -- machine ---------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def print_machine(
    title: str, workdir: Path, mode: str, extra: Sequence[tuple[str, str]] = ()
) -> None:
    """The header every benchmark prints: what ran, where, on which versions."""
    lines = [
        ("mode", mode),
        ("platform", platform.platform()),
        ("cpu", f"{cpu_model()} ({os.cpu_count()} logical CPUs)"),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("openai-agents", package_version("openai-agents")),
        ("package", f"agents-reconcile {package_version('agents-reconcile')}"),
        ("sqlite", sqlite3.sqlite_version),
        *extra,
        ("temp dir", str(workdir)),
    ]
    if hasattr(os, "getloadavg"):
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        lines.append(
            ("load average", f"{load} (1, 5, 15 min; other work on the machine adds noise)")
        )
    print(title)
    for label, value in lines:
        print(f"  {label:<15}{value}")
    print()


# -- sessions and append timing --------------------------------------------------------------


def wrapped_session(
    workdir: Path,
    name: str,
    inner: Any | None = None,
    payload_key: bytes | None = None,
) -> ReconcilingSession:
    """``ReconcilingSession`` around ``inner`` (default: a file ``SQLiteSession``), with its own
    journal file in ``workdir`` (batches sealed when ``payload_key`` is given)."""
    inner = inner if inner is not None else SQLiteSession(name, workdir / f"{name}.sessions.db")
    config = ReconcileConfig(journal=workdir / f"{name}.journal.db", payload_key=payload_key)
    session = ReconcilingSession(inner, config=config)
    if not session.enabled:
        sys.exit("AGENTS_RECONCILE switches reconciliation off; unset it to benchmark the wrapper")
    return session


@dataclass
class AppendVariant:
    name: str
    session: Any
    samples: list[int]


async def time_appends(variants: Sequence[AppendVariant], rounds: int, warmup_rounds: int) -> None:
    """Time one 3-item ``add_items`` per variant per round, interleaved; fills ``samples``."""
    for variant in variants:
        # The runner reads the history before its first save; the wrapper caches the tail there.
        await variant.session.get_items()

    for round_index in range(warmup_rounds + rounds):
        batch = turn_items(round_index)
        # Rotate who goes first, so no variant always follows the same neighbour.
        for offset in range(len(variants)):
            variant = variants[(round_index + offset) % len(variants)]
            items = [dict(item) for item in batch]
            started = time.perf_counter_ns()
            await variant.session.add_items(items)
            elapsed = time.perf_counter_ns() - started
            if round_index >= warmup_rounds:
                variant.samples.append(elapsed)
            finish = getattr(variant.session, "pending", None)
            if finish is not None:
                # A wrapper clears its acknowledged intent after add_items returned (a
                # benchmark's stand-in for one, its previous intent): that work finishes here,
                # outside every timed window, so that no other variant is charged for it
                # (pending() waits for it).
                await finish()


def latency_cells(samples: Sequence[int], bare: Sequence[int]) -> list[str]:
    """p50 us, p95 us, p50 delta us, ratio p50, ratio p95 of ``samples`` against ``bare``."""
    p50, p95 = statistics.median(samples), percentile(samples, 95)
    bare_p50, bare_p95 = statistics.median(bare), percentile(bare, 95)
    return [
        f"{microseconds(p50):.1f}",
        f"{microseconds(p95):.1f}",
        f"{microseconds(p50 - bare_p50):+.1f}",
        f"{p50 / bare_p50:.3f}",
        f"{p95 / bare_p95:.3f}",
    ]


class _HasRounds(Protocol):
    rounds: int


_Settings = TypeVar("_Settings", bound=_HasRounds)


def rounds_settings(
    doc: str | None, argv: Sequence[str] | None, full: _Settings, quick: _Settings
) -> tuple[_Settings, str]:
    """Parse ``--rounds`` and ``--quick``; return the chosen settings and the mode's name."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0] if doc else None)
    parser.add_argument(
        "--rounds",
        type=int,
        help=f"measured append rounds per variant (default {full.rounds}; quick {quick.rounds})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small numbers for a smoke run (under 10 s)"
    )
    args = parser.parse_args(argv)
    settings = quick if args.quick else full
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        settings = dataclasses.replace(settings, rounds=args.rounds)  # type: ignore[type-var]
    return settings, "quick" if args.quick else "full"
