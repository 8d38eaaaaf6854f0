"""Named crash points: armed, they stop execution exactly there; unarmed, they cost nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import SQLiteSession

from agents_reconcile import ReconcileConfig, ReconcilingSession, crashpoints
from agents_reconcile.crashpoints import CrashPoint
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

USER = {"role": "user", "content": "hi"}


class Stopped(BaseException):
    """Raised by the test action in place of a SIGKILL."""


def stop(point: CrashPoint) -> None:
    raise Stopped(point)


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    crashpoints.disarm()
    yield
    crashpoints.disarm()


def session_on(tmp_path: Path) -> tuple[ReconcilingSession, FaultInjectingSession]:
    faulty = FaultInjectingSession(SQLiteSession("s1", tmp_path / "chat.db"))
    config = ReconcileConfig(journal=tmp_path / "journal.db")
    return ReconcilingSession(faulty, config=config), faulty


APPEND_POINTS = [
    CrashPoint.BEFORE_INTENT_RECORDED,
    CrashPoint.AFTER_INTENT_RECORDED,
    CrashPoint.INSIDE_APPEND_BEFORE_COMMIT,
    CrashPoint.AFTER_COMMIT_BEFORE_ACK,
    CrashPoint.BEFORE_INTENT_CLEARED,
]


@pytest.mark.parametrize("point", APPEND_POINTS, ids=lambda p: p.value)
async def test_every_append_point_is_reached_once_per_append(
    tmp_path: Path, point: CrashPoint
) -> None:
    """An append passes each of its crash points, in order, once."""
    session, _ = session_on(tmp_path)
    crashpoints.arm(point, action=stop)
    with pytest.raises(Stopped):
        await session.add_items([USER])
    crashpoints.arm(point, at=2, action=stop)
    await session.add_items([USER])
    assert crashpoints.armed() is point, "reached once per append, not more"


@pytest.mark.parametrize(
    ("fault", "point"),
    [
        (Fault.LOST_ACK, CrashPoint.DURING_RECONCILE_READ),
        (Fault.LOST_ACK, CrashPoint.BEFORE_SETTLE),
        (Fault.REJECT, CrashPoint.BEFORE_REPLAY),
        (Fault.REJECT, CrashPoint.AFTER_REPLAY),
    ],
    ids=lambda value: value.value,
)
async def test_reconcile_points_are_reached(
    tmp_path: Path, fault: Fault, point: CrashPoint
) -> None:
    """Reconciling a committed or a missing write passes its crash points; stopping there
    leaves the intent for the next reconciliation, which settles it exactly once."""
    session, faulty = session_on(tmp_path)
    faulty.plan(fault)
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    crashpoints.arm(point, action=stop)
    with pytest.raises(Stopped):
        await session.reconcile()
    # The claim is ours and we are alive: a new wrapper in this process may take it over.
    again, _ = session_on(tmp_path)
    decisions = await again.reconcile()
    assert len(decisions) == 1
    assert await again.inner.get_items() == [USER]


def test_environment_arms_a_child_process(tmp_path: Path) -> None:
    """AGENTS_RECONCILE_CRASH_AT kills a child with SIGKILL at the named point, leaving a
    durable intent that a new process settles."""
    script = (
        "import asyncio, sys\n"
        "from agents import SQLiteSession\n"
        "from agents_reconcile import ReconcileConfig, ReconcilingSession\n"
        "s = ReconcilingSession(SQLiteSession('s1', sys.argv[1]),"
        " config=ReconcileConfig(journal=sys.argv[2]))\n"
        "asyncio.run(s.add_items([{'role': 'user', 'content': 'hi'}]))\n"
    )
    env = {**os.environ, crashpoints.ENV_CRASH_AT: "before_intent_cleared"}
    child = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "chat.db"), str(tmp_path / "j.db")],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL
    session = ReconcilingSession(
        SQLiteSession("s1", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j.db"),
    )
    assert len(asyncio.run(session.pending())) == 1
    [decision] = asyncio.run(session.reconcile())
    assert decision.outcome.value == "committed"


def test_a_bad_environment_value_names_the_points() -> None:
    """A misspelt crash point in the environment fails at import with the valid names."""
    env = {**os.environ, crashpoints.ENV_CRASH_AT: "nowhere"}
    child = subprocess.run(
        [sys.executable, "-c", "import agents_reconcile"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode != 0 and "before_intent_recorded" in child.stderr
