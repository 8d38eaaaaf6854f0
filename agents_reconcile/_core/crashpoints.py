"""Named crash points: places where a test can stop the process, to prove recovery from there.

The package's paths mark each point with ``if crashpoints.ARMED: crashpoints.reached(point)``:
unarmed (the normal case) that is one attribute read and no call, so no crash point is on the
path of an append. Armed, the N-th time the point is reached the
process is killed with SIGKILL (or a given callable runs, for in-process tests).

Points are armed only in code, with ``arm(CrashPoint.AFTER_INTENT_RECORDED)``: by tests, and by
the self-test in the child processes it starts for the purpose. Nothing in the environment can
arm one, so no setting can make a production process kill itself.
"""

from __future__ import annotations

import enum
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ARMED", "CrashPoint", "arm", "armed", "disarm", "reached"]


class CrashPoint(enum.Enum):
    """Where a process can be stopped, in the order an append and its recovery reach them."""

    BEFORE_INTENT_RECORDED = "before_intent_recorded"
    """The intent is built; nothing is in the journal or the store yet."""
    AFTER_INTENT_RECORDED = "after_intent_recorded"
    """The intent is durable (write-ahead); the inner append has not started."""
    INSIDE_APPEND_BEFORE_COMMIT = "inside_append_before_commit"
    """Inside the inner append, before the store commits (fired by ``FaultInjectingSession``)."""
    AFTER_COMMIT_BEFORE_ACK = "after_commit_before_ack"
    """The store committed; its acknowledgement has not reached the wrapper (likewise)."""
    BEFORE_INTENT_CLEARED = "before_intent_cleared"
    """The append was acknowledged; the intent is still in the journal."""
    BEFORE_CLEARING = "before_clearing"
    """An acknowledged intent is about to be cleared: folded into the next append's opening,
    or by the background clearing after the call returned."""
    DURING_RECONCILE_READ = "during_reconcile_read"
    """An intent is claimed for reconciliation and the tail was read; nothing decided yet."""
    BEFORE_REPLAY = "before_replay"
    """The batch was found missing; the replay has not started."""
    AFTER_REPLAY = "after_replay"
    """The replay was acknowledged; the intent is not settled yet."""
    BEFORE_SETTLE = "before_settle"
    """A committed intent is about to be settled in the journal."""
    BEFORE_EFFECT_INTENT = "before_effect_intent"
    """An effect tool was called; its effect's intent is not in the journal yet."""
    BEFORE_EFFECT = "before_effect"
    """The effect's intent is durable; the tool's body has not run."""
    BEFORE_RECEIPT = "before_receipt"
    """The tool's body returned (the effect happened); its receipt is not durable yet."""
    AFTER_RECEIPT = "after_receipt"
    """The receipt is durable; the output has not reached the runner."""


@dataclass
class _Trigger:
    point: CrashPoint
    remaining: int
    action: Callable[[CrashPoint], None]


def _kill(point: CrashPoint) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


_armed: _Trigger | None = None

ARMED: bool = False
"""Whether some point is armed: read before calling ``reached`` (never set it by hand)."""


def reached(point: CrashPoint) -> None:
    """Mark that execution reached ``point``; stops the process there when armed for it."""
    if _armed is None:
        return
    _fire(point)


def _fire(point: CrashPoint) -> None:
    trigger = _armed
    if trigger is None or trigger.point is not point:
        return
    trigger.remaining -= 1
    if trigger.remaining > 0:
        return
    _set(None)
    trigger.action(point)


def arm(
    point: CrashPoint, *, at: int = 1, action: Callable[[CrashPoint], None] | None = None
) -> None:
    """Stop at the ``at``-th time ``point`` is reached: SIGKILL unless ``action`` is given."""
    if at < 1:
        raise ValueError(f"at must be at least 1, not {at}")
    _set(_Trigger(point, at, action or _kill))


def disarm() -> None:
    """Remove any armed crash point."""
    _set(None)


def _set(trigger: _Trigger | None) -> None:
    global _armed, ARMED
    _armed, ARMED = trigger, trigger is not None


def armed() -> CrashPoint | None:
    """The armed point, if any."""
    return None if _armed is None else _armed.point
