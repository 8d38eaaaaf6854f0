"""The crash-point matrix: a real agent run is killed with SIGKILL at every named crash point,
at every append it makes and inside its card-charging effect tool, over every store; a fresh
process recovers (a new run with the next input, or the saved RunState checkpoint, each run
and streamed), with and without another writer in between. Every cell must keep every
promise (no effect run twice among them); the outcomes must be the expected ones.

This is what ``agents-reconcile selftest`` prints as a table. By default the reference store
meets every cell on every path and every other store the cells of one path (``ONE_PATH``);
the rest run where ``AGENTS_RECONCILE_TEST_EXHAUSTIVE=1`` is set (``-m exhaustive`` selects
them alone).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile._core.crashpoints import CrashPoint
from agents_reconcile._selftest.matrix import (
    APPEND_POINTS,
    EFFECT_POINTS,
    RECONCILE_FAULTS,
    Cell,
    Verdict,
    cells,
    run_cells,
    stop_servers,
)
from agents_reconcile._selftest.scenario import RecoveryPath
from agents_reconcile._selftest.stores import (
    CONVERSATIONS_ENV,
    POSTGRES_ENV,
    REDIS_ENV,
    STORES,
    Store,
    store_named,
)

from ..support.conversations_server import ConversationsServer
from ..support.servers import POSTGRES_ENV as POSTGRES_ENV_TEST
from ..support.servers import REDIS_ENV as REDIS_ENV_TEST

pytestmark = pytest.mark.faults

REFERENCE = "sqlite"
"""The store that meets every cell on every path by default: one the wrapper judges by
fingerprints, without a server."""
ONE_PATH = {
    "sqlalchemy_sqlite": RecoveryPath.RUN,
    "async_sqlite": RecoveryPath.STREAMED,
    "advanced_sqlite": RecoveryPath.RESUME_RUN,
    "encrypted_sqlite": RecoveryPath.RESUME_STREAMED,
    "conversations": RecoveryPath.STREAMED,
    "revisioned_redis-cluster": RecoveryPath.RUN,
    "revisioned_sqlite": RecoveryPath.STREAMED,
    "revisioned_redis": RecoveryPath.RESUME_RUN,
    "revisioned_postgres": RecoveryPath.RESUME_STREAMED,
}
"""The path each other store meets by default, each crash point at each append and each
effect point with either key (a store not named here: ``run``). The paths differ above the
store, where the reference store meets them all; each path is given to a store of each kind,
so that every cell of every path also meets a store the wrapper judges by its record of
writes (``revisioned_sqlite`` takes the path of a revisioned store whose server is missing).
Another writer's append is judged by the store only where it keeps a record of writes: a
store judged by fingerprints meets it on its path where the matrix is exhaustive, as it meets
its other paths (``-m exhaustive``)."""
ALONE, FOREIGN, BOTH = (False,), (True,), (False, True)


def _paths(store: Store) -> set[RecoveryPath]:
    """The paths ``store`` meets by default."""
    if store.name == REFERENCE:
        return set(RecoveryPath)
    paths = {ONE_PATH.get(store.name, RecoveryPath.RUN)}
    if store.name == "revisioned_sqlite":
        paths |= {
            ONE_PATH.get(other.name, RecoveryPath.RUN)
            for other in STORES
            if other.revisioned and other.server and not other.available()
        }
    return paths


def _group(store: Store, path: RecoveryPath) -> list[Any]:
    name = f"{store.name}-{path.value}"
    if path not in _paths(store):
        return [pytest.param(store.name, path, BOTH, id=name, marks=pytest.mark.exhaustive)]
    if store.name == REFERENCE or store.revisioned:
        return [pytest.param(store.name, path, BOTH, id=name)]
    return [
        pytest.param(store.name, path, ALONE, id=f"{name}-alone"),
        pytest.param(
            store.name, path, FOREIGN, id=f"{name}-another_writer", marks=pytest.mark.exhaustive
        ),
    ]


GROUPS = [group for store in STORES for path in RecoveryPath for group in _group(store, path)]
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
    # The revisioned server stores run where the suites have servers, and the Conversations
    # store on a local Conversations server of this module's own; the fork servers started
    # below inherit these.
    for test_env, selftest_env in ((REDIS_ENV_TEST, REDIS_ENV), (POSTGRES_ENV_TEST, POSTGRES_ENV)):
        if os.environ.get(test_env):
            os.environ.setdefault(selftest_env, os.environ[test_env])
    with ConversationsServer() as conversations:
        previous = os.environ.get(CONVERSATIONS_ENV)
        os.environ[CONVERSATIONS_ENV] = conversations.base_url
        try:
            yield
        finally:
            stop_servers()
            if previous is None:
                del os.environ[CONVERSATIONS_ENV]
            else:
                os.environ[CONVERSATIONS_ENV] = previous


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


RESUMED_EFFECT = {
    # How a resumed checkpoint's call of the tool is answered after a crash inside it.
    CrashPoint.BEFORE_EFFECT_INTENT: "clean",  # nothing recorded, nothing charged: it runs
    CrashPoint.BEFORE_EFFECT: "charged after check",  # an intent, no charge at the processor
    CrashPoint.BEFORE_RECEIPT: "settled by check",  # an intent, and the processor's charge
    CrashPoint.AFTER_RECEIPT: "receipt",
}


def expected(cell: Cell) -> str:
    """The outcome each cell must have."""
    if cell.point in EFFECT_POINTS:
        # The crash was in the tool: no append of the turn had started. A fresh run goes on
        # with the next input (the earlier call is never made again); a resumed checkpoint
        # makes the same call again, under the same key, another writer or not.
        return RESUMED_EFFECT[cell.point] if cell.path.resumes else "clean"
    if cell.point is CrashPoint.BEFORE_INTENT_RECORDED:
        # Nothing was recorded in the history's journal: nothing to settle. A checkpoint that
        # the run had moved past (its tool output was stored) is stale; one that it had not
        # calls its tool again, answered by the receipt the tool's run left.
        if cell.path.resumes:
            return "denied: stale_state" if cell.boundary == "final" else "receipt"
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


@pytest.mark.parametrize(("store", "path", "foreign"), GROUPS)
def test_every_crash_point_recovers(
    store: str, path: RecoveryPath, foreign: tuple[bool, ...], tmp_path: Path
) -> None:
    if not store_named(store).available():
        pytest.skip(f"{store}: no driver, or no server (see tests/support/servers.py)")
    chosen = cells([store], [path], workdir=tmp_path, foreign=foreign)
    if foreign == FOREIGN:
        chosen = [c for c in chosen if not c.keyed]  # the keyed cells run alone
    points = len(APPEND_POINTS) + len(RECONCILE_FAULTS)
    assert (points, len(EFFECT_POINTS)) == (10, 4)
    appends = len({c.boundary for c in chosen})
    assert appends == (2 if path.resumes else 3)
    # Each cell with and without another writer (as chosen); each effect point again with
    # the tool's own key (effect_tool(key=...)), without.
    keyed = 0 if foreign == FOREIGN else len(EFFECT_POINTS)
    assert len(chosen) == (appends * points + len(EFFECT_POINTS)) * len(foreign) + keyed
    assert sum(c.keyed for c in chosen) == keyed
    assert {c.foreign for c in chosen} == set(foreign)
    tool_turn = "tool_output" if path.resumes else "tool_turn"
    assert {c.boundary for c in chosen if c.point in EFFECT_POINTS} == {tool_turn}
    verdicts: list[Verdict] = run_cells(chosen, workdir=tmp_path, workers=2)
    broken = [
        f"{v.cell.row} foreign={v.cell.foreign}: {v.outcome} {v.problems} dup={v.duplicates} "
        f"lost={v.losses} unpaired={v.unpaired} continued={v.continued_on_ambiguity} "
        f"rerun={v.reexecuted} unrecorded={v.unrecorded_reruns} twice={v.effects_run_twice}"
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
    # An effect tool's body runs under a durable intent: nothing re-runs unrecorded, and no
    # effect runs twice (``holds`` says so too; said here on its own).
    assert sum(v.unrecorded_reruns for v in verdicts) == 0
    assert sum(v.effects_run_twice for v in verdicts) == 0
