"""A replay writes exactly what the caller gave: NaN and the infinities survive, what the
journal could not hold exactly is refused before anything is written, and the caller's own
objects are replayed while this wrapper still holds them."""

from __future__ import annotations

import datetime
import math
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import (
    ContinuationDenied,
    FingerprintError,
    Outcome,
    ReconcileConfig,
    ReconcilingSession,
)
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

NON_FINITE = [float("nan"), float("inf"), float("-inf")]


def same_float(left: Any, right: float) -> bool:
    return (math.isnan(left) and math.isnan(right)) or left == right


def wrapped(tmp_path: Path) -> tuple[ReconcilingSession, FaultInjectingSession]:
    faulty = FaultInjectingSession(SQLiteSession("s", tmp_path / "chat.db"))
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "journal.db"))
    return session, faulty


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
async def test_a_replayed_input_keeps_its_non_finite_floats(tmp_path: Path, value: float) -> None:
    """On the runner: the input save is rejected, the next run's read replays it, and the
    stored item holds NaN (or the infinity) where the caller had it, not null."""
    session, faulty = wrapped(tmp_path)
    agent = Agent(
        name="a", model=ScriptedModel([[assistant_message("one")], [assistant_message("two")]])
    )
    faulty.plan(Fault.REJECT)
    first = [{"role": "user", "content": "score this", "metadata": {"score": value}}]
    with pytest.raises(BackendFailure):
        await Runner.run(agent, first, session=session, run_config=session.run_config())
    await Runner.run(agent, "next", session=session, run_config=session.run_config())
    [decision] = await session.decisions()
    assert decision.outcome is Outcome.UNCHANGED
    stored = await SQLiteSession("s", tmp_path / "chat.db").get_items()
    assert same_float(stored[0]["metadata"]["score"], value), stored[0]


async def test_nan_and_null_are_told_apart_when_judging(tmp_path: Path) -> None:
    """A batch holding NaN is not taken as committed when the store holds null there
    instead: the fingerprints tell them apart, so a changed item is never vouched for."""
    session, faulty = wrapped(tmp_path)
    await session.add_items([{"role": "user", "content": "before"}])
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([{"role": "user", "content": "x", "score": float("nan")}])
    # Someone writes the same item with null in place of NaN.
    await SQLiteSession("s", tmp_path / "chat.db").add_items(
        [{"role": "user", "content": "x", "score": None}]
    )
    with pytest.raises(ContinuationDenied) as denied:
        await session.reconcile()
    assert denied.value.decision.outcome is Outcome.AMBIGUOUS


@pytest.mark.parametrize(
    "value",
    [
        datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC),
        uuid.UUID(int=7),
        b"raw bytes",
        {"a", "set"},
    ],
    ids=["datetime", "uuid", "bytes", "set"],
)
async def test_what_the_journal_cannot_hold_exactly_is_refused_before_anything_is_written(
    tmp_path: Path, value: Any
) -> None:
    """An item the journal could not give back equal raises FingerprintError naming the item
    and the place, before the store is called and before any intent exists: a later replay
    could otherwise write a copy the caller never sent."""
    session, faulty = wrapped(tmp_path)
    with pytest.raises(FingerprintError) as refused:
        await session.add_items([{"role": "user", "content": "hi", "meta": {"at": value}}])
    assert refused.value.index == 0
    assert "meta" in str(refused.value)
    assert faulty.add_calls == 0
    assert await session.pending() == []
    assert await session.get_items() == []


class RecordingSession:
    """An in-memory session that keeps the very objects it was given, failing when told."""

    def __init__(self) -> None:
        self.session_id = "s"
        self.items: list[Any] = []
        self.given: list[list[Any]] = []
        self.reject_next = False

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return self.items[-limit:] if limit else list(self.items)

    async def add_items(self, items: list[Any]) -> None:
        self.given.append(items)
        if self.reject_next:
            self.reject_next = False
            raise BackendFailure("rejected")
        self.items.extend(items)

    async def pop_item(self) -> Any:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


async def test_a_replay_by_the_same_wrapper_writes_the_callers_own_items(tmp_path: Path) -> None:
    """The replay after a rejected append hands the store the caller's items as given (a
    tuple stays a tuple), not the journal's decoded copy."""
    inner = RecordingSession()
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=tmp_path / "j.db"))
    inner.reject_next = True
    given = [{"role": "user", "content": "hi", "tags": ("a", "b")}]
    with pytest.raises(BackendFailure):
        await session.add_items(given)
    [decision] = await session.reconcile()
    assert decision.outcome is Outcome.UNCHANGED
    replayed = inner.given[-1]
    assert replayed == given
    assert isinstance(replayed[0]["tags"], tuple)


async def test_another_wrapper_replays_the_journals_copy(tmp_path: Path) -> None:
    """Another wrapper (another process) has only the journal's copy: equal as JSON, so
    the store holds the same thing."""
    inner = RecordingSession()
    journal = tmp_path / "j.db"
    session = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    inner.reject_next = True
    with pytest.raises(BackendFailure):
        await session.add_items([{"role": "user", "content": "hi", "score": float("inf")}])
    other = ReconcilingSession(inner, config=ReconcileConfig(journal=journal))
    [decision] = await other.reconcile()
    assert decision.outcome is Outcome.UNCHANGED
    assert inner.items[-1]["score"] == float("inf")
