"""The cancellation matrix: a real agent run's request is cancelled (its task cancelled, a
timeout around it, a failing TaskGroup sibling, its streamed result cancelled at once or after
the turn) at the write path's, the reconciliation's and the effect tool's crash points, on
SQLite, on a store whose write lands after the cancellation, and on the server stores where
their servers are; the user then continues. Every count must be 0: nothing stored twice or
lost, no effect run twice, no denial with nothing in doubt, nothing worse than the bare twin,
nothing left held by this live process for nobody.

This is what ``agents-reconcile selftest`` prints after the SIGKILL matrix. By default each
row meets each way to cancel once, over five stores; every way at every row on SQLite is
exhaustive (``AGENTS_RECONCILE_TEST_EXHAUSTIVE=1``). The judge's two columns of its own are
also checked on synthetic evidence, so that they cannot always be 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from agents_reconcile._core.crashpoints import CrashPoint
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._selftest.cancel_judge import CancelVerdict, IntentRow, Side, Step, judge
from agents_reconcile._selftest.cancel_modes import Mode
from agents_reconcile._selftest.cancellation import (
    LATE_STORE,
    Cell,
    cells,
    run_cell,
    run_cells,
)
from agents_reconcile._selftest.matrix import EFFECT_POINTS
from agents_reconcile._selftest.scenario import PROCESSOR_LOG, TOOLS_LOG
from agents_reconcile._selftest.stores import (
    CONVERSATIONS_ENV,
    POSTGRES_ENV,
    REDIS_ENV,
    store_named,
)

from ..support.conversations_server import ConversationsServer
from ..support.servers import POSTGRES_ENV as POSTGRES_ENV_TEST
from ..support.servers import REDIS_ENV as REDIS_ENV_TEST

pytestmark = pytest.mark.faults

SUBSET = {
    CrashPoint.AFTER_INTENT_RECORDED,
    CrashPoint.INSIDE_APPEND_BEFORE_COMMIT,
    CrashPoint.AFTER_COMMIT_BEFORE_ACK,
    CrashPoint.BEFORE_REPLAY,
    CrashPoint.BEFORE_SETTLE,
    CrashPoint.BEFORE_EFFECT,
    CrashPoint.BEFORE_RECEIPT,
}
"""A few points of each part: the write path, the gate's reconciliation, the effect tool."""


@pytest.fixture(scope="module", autouse=True)
def conversations() -> Iterator[None]:
    """A local Conversations server for the ``conversations`` store, for this module."""
    with ConversationsServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv(CONVERSATIONS_ENV, server.base_url)
        yield


ROTATION = ("sqlite", LATE_STORE, "revisioned_redis", "revisioned_postgres", "conversations")
"""One store per way to cancel: each meets every row once, in the ways taken in turn from a
place of its own, so that over the five every row meets every way once. A server store
whose server is missing hands its turn to ``sqlite``: every row still meets every way."""
SERVER_STORES = ("revisioned_redis", "revisioned_postgres")


def _servers() -> None:
    for test_env, selftest_env in ((REDIS_ENV_TEST, REDIS_ENV), (POSTGRES_ENV_TEST, POSTGRES_ENV)):
        if os.environ.get(test_env):
            os.environ.setdefault(selftest_env, os.environ[test_env])


def _turn(store: str) -> list[Cell]:
    """The cells of ``store``'s turn (on ``sqlite`` when it is a server's that is missing)."""
    _servers()
    assert len(ROTATION) == len(Mode)
    mine = [cell for cell in cells(list(ROTATION), points=SUBSET) if cell.store == store]
    if store in SERVER_STORES and not store_named(store).available():
        mine = [replace(cell, store="sqlite") for cell in mine]
    return mine


def _counts(verdict: CancelVerdict) -> str:
    return (
        f"{verdict.cell.store} {verdict.cell.mode.value} {verdict.cell.row}: {verdict.outcome} "
        f"dup={verdict.duplicates} lost={verdict.losses} unpaired={verdict.unpaired} "
        f"continued={verdict.continued_on_ambiguity} denied={verdict.false_denials} "
        f"twice={verdict.effects_run_twice} worse={verdict.worse_than_bare} "
        f"left={verdict.left_for_nobody} {verdict.problems}"
    )


def _holds(chosen: list[Cell], workdir: Path) -> list[CancelVerdict]:
    verdicts = run_cells(chosen, workdir=workdir)
    assert len(verdicts) == len(chosen)
    assert not [_counts(v) for v in verdicts if v.not_reached], "a cancellation never fired"
    broken = [_counts(v) for v in verdicts if not v.holds]
    assert not broken, "\n".join(broken)
    return verdicts


def test_every_row_meets_every_way_over_the_turns() -> None:
    """The turns together hold each row (point, append, key) once per way to cancel."""
    everything = [cell for store in ROTATION for cell in _turn(store)]
    ways = {(c.resumes, c.point, c.boundary, c.at, c.keyed, c.mode) for c in everything}
    rows = {(c.resumes, c.point, c.boundary, c.at) for c in everything if not c.keyed}
    assert {way[:4] for way in ways if not way[4]} == rows
    assert len([way for way in ways if not way[4]]) == len(rows) * len(Mode)


@pytest.mark.parametrize("store", ROTATION)
def test_every_cancellation_keeps_every_promise(store: str, tmp_path: Path) -> None:
    """One store's turn of the matrix: every row, cancelled in the ways taken in turn; every
    count is 0, and the bare twins do store items twice (they are a measure, not a
    formality)."""
    chosen = _turn(store)
    assert {cell.mode for cell in chosen} == set(Mode)
    verdicts = _holds(chosen, tmp_path)
    assert sum(v.bare_duplicates for v in verdicts) > 0


@pytest.mark.exhaustive
@pytest.mark.parametrize("mode", list(Mode), ids=lambda mode: mode.value)
def test_every_cancellation_in_one_way_on_sqlite_keeps_every_promise(
    mode: Mode, tmp_path: Path
) -> None:
    """The exhaustive cells: on SQLite every row cancelled in this way."""
    chosen = [c for c in cells(["sqlite"], points=SUBSET, crossed=["sqlite"]) if c.mode is mode]
    _holds(chosen, tmp_path)


@pytest.mark.parametrize(
    "mode", [Mode.TASK_CANCEL, Mode.TIMEOUT, Mode.STREAM_IMMEDIATE], ids=lambda mode: mode.value
)
def test_a_cancelled_opening_does_not_make_the_checkpoint_stale(tmp_path: Path, mode: Mode) -> None:
    """A resumed checkpoint's request is cancelled as its tool output's intent is about to be
    opened; resuming the checkpoint again (its history unchanged) is not denied
    ``stale_state``, and the charged call gets its output (it was denied before the opening
    was left unstarted: the journal counted writes the store never got)."""
    cell = Cell("sqlite", mode, True, CrashPoint.BEFORE_INTENT_RECORDED, "tool_output", 1)
    verdict = run_cell(cell, tmp_path)
    assert verdict.holds, _counts(verdict)


# -- the judge's own columns, on synthetic evidence --------------------------------------------


def _side(directory: Path, stored: list[str], charges: int) -> Side:
    directory.mkdir()
    records = [
        {"phase": "crash", "key": f"k{n}", "call_id": f"charge-{n}", "amount": 1, "charged": True}
        for n in range(charges)
    ]
    (directory / PROCESSOR_LOG).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    (directory / TOOLS_LOG).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    (directory / "acks.log").write_bytes(
        orjson.dumps({"phase": "crash", "items": sorted(set(stored))}) + b"\n"
    )
    side = Side(directory, cancelled="cancelled", fired=True, stored=stored)
    side.effects = [  # each charge with its intent and its receipt
        {"key": r["key"], "call_id": r["call_id"], "state": "done", "output": "charged 1"}
        | {"attempts": 1, "owner": "nobody"}
        for r in records
    ]
    side.steps = [Step("fresh", "completed", stored[:1], stored)]
    side.me = str(current_owner())
    return side


def _cell() -> Cell:
    return Cell("sqlite", Mode.TASK_CANCEL, False, CrashPoint.AFTER_INTENT_RECORDED, "input", 1)


def test_worse_than_bare_counts_what_the_bare_twin_did_not_do(tmp_path: Path) -> None:
    history = ["user:buy 1", "assistant:done 1"]
    bare = _side(tmp_path / "bare", history, charges=1)
    same = CancelVerdict(_cell())
    judge(same, _side(tmp_path / "same", history, charges=1), bare)
    assert (same.worse_than_bare, same.left_for_nobody) == (0, 0)
    assert same.holds
    twice = CancelVerdict(_cell())
    judge(twice, _side(tmp_path / "twice", ["user:buy 1", *history], charges=2), bare)
    assert twice.duplicates == 1
    assert twice.worse_than_bare == 2  # the input stored twice, and one charge more
    assert not twice.holds
    # The bare twin stored it twice too: a duplicate still, but not worse than bare.
    doubled = _side(tmp_path / "doubled", ["user:buy 1", *history], charges=2)
    level = CancelVerdict(_cell())
    judge(level, _side(tmp_path / "level", ["user:buy 1", *history], charges=2), doubled)
    assert (level.duplicates, level.worse_than_bare) == (1, 0)
    # Acknowledged, then missing where the bare twin kept it.
    lost = _side(tmp_path / "lost", history, charges=1)
    lost.stored = history[:1]
    lost.steps = [Step("fresh", "completed", history[:1], history[:1])]
    dropped = CancelVerdict(_cell())
    judge(dropped, lost, bare)
    assert dropped.losses == 1 and dropped.worse_than_bare == 1


def test_left_for_nobody_counts_what_this_live_process_holds_in_name_only(tmp_path: Path) -> None:
    me = str(current_owner())
    side = _side(tmp_path / "left", ["user:buy 1", "assistant:done 1"], charges=0)
    effect = {"key": "k", "call_id": "charge-1", "state": "started", "attempts": 1}
    side.intents = [
        IntentRow("i-held", "in_flight", me),
        IntentRow("i-orphan", "reconciling", me),
        IntentRow("i-failed", "failed", me),  # waiting for the next reconciliation: fine
        IntentRow("i-other", "in_flight", "elsewhere/1/2"),  # another process's business
    ]
    side.effects = [{**effect, "owner": me, "output": None}]
    side.busy = frozenset({"i-held"})
    verdict = CancelVerdict(_cell())
    judge(verdict, side, None)
    assert verdict.left_for_nobody == 2, verdict.problems
    assert not verdict.holds
    # Held by a task of this process, or with its receipt: nobody's business but its holder's.
    side.busy = frozenset({"i-held", "i-orphan"})
    side.running = frozenset({"k"})
    verdict = CancelVerdict(_cell())
    judge(verdict, side, None)
    assert verdict.left_for_nobody == 0, verdict.problems
    # Named held, and yet no task runs on the loop: nobody holds them.
    side.tasks = 0
    verdict = CancelVerdict(_cell())
    judge(verdict, side, None)
    assert verdict.left_for_nobody == 3, verdict.problems
    side.tasks = 1
    side.running = frozenset()
    side.effects = [{**effect, "owner": me, "state": "done", "output": "charged 1"}]
    verdict = CancelVerdict(_cell())
    judge(verdict, side, None)
    assert verdict.left_for_nobody == 0, verdict.problems


def test_a_tool_with_its_own_key_cancelled_at_each_effect_point_keeps_every_promise(
    tmp_path: Path,
) -> None:
    """The keyed cells (``effect_tool(key=...)``, the order's key): cancelled in every mode at
    each point the effect passes, fresh and resumed, every promise holds as with the per-call
    key."""
    chosen = [
        cell for cell in cells(["sqlite"], points=EFFECT_POINTS, crossed=["sqlite"]) if cell.keyed
    ]
    assert chosen and all(cell.row.endswith("(own key)") for cell in chosen)
    verdicts = run_cells(chosen, workdir=tmp_path)
    assert not [_counts(v) for v in verdicts if v.not_reached], "a cancellation never fired"
    broken = [_counts(v) for v in verdicts if not v.holds]
    assert not broken, "\n".join(broken)
