"""The crash-point matrix: a real agent run is killed with SIGKILL at every named crash point,
at every append it makes, over every store; a fresh process recovers (a new run with the next
input, or the saved RunState checkpoint, each run and streamed), with and without another
writer in between. Every cell must keep every promise; the outcomes must be the expected ones.

This is what ``agents-reconcile selftest`` prints as a table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents_reconcile.crashpoints import CrashPoint
from agents_reconcile.selftest.matrix import (
    APPEND_POINTS,
    RECONCILE_FAULTS,
    Cell,
    Verdict,
    cells,
    run_cells,
    stop_servers,
)
from agents_reconcile.selftest.scenario import RecoveryPath
from agents_reconcile.selftest.stores import POSTGRES_ENV, REDIS_ENV, STORES, store_named

from ..servers import POSTGRES_ENV as POSTGRES_ENV_TEST
from ..servers import REDIS_ENV as REDIS_ENV_TEST

pytestmark = pytest.mark.faults

GROUPS = [
    pytest.param(store.name, path, id=f"{store.name}-{path.value}")
    for store in STORES
    for path in RecoveryPath
]
LANDED = {
    # Crash points at which the pending write is in the store.
    CrashPoint.AFTER_COMMIT_BEFORE_ACK,
    CrashPoint.BEFORE_INTENT_CLEARED,
    CrashPoint.BEFORE_CLEARING,
    CrashPoint.DURING_RECONCILE_READ,
    CrashPoint.BEFORE_SETTLE,
    CrashPoint.AFTER_REPLAY,
}


@pytest.fixture(scope="module", autouse=True)
def fork_servers() -> Iterator[None]:
    # The revisioned server stores run where the suites have servers; the fork servers
    # started below inherit these.
    for test_env, selftest_env in ((REDIS_ENV_TEST, REDIS_ENV), (POSTGRES_ENV_TEST, POSTGRES_ENV)):
        if os.environ.get(test_env):
            os.environ.setdefault(selftest_env, os.environ[test_env])
    yield
    stop_servers()


def also_expected(cell: Cell) -> set[str]:
    """Outcomes a cell may have besides ``expected``: where the clearing runs decides.

    A resumed run's tool output is cleared in the background, or, where nothing between that
    append and the final one gives the loop a turn (a revisioned SQLite store, all on the
    loop), folded into the final append's opening: the crash then stops the final append
    before its intent, with the run's state current, and the recovery finds the output
    committed and goes on instead of finding the checkpoint stale."""
    if cell.point is CrashPoint.BEFORE_CLEARING and cell.path.resumes:
        return {"committed"}
    return set()


def expected(cell: Cell) -> str:
    """The outcome each cell must have."""
    if cell.point is CrashPoint.BEFORE_INTENT_RECORDED:
        # Nothing was recorded: nothing to settle. A checkpoint that the run had moved past
        # (its tool output was stored) is stale.
        if cell.path.resumes and cell.boundary == "final":
            return "denied: stale_state"
        return "clean"
    if cell.foreign and store_named(cell.store).revisioned:
        # The store's record of writes proves what happened: a write that landed is
        # committed (a resumed checkpoint is then stale); one that did not is absent, and the
        # other writer's append is an extension, denied by default.
        if cell.point not in LANDED:
            return "denied: extended_by_others"
        return "denied: stale_state" if cell.path.resumes else "committed"
    if cell.foreign:
        return "denied: history_changed"
    if cell.path.resumes:
        # Every crash after the checkpoint's own tool ran leaves the history ahead of it.
        return "denied: stale_state"
    if cell.point in (CrashPoint.AFTER_INTENT_RECORDED, CrashPoint.INSIDE_APPEND_BEFORE_COMMIT):
        return "replayed"
    if cell.point is CrashPoint.BEFORE_REPLAY:
        return "replayed"
    return "committed"


@pytest.mark.parametrize(("store", "path"), GROUPS)
def test_every_crash_point_recovers(store: str, path: RecoveryPath, tmp_path: Path) -> None:
    if not store_named(store).available():
        pytest.skip(f"{store}: no driver, or no server (see tests/servers.py)")
    chosen = cells([store], [path], workdir=tmp_path)
    points = len(APPEND_POINTS) + len(RECONCILE_FAULTS)
    assert points == 10
    assert len(chosen) == len(chosen and {c.boundary for c in chosen}) * points * 2
    verdicts: list[Verdict] = run_cells(chosen, workdir=tmp_path, workers=2)
    broken = [
        f"{v.cell.row} foreign={v.cell.foreign}: {v.outcome} {v.problems} dup={v.duplicates} "
        f"lost={v.losses} unpaired={v.unpaired} continued={v.continued_on_ambiguity} "
        f"rerun={v.reexecuted}"
        for v in verdicts
        if not v.holds or not v.killed
    ]
    assert not broken, "\n".join(broken)
    wrong = [
        f"{v.cell.row} foreign={v.cell.foreign}: {v.outcome}, expected {expected(v.cell)}"
        for v in verdicts
        if v.outcome != expected(v.cell) and v.outcome not in also_expected(v.cell)
    ]
    assert not wrong, "\n".join(wrong)
    if store_named(store).revisioned:
        # Where the record of writes is intact, a revisioned store never answers "ambiguous".
        guessed = [v.outcome for v in verdicts if "history_changed" in v.outcome]
        assert not guessed
    # Only a tool whose run left no record at all is run again (on resuming a checkpoint).
    for verdict in verdicts:
        if verdict.unrecorded_reruns:
            assert verdict.cell.path.resumes
            assert verdict.cell.point is CrashPoint.BEFORE_INTENT_RECORDED
