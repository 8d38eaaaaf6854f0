"""The cancellation matrix: which cells exist, how one runs, and how it is judged.

A cell is (store, cancellation mode, path, point, the append it stops). Its request is not
killed but cancelled, the ``mode`` way (``cancel_modes.py``), at the crash point, in this
process, in a directory of its own (its own journal, its own store namespace and session id).
The user then continues: resumes the checkpoint saved before (resume path) and sends the next
input (``cancel_sides.py``). A recovery point needs a failed append first (``RECONCILE_FAULTS``):
the request before fails at the cell's append, and the cancelled one stops inside its
reconciliation. ``sqlite_late`` is SQLite under a store whose write lands after its caller was
cancelled (``LateLanding``).

Each cell also runs its bare twin: the same script on the unwrapped store, with a plain
function tool, cancelled at the corresponding moment (``bare_point``). The judge
(``cancel_judge.py``) counts the crash matrix's broken promises on the wrapped side, the counts
where it did worse than the bare twin, and what it left held by this live process for nobody.
Every count must be 0.

Cells take their mode in turn over the stores (row ``r`` of store ``s`` gets mode
``(r + s) mod 5``), so that every store meets every mode and, with five stores or more, every
row meets every mode; the stores named in ``crossed`` get every mode at every row.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import uuid
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agents import set_tracing_disabled

from .._core.crashpoints import CrashPoint
from ..testing import Fault
from .cancel_judge import CancelVerdict, judge
from .cancel_modes import LateLanding, Mode
from .cancel_sides import Script, play
from .matrix import EFFECT_POINTS, RECONCILE_FAULTS
from .stores import STORES, close_store, store_named

__all__ = [
    "BOUNDARIES",
    "LATE_STORE",
    "POINTS",
    "WRITE_POINTS",
    "Cell",
    "bare_point",
    "cancel_stores",
    "cells",
    "run_cell",
    "run_cells",
]

LATE_STORE: Final = "sqlite_late"
"""SQLite under ``LateLanding``: every write commits ~50 ms after its caller, cancelled or not."""
WRITE_POINTS: Final = (
    CrashPoint.BEFORE_INTENT_RECORDED,
    CrashPoint.AFTER_INTENT_RECORDED,
    CrashPoint.INSIDE_APPEND_BEFORE_COMMIT,
    CrashPoint.AFTER_COMMIT_BEFORE_ACK,
    CrashPoint.BEFORE_INTENT_CLEARED,
)
"""The await points of an append: the cell cancels one append there."""
REPLAY_POINTS: Final = (CrashPoint.BEFORE_REPLAY, CrashPoint.AFTER_REPLAY, CrashPoint.BEFORE_SETTLE)
"""The points of the gate's reconciliation (after the failure ``RECONCILE_FAULTS`` names)."""
POINTS: Final = (*WRITE_POINTS, *REPLAY_POINTS, *EFFECT_POINTS)
BOUNDARIES: Final = {False: ("input", "tool_turn", "final"), True: ("tool_output", "final")}
"""The appends of the cancelled request: a fresh run's, a resumed checkpoint's."""
_BEFORE_WRITE: Final = {
    CrashPoint.BEFORE_INTENT_RECORDED,
    CrashPoint.AFTER_INTENT_RECORDED,
    CrashPoint.INSIDE_APPEND_BEFORE_COMMIT,
}


@dataclass(frozen=True)
class Cell:
    store: str
    mode: Mode
    resumes: bool
    point: CrashPoint
    boundary: str
    at: int
    """The append the point stops (or the failure before a reconciliation point hits): the
    ``at``-th of the request; an effect point stops the first call of the tool."""
    keyed: bool = False
    """(Effect points) the tool has its own key, the order's (``effect_tool(key=...)``)."""

    @property
    def fault(self) -> Fault | None:
        return RECONCILE_FAULTS.get(self.point)

    @property
    def path(self) -> str:
        return "resume" if self.resumes else "fresh"

    @property
    def row(self) -> str:
        keyed = " (own key)" if self.keyed else ""
        return f"{self.path}: {self.point.value} @ {self.boundary}{keyed}"

    def script(self) -> Script:
        if self.fault is not None:
            # The request before fails at the cell's append; this one stops in its settling.
            return Script(
                resumes=self.resumes,
                mode=self.mode,
                point=self.point,
                at=1,
                fault=self.fault,
                fault_at=self.at,
                keyed=self.keyed,
            )
        return Script(
            resumes=self.resumes, mode=self.mode, point=self.point, at=self.at, keyed=self.keyed
        )

    def bare_script(self) -> Script:
        point, at = bare_point(self)
        return replace(self.script(), point=point, at=at)


def bare_point(cell: Cell) -> tuple[CrashPoint, int]:
    """Where the bare twin is cancelled: the same moment as far as a bare session has one.
    An append's points before its write map to the start of the store's write, those after it
    to its end; a reconciliation (the bare twin has none) to the start of the request's first
    write (a resumed checkpoint: its tool's body, which runs first); an effect's points to the
    plain tool's body before it charges or after."""
    point = cell.point
    if point in _BEFORE_WRITE:
        return CrashPoint.INSIDE_APPEND_BEFORE_COMMIT, cell.at
    if point in WRITE_POINTS:
        return CrashPoint.AFTER_COMMIT_BEFORE_ACK, cell.at
    if point in REPLAY_POINTS:
        if cell.resumes:
            return CrashPoint.BEFORE_EFFECT, 1
        return CrashPoint.INSIDE_APPEND_BEFORE_COMMIT, 1
    if point in (CrashPoint.BEFORE_EFFECT_INTENT, CrashPoint.BEFORE_EFFECT):
        return CrashPoint.BEFORE_EFFECT, 1
    return CrashPoint.BEFORE_RECEIPT, 1


def cancel_stores(names: Iterable[str] = ()) -> list[str]:
    """The stores to run (the given ones, or every available one and ``LATE_STORE``)."""
    chosen = list(names) or [*(store.name for store in STORES), LATE_STORE]
    for name in chosen:
        if name != LATE_STORE:
            store_named(name)  # an unknown name is refused here, with the known ones
    return [name for name in chosen if name == LATE_STORE or store_named(name).available()]


def rows(resumes: bool) -> list[tuple[CrashPoint, str, int]]:
    """Every (point, append, at) of a path."""
    named = BOUNDARIES[resumes]
    result = [
        (point, boundary, at)
        for at, boundary in enumerate(named, start=1)
        for point in (*WRITE_POINTS, *REPLAY_POINTS)
    ]
    tool = next(name for name in named if name.startswith("tool_"))
    return result + [(point, tool, 1) for point in EFFECT_POINTS]


def cells(
    stores: Sequence[str],
    *,
    modes: Sequence[Mode] = tuple(Mode),
    paths: Iterable[bool] = (False, True),
    points: Collection[CrashPoint] = POINTS,
    crossed: Collection[str] = (),
) -> list[Cell]:
    """The cells over ``stores``: each row once per store, its mode taken in turn (every mode
    on the stores in ``crossed``); each effect point's row again with the tool's own key."""
    result = []
    chosen = [(resumes, row) for resumes in paths for row in rows(resumes) if row[0] in points]
    keyed = [(resumes, row) for resumes, row in chosen if row[0] in EFFECT_POINTS]
    for index, store in enumerate(stores):
        for number, (resumes, (point, boundary, at)) in enumerate(chosen):
            turn = modes[(number + index) % len(modes)]
            for mode in modes if store in crossed else (turn,):
                result.append(Cell(store, mode, resumes, point, boundary, at))
        for number, (resumes, (point, boundary, at)) in enumerate(keyed):
            mode = modes[(number + index + 1) % len(modes)]
            result.append(Cell(store, mode, resumes, point, boundary, at, keyed=True))
    return result


async def _open(store: str, session_id: str, directory: Path) -> Any:
    if store == LATE_STORE:
        return LateLanding(await store_named("sqlite").open(session_id, directory))
    return await store_named(store).open(session_id, directory)


async def _side(cell: Cell, directory: Path, session_id: str, *, wrapped: bool) -> Any:
    inner = await _open(cell.store, session_id, directory)
    try:
        script = cell.script() if wrapped else cell.bare_script()
        return await play(script, directory, inner, wrapped=wrapped)
    finally:
        await close_store(inner.inner if isinstance(inner, LateLanding) else inner, drop=True)


async def run_cell_async(cell: Cell, directory: Path, *, bare: bool = True) -> CancelVerdict:
    """Cancel, continue, judge: the wrapped side, then its bare twin."""
    verdict = CancelVerdict(cell)
    session_id = f"customer-7-{uuid.uuid4().hex[:8]}"
    try:
        wrapped = await _side(cell, directory / "wrapped", session_id, wrapped=True)
        twin = await _side(cell, directory / "bare", session_id, wrapped=False) if bare else None
    except Exception as error:
        verdict.outcome = "error"
        verdict.problems.append(f"the cell failed: {type(error).__name__}: {error}")
        return verdict
    judge(verdict, wrapped, twin)
    return verdict


def run_cell(cell: Cell, directory: Path, *, bare: bool = True) -> CancelVerdict:
    for side in ("wrapped", "bare"):
        (directory / side).mkdir(parents=True, exist_ok=True)
    return asyncio.run(run_cell_async(cell, directory, bare=bare))


def run_cells(
    selected: Sequence[Cell],
    *,
    workdir: Path,
    keep: bool = False,
    progress: Callable[[CancelVerdict], None] | None = None,
) -> list[CancelVerdict]:
    """Run cells one after the other (each in this process, on its own loop), each in its own
    directory under ``workdir`` (removed afterwards unless ``keep``)."""
    set_tracing_disabled(True)
    verdicts = []
    with warnings.catch_warnings():
        # A streamed run cancelled at once leaves the SDK's next turn unawaited: its noise.
        warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
        for index, cell in enumerate(selected):
            verdicts.append(_run_one(cell, workdir / f"cancel-{index:04d}", keep, progress))
        # Collected here, that noise is not left for whatever runs next in this process.
        gc.collect()
    return verdicts


def _run_one(
    cell: Cell,
    directory: Path,
    keep: bool,
    progress: Callable[[CancelVerdict], None] | None,
) -> CancelVerdict:
    verdict = run_cell(cell, directory)
    if not keep:
        shutil.rmtree(directory, ignore_errors=True)
    if progress is not None:
        progress(verdict)
    return verdict
