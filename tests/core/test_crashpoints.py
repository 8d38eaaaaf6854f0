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

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core import crashpoints
from agents_reconcile._core.crashpoints import CrashPoint
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


def test_a_child_arms_itself_explicitly(tmp_path: Path) -> None:
    """A child process that arms a point in code is killed with SIGKILL there, leaving a
    durable intent that a new process settles."""
    script = (
        "import asyncio, sys\n"
        "from agents import SQLiteSession\n"
        "from agents_reconcile import ReconcileConfig, ReconcilingSession\n"
        "from agents_reconcile._core import crashpoints\n"
        "crashpoints.arm(crashpoints.CrashPoint.BEFORE_INTENT_CLEARED)\n"
        "s = ReconcilingSession(SQLiteSession('s1', sys.argv[1]),"
        " config=ReconcileConfig(journal=sys.argv[2]))\n"
        "asyncio.run(s.add_items([{'role': 'user', 'content': 'hi'}]))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "chat.db"), str(tmp_path / "j.db")],
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


def test_no_environment_variable_arms_a_crash_point(tmp_path: Path) -> None:
    """The variable earlier releases read at import no longer arms anything: a process with it
    set appends normally and leaves nothing pending."""
    script = (
        "import asyncio, sys\n"
        "from agents import SQLiteSession\n"
        "from agents_reconcile import ReconcileConfig, ReconcilingSession\n"
        "from agents_reconcile._core import crashpoints\n"
        "assert crashpoints.armed() is None\n"
        "s = ReconcilingSession(SQLiteSession('s1', sys.argv[1]),"
        " config=ReconcileConfig(journal=sys.argv[2]))\n"
        "asyncio.run(s.add_items([{'role': 'user', 'content': 'hi'}]))\n"
    )
    env = {**os.environ, "AGENTS_RECONCILE_CRASH_AT": "before_intent_cleared"}
    child = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "chat.db"), str(tmp_path / "j.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    session = ReconcilingSession(
        SQLiteSession("s1", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "j.db"),
    )
    assert asyncio.run(session.pending()) == []


def test_arming_refuses_a_count_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        crashpoints.arm(crashpoints.CrashPoint.BEFORE_REPLAY, at=0)
