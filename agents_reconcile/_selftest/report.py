"""The self-test's tables: the outcome of every cell, and the broken promises counted."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from .._core.crashpoints import CrashPoint
from .matrix import Verdict
from .scenario import RecoveryPath

__all__ = [
    "Totals",
    "markdown_table",
    "outcome_table",
    "per_store",
    "per_store_table",
    "totals",
    "totals_table",
]

_POINT_ORDER: Final = {point: index for index, point in enumerate(CrashPoint)}
_BOUNDARY_ORDER: Final = {
    name: index
    for index, name in enumerate(("input", "tool_call", "tool_turn", "tool_output", "final"))
}


@dataclass
class Totals:
    scenarios: int = 0
    killed: int = 0
    duplicates: int = 0
    losses: int = 0
    unpaired: int = 0
    continued_on_ambiguity: int = 0
    false_denials: int = 0
    reexecuted: int = 0
    unrecorded_reruns: int = 0
    effects_run_twice: int = 0
    broken: int = 0
    """Cells where any promise was broken (the counts above, or a run that failed)."""

    def add(self, verdict: Verdict) -> None:
        self.scenarios += 1
        self.killed += verdict.killed
        for name in _COUNTED:
            setattr(self, name, getattr(self, name) + getattr(verdict, name))
        self.broken += not verdict.holds


_COUNTED: Final = (
    "duplicates",
    "losses",
    "unpaired",
    "continued_on_ambiguity",
    "false_denials",
    "reexecuted",
    "unrecorded_reruns",
    "effects_run_twice",
)
"""The counts a verdict and the totals share, summed as they are."""


_HEADINGS: Final = {
    "scenarios": "scenarios",
    "killed": "killed",
    "duplicates": "duplicates",
    "losses": "losses",
    "unpaired": "unpaired",
    "continued_on_ambiguity": "continued on doubt",
    "false_denials": "false denials",
    "reexecuted": "tools re-run",
    "unrecorded_reruns": "re-run, unrecorded",
    "effects_run_twice": "effects run twice",
    "broken": "broken cells",
}


class _Adds(Protocol):
    def add(self, verdict: Any) -> None: ...


_T = TypeVar("_T", bound=_Adds)


def per_store(verdicts: Iterable[Any], make: Callable[[], _T]) -> dict[str, _T]:
    """Totals (``make()``, each verdict added) per store, and over all of them under
    ``"all"``."""
    result: dict[str, _T] = defaultdict(make)
    for verdict in verdicts:
        result[verdict.cell.store].add(verdict)
        result["all"].add(verdict)
    return dict(result)


def totals(verdicts: Sequence[Verdict]) -> dict[str, Totals]:
    """Totals per store, and over all of them under ``"all"``."""
    return per_store(verdicts, Totals)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *map(line, rows)])


def per_store_table(by_store: Mapping[str, Any], headings: Mapping[str, str]) -> str:
    """A row per store (``all`` last, in bold), a column per heading (a field of the totals)."""
    names = list(headings)
    rows = [
        [store, *(str(getattr(counted, name)) for name in names)]
        for store, counted in by_store.items()
        if store != "all"
    ]
    if "all" in by_store:
        rows.append(["**all**", *(str(getattr(by_store["all"], name)) for name in names)])
    return markdown_table(["store", *headings.values()], rows)


def totals_table(verdicts: Sequence[Verdict]) -> str:
    return per_store_table(totals(verdicts), _HEADINGS)


def _describe(group: Sequence[Verdict]) -> str:
    outcomes = Counter(verdict.outcome for verdict in group)
    if len(outcomes) == 1:
        [(outcome, count)] = outcomes.items()
        text = f"{outcome} ({count})" if count > 1 else outcome
    else:
        text = ", ".join(f"{outcome} {count}" for outcome, count in outcomes.most_common())
    if not all(verdict.holds for verdict in group):
        text += " BROKEN"
    return text


def _row_order(row: tuple[CrashPoint, str]) -> tuple[int, int, str]:
    point, boundary = row
    return _POINT_ORDER[point], _BOUNDARY_ORDER.get(boundary, len(_BOUNDARY_ORDER)), boundary


def outcome_table(verdicts: Sequence[Verdict], *, foreign: bool) -> str:
    """Rows: crash point @ the append it stopped; columns: how the recovery went on; cells:
    the recovery's outcome over the stores (with how many stores, when several)."""
    groups: dict[tuple[CrashPoint, str], dict[RecoveryPath, list[Verdict]]] = defaultdict(
        lambda: defaultdict(list)
    )
    paths: list[RecoveryPath] = []
    for verdict in verdicts:
        cell = verdict.cell
        if cell.foreign is not foreign:
            continue
        groups[(cell.point, cell.boundary)][cell.path].append(verdict)
        if cell.path not in paths:
            paths.append(cell.path)
    paths.sort(key=list(RecoveryPath).index)
    rows = []
    for point, boundary in sorted(groups, key=_row_order):
        by_path = groups[(point, boundary)]
        rows.append(
            [
                f"{point.value} @ {boundary}",
                *(_describe(by_path[path]) if path in by_path else "-" for path in paths),
            ]
        )
    return markdown_table(["crash point @ append", *(path.value for path in paths)], rows)
