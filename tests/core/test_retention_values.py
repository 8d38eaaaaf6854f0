"""A retention's values are checked once, where a ``Retention`` is made: what no journal can
keep (not finite, negative, longer than 100 years) is a ``ConfigurationError`` naming the kind,
never an ``OverflowError`` or ``ValueError`` later; a wrapper's configuration refuses a kind
kept for no time (every run would be refused), which ``prune`` still takes; and the longest
retention taken works on every journal."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_reconcile import ConfigurationError, ReconcileConfig, ReconcilingSession, Retention
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.retention import LONGEST
from agents_reconcile.conformance._records import ME, make_decision, make_intent

HUNDRED_YEARS = timedelta(days=36_525)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        pytest.param(math.inf, "finite", id="inf"),
        pytest.param(-math.inf, "finite", id="minus-inf"),
        pytest.param(math.nan, "finite", id="nan"),
        pytest.param(1e300, "at most 100 years", id="huge-float"),
        pytest.param(10**30, "at most 100 years", id="huge-int"),
        pytest.param(timedelta.max, "at most 100 years", id="timedelta-max"),
        pytest.param(HUNDRED_YEARS + timedelta(seconds=1), "at most 100 years", id="past-longest"),
        pytest.param(-1, "negative", id="negative-seconds"),
        pytest.param(timedelta(days=-1), "negative", id="negative-timedelta"),
        pytest.param("30d", "timedelta, a number of seconds or None", id="text"),
        pytest.param(True, "timedelta, a number of seconds or None", id="bool"),
    ],
)
@pytest.mark.parametrize("kind", ["decisions", "receipts", "idle_sessions"])
def test_a_value_no_journal_can_keep_is_a_configuration_error(
    kind: str, value: Any, said: str
) -> None:
    """Each kind refuses, with a ``ConfigurationError`` naming it, what is not a span a journal
    can store and compare."""
    with pytest.raises(ConfigurationError, match=said) as refused:
        Retention(**{kind: value})
    assert kind in str(refused.value)


def test_the_longest_retention_is_a_hundred_years() -> None:
    """100 years, as a span or in seconds, is taken; None keeps a kind for good."""
    assert LONGEST == HUNDRED_YEARS
    assert Retention(HUNDRED_YEARS, HUNDRED_YEARS.total_seconds(), None).seconds("receipts") == (
        HUNDRED_YEARS.total_seconds()
    )
    assert Retention(HUNDRED_YEARS, HUNDRED_YEARS, HUNDRED_YEARS).runstates == HUNDRED_YEARS


@pytest.mark.parametrize(
    "kept",
    [
        pytest.param((0, 0, 0), id="all-zero"),
        pytest.param((None, 0, None), id="receipts-zero"),
        pytest.param((timedelta(0), None, None), id="zero-timedelta"),
        pytest.param((None, None, 1e-9), id="below-a-microsecond"),
    ],
)
def test_a_wrapper_refuses_a_kind_kept_for_no_time(kept: tuple[Any, Any, Any]) -> None:
    """Zero would make every RunState older than the retention at once, so every run carrying
    one would be refused: ``ReconcileConfig`` refuses it, saying so; ``prune`` takes it."""
    retention = Retention(*kept)
    with pytest.raises(ConfigurationError, match="no time at all") as refused:
        ReconcileConfig(retention=retention)
    assert "every run" in str(refused.value)
    assert ReconcileConfig(retention=Retention(1, 1, 1)).retention == Retention(1, 1, 1)


async def test_the_longest_retention_appends_and_prunes_on_every_journal(
    journal: Any, tmp_path: Path
) -> None:
    """A wrapper keeping everything 100 years appends (no ``OverflowError`` on any append),
    and a prune with it removes nothing younger."""
    longest = Retention(HUNDRED_YEARS, HUNDRED_YEARS, HUNDRED_YEARS)
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=journal, retention=longest),
    )
    for n in range(3):
        await session.add_items([{"role": "user", "content": f"turn {n}"}])
    assert len(await session.get_items()) == 3
    intent = make_intent("old", created_at=time.time() - 3600)
    await journal.record(intent, state=IntentState.FAILED, owner=ME)
    await journal.settle(make_decision(intent, decided_at=time.time() - 86_400 * 365 * 50))
    pruned = await journal.retention.prune(longest)
    assert (pruned.rows, pruned.done) == (0, True)
