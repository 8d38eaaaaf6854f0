"""The growth table of ``journal_growth.py``: per engine, the p50 and p99 of each operation at
every size beside the empty journal's, and the verdicts against the aims."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Final

from _common import percentile, print_table, verdict

from agents_reconcile._backends.components import COUNT_LIMIT

OPERATIONS: Final = (
    ("append", "us"),
    ("gate", "us"),
    ("reconcile", "ms"),
    ("status", "ms"),
    ("show", "ms"),
)
"""What is timed, and the unit it is printed in."""
FLAT_AIM: Final = 1.20
"""Each operation's p50 and p99 at any size over the empty journal's."""
STATUS_AIM_S: Final = 1.0
"""``status`` end to end at the largest size."""
EMPTY_STATUS_AIM_S: Final = 0.3
"""``status`` end to end on an empty journal."""
PENDING_SHARE: Final = 0.01
"""The share of the other sessions that hold an abandoned intent (``_growth_fills``)."""


def at(values: Sequence[float], percent: int) -> float:
    if percent == 50:
        return float(statistics.median(values))
    return percentile(values, percent)


def _shown(nanoseconds: float, unit: str) -> str:
    if unit == "us":
        return f"{nanoseconds / 1e3:,.0f}"
    return f"{nanoseconds / 1e6:,.2f}"


def report(engine: Any, sized: Sequence[Any]) -> list[str]:
    """Print the engine's growth table; return its summary lines."""
    empty, largest = sized[0], sized[-1]
    rows = []
    for name, unit in OPERATIONS:
        for percent in (50, 99):
            base = at(getattr(empty, name), percent)
            row = [f"{name} p{percent} ({unit})"]
            for one in sized:
                mine = at(getattr(one, name), percent)
                ratio = "" if one is empty else f"  {mine / base:.2f}x"
                row.append(_shown(mine, unit) + ratio)
            rows.append(row)
    rows.append(
        ["status end to end p50 (s)"]
        + [f"{at(one.command, 50):.2f}" if one.command else "-" for one in sized]
    )
    rows.append(["journal (MiB)"] + [f"{one.footprint / 2**20:,.1f}" for one in sized])
    counts = ", ".join(
        f"{len(getattr(empty, name))} {name}" for name, _ in OPERATIONS if getattr(empty, name)
    )
    print_table(
        f"{engine.title}: p50 and p99 at each size of other sessions (ratio to the empty "
        f"journal's); {counts} per size, {len(empty.command)} status commands on the smallest "
        "and the largest",
        ["", *(f"{one.size:,}" for one in sized)],
        rows,
    )
    lines = []
    for name, _ in OPERATIONS:
        ratios = [at(getattr(largest, name), p) / at(getattr(empty, name), p) for p in (50, 99)]
        met = all(ratio <= FLAT_AIM for ratio in ratios)
        lines.append(
            f"  {verdict(met)}: {engine.name} {name} at {largest.size:,} other sessions: p50 "
            f"{ratios[0]:.2f}x, p99 {ratios[1]:.2f}x the empty journal's (aim: within "
            f"{FLAT_AIM}x)"
        )
    full = next((one for one in sized if one.size * PENDING_SHARE >= COUNT_LIMIT), None)
    if full is not None and full is not largest:
        # Against the empty journal status cannot be flat: its page is empty. From the first
        # journal whose page and count of what follows are full, it reads no more.
        ratios = [at(largest.status, p) / at(full.status, p) for p in (50, 99)]
        lines.append(
            f"  {verdict(all(ratio <= FLAT_AIM for ratio in ratios))}: {engine.name} status at "
            f"{largest.size:,} other sessions: p50 {ratios[0]:.2f}x, p99 {ratios[1]:.2f}x the "
            f"{full.size:,} journal's, the first whose count of what follows a page reaches "
            f"its bound ({COUNT_LIMIT:,}) (aim: within {FLAT_AIM}x)"
        )
    big, small = at(largest.command, 50), at(empty.command, 50)
    lines.append(
        f"  {verdict(big < STATUS_AIM_S)}: {engine.name} status end to end at "
        f"{largest.size:,} other sessions takes {big:.2f} s (aim: under {STATUS_AIM_S:.0f} s; "
        f"the view itself {at(largest.status, 50) / 1e6:.1f} ms)"
    )
    lines.append(
        f"  {verdict(small < EMPTY_STATUS_AIM_S)}: {engine.name} status end to end on an empty "
        f"journal takes {small:.2f} s (aim: under {EMPTY_STATUS_AIM_S} s)"
    )
    return lines
