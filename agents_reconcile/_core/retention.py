"""How long a journal keeps what no guarantee needs any more (``Retention``), what pruning
removed (``Pruned``), and the rule that follows for a run resumed from a RunState.

What each record is kept for, and when it may go (its age is counted from the time given)::

    record                          kept, whatever its age, while          then pruned after
    ------------------------------  -------------------------------------  -----------------
    unresolved intent               always (its owner or an operator       never
                                    must close it)
    decision (settling, or denial)  its intent is unresolved               ``decisions``
                                                                           (decided)
    set-aside entry                 -                                      ``decisions``
                                                                           (set aside)
    effect started, no receipt      always (an operator may be needed)     never
    receipt (effect done)           its session has an unresolved intent   ``receipts``
                                    (whose batch may hold the output it    (stored)
                                    vouches for: it is checked against
                                    the receipt before it is accepted)
    a session's write count         the session has an unresolved intent   ``idle_sessions``
                                                                           (last counted)

A pruned write count is not forgotten: the journal keeps the highest count it pruned (its
floor), reads a session without a count as that floor, and counts a new write of it above the
floor. A session's count so never goes down, and a RunState whose count was pruned is found
stale (older than the session), never taken for current.

A RunState is refused once it is older than ``runstates``, the shortest of the three
(``expired``): by then what it would be checked against (its intents' decisions, its tool
calls' receipts, its session's count) may be gone. Its age is the time of the last count it
carries (a run stamps each count it records; a signed state has the stamp signed with it) or
of its oldest carried intent. A state from an earlier release carries no stamp: it is checked
on counts alone, which the floor keeps sound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Final, Literal

from ..errors import ConfigurationError

__all__ = [
    "DEFAULT_RETENTION",
    "KEEP_FOREVER",
    "KINDS",
    "LONGEST",
    "Kept",
    "Pruned",
    "Retention",
    "expired",
    "refuses_every_run",
]

Kept = Literal["decisions", "receipts", "idle_sessions"]
KINDS: Final[tuple[Kept, ...]] = ("decisions", "receipts", "idle_sessions")


LONGEST: Final = timedelta(days=36_525)
"""The longest span a retention takes: 100 years. Every journal stores times as seconds and
compares them with now less the span, which this keeps well within what each engine holds
(and ``timedelta`` can add); to keep a kind for good, say None."""


def _span(name: str, value: object) -> timedelta | None:
    """``value`` as a span, checked once, here: a ``ConfigurationError`` for what is not a
    span, is negative, not finite, or longer than ``LONGEST``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        raise ConfigurationError(
            f"retention {name} must be a timedelta, a number of seconds or None (kept for "
            f"good), not {value!r} ({type(value).__name__})"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(
            f"retention {name} must be a finite number of seconds, not {value!r} (None keeps "
            "it for good)"
        )
    if isinstance(value, timedelta):
        span = value
    elif value < 0:
        raise ConfigurationError(f"retention {name} must not be negative, not {value!r} seconds")
    elif value > LONGEST.total_seconds():
        span = LONGEST + timedelta(days=1)  # refused below, without building what overflows
    else:
        span = timedelta(seconds=value)
    if span < timedelta(0):
        raise ConfigurationError(f"retention {name} must not be negative, not {span}")
    if span > LONGEST:
        raise ConfigurationError(
            f"retention {name} must be at most {LONGEST.days // 365} years ({LONGEST.days:,} "
            f"days), not {value!r}: None keeps it for good"
        )
    return span


@dataclass(frozen=True)
class Retention:
    """How long a journal keeps settled decisions, receipts and idle sessions' write counts
    (a ``timedelta``, a number of seconds, or None to keep them for good): each at most
    ``LONGEST`` (100 years), never negative; zero lets ``prune`` remove at once what is due,
    but a wrapper's ``ReconcileConfig`` refuses it (``refuses_every_run``). Nothing a
    guarantee still needs is pruned whatever its age (the table in this module's docstring),
    and a RunState older than ``runstates`` is refused with reason ``runstate_expired``.

    The default keeps each for 30 days: a journal then holds a month of decisions and
    receipts and the sessions written in that month, however long it runs."""

    decisions: timedelta | int | float | None = timedelta(days=30)
    receipts: timedelta | int | float | None = timedelta(days=30)
    idle_sessions: timedelta | int | float | None = timedelta(days=30)

    def __post_init__(self) -> None:
        for field in fields(self):
            object.__setattr__(self, field.name, _span(field.name, getattr(self, field.name)))

    def seconds(self, kept: Kept) -> float | None:
        """How long ``kept`` is kept, in seconds (None: for good)."""
        span = getattr(self, kept)
        return None if span is None else float(span.total_seconds())

    @property
    def runstates(self) -> timedelta | None:
        """The age past which a RunState is refused: the shortest of the three (None when
        everything is kept for good)."""
        kept = (self.decisions, self.receipts, self.idle_sessions)
        spans = [span for span in kept if isinstance(span, timedelta)]
        return min(spans) if spans else None

    @property
    def keeps_everything(self) -> bool:
        return self.runstates is None


def refuses_every_run(retention: Retention) -> list[Kept]:
    """The kinds ``retention`` keeps for no time at all: a wrapper configured so would refuse
    every RunState (``runstates`` is the shortest of the three), so its configuration refuses
    it; ``prune`` may be given such a retention."""
    return [kind for kind in KINDS if retention.seconds(kind) == 0]


DEFAULT_RETENTION: Final = Retention()
KEEP_FOREVER: Final = Retention(None, None, None)


def expired(stamp: float, now: float, retention: Retention) -> bool:
    """Whether a RunState stamped ``stamp`` (seconds since the epoch) is past ``retention``'s
    ``runstates`` at ``now``."""
    limit = retention.runstates
    return limit is not None and now - stamp > limit.total_seconds()


@dataclass(frozen=True)
class Pruned:
    """What one ``prune`` call removed (or, in a dry run, would remove)."""

    decisions: int = 0
    set_aside: int = 0
    receipts: int = 0
    write_counts: int = 0
    bytes: int = 0
    """The bytes of the records and keys removed, as the journal stores them (its indexes and
    the space the storage reclaims later are not counted)."""
    done: bool = True
    """False when the call stopped at its ``limit`` with more due (call again)."""

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            self.decisions + other.decisions,
            self.set_aside + other.set_aside,
            self.receipts + other.receipts,
            self.write_counts + other.write_counts,
            self.bytes + other.bytes,
            other.done,
        )

    @property
    def rows(self) -> int:
        return self.decisions + self.set_aside + self.receipts + self.write_counts
