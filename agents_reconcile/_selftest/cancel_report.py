"""The cancellation matrix's tables: the outcome of every cell, and the broken promises counted."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .cancel_judge import PROMISES, CancelVerdict
from .cancel_modes import Mode
from .cancellation import POINTS
from .report import markdown_table, per_store, per_store_table

__all__ = ["CancelTotals", "broken_lines", "cancel_outcome_table", "cancel_totals_table"]

_HEADINGS: Final = {
    "scenarios": "scenarios",
    "not_reached": "not reached",
    "bare_duplicates": "bare: duplicates",
    "bare_extra_charges": "bare: extra charges",
    "duplicates": "duplicates",
    "losses": "losses",
    "unpaired": "unpaired",
    "continued_on_ambiguity": "continued on doubt",
    "false_denials": "false denials",
    "effects_run_twice": "effects run twice",
    "worse_than_bare": "worse than bare",
    "left_for_nobody": "left for nobody",
    "broken": "broken cells",
}


@dataclass
class CancelTotals:
    scenarios: int = 0
    not_reached: int = 0
    bare_duplicates: int = 0
    bare_extra_charges: int = 0
    """What the bare twins did (not promises: the measure the wrapped side must not fall
    below)."""
    duplicates: int = 0
    losses: int = 0
    unpaired: int = 0
    continued_on_ambiguity: int = 0
    false_denials: int = 0
    effects_run_twice: int = 0
    worse_than_bare: int = 0
    left_for_nobody: int = 0
    broken: int = 0

    def add(self, verdict: CancelVerdict) -> None:
        self.scenarios += 1
        self.not_reached += verdict.not_reached
        self.bare_duplicates += verdict.bare_duplicates
        self.bare_extra_charges += verdict.bare_extra_charges
        for name in PROMISES:
            setattr(self, name, getattr(self, name) + getattr(verdict, name))
        self.broken += not verdict.holds


def totals(verdicts: Sequence[CancelVerdict]) -> dict[str, CancelTotals]:
    """Totals per store, and over all of them under ``"all"``."""
    return per_store(verdicts, CancelTotals)


def cancel_totals_table(verdicts: Sequence[CancelVerdict]) -> str:
    return per_store_table(totals(verdicts), _HEADINGS)


def _describe(group: Sequence[CancelVerdict]) -> str:
    """How the continuation went in a group of cells (its first request), with how many."""
    outcomes = Counter(verdict.continuation or verdict.outcome for verdict in group)
    text = ", ".join(
        f"{outcome} ({count})" if count > 1 else outcome
        for outcome, count in outcomes.most_common()
    )
    if not all(verdict.holds for verdict in group):
        text += " BROKEN"
    return text


def cancel_outcome_table(verdicts: Sequence[CancelVerdict]) -> str:
    """Rows: path, point @ the append it stopped; columns: the cancellation mode; cells: how
    the user's continuation went (and over how many stores)."""
    groups: dict[tuple[bool, int, int], dict[Mode, list[CancelVerdict]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for verdict in verdicts:
        cell = verdict.cell
        key = (cell.resumes, POINTS.index(cell.point), cell.at)
        groups[key][cell.mode].append(verdict)
    modes = [mode for mode in Mode if any(mode in by_mode for by_mode in groups.values())]
    rows = []
    for key in sorted(groups):
        resumes, point, _ = key
        by_mode = groups[key]
        boundary = next(iter(by_mode.values()))[0].cell.boundary
        label = f"{'resume' if resumes else 'fresh'}: {POINTS[point].value} @ {boundary}"
        rows.append([label, *(_describe(by_mode[m]) if m in by_mode else "-" for m in modes)])
    return markdown_table(["cancelled at", *(mode.value for mode in modes)], rows)


def broken_lines(verdicts: Sequence[CancelVerdict], *, limit: int = 20) -> list[str]:
    """One ``BROKEN`` line per cell that broke a promise (the first ``limit``)."""
    return [
        f"BROKEN {v.cell.store} {v.cell.mode.value} {v.cell.row}: {v.outcome}; "
        + "; ".join(v.problems)
        for v in verdicts
        if not v.holds
    ][:limit]
