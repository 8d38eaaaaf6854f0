"""Several writers, tasks and cancellations around one session: nothing duplicated, nothing
replayed that may still land, no wait without a bound."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_reconcile import (
    Action,
    ContinuationDenied,
    Outcome,
    Reason,
    ReconcileConfig,
    ReconcilingSession,
    SQLiteJournal,
)
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


async def texts(session: Any) -> list[str]:
    return [entry["content"] for entry in await session.get_items()]


async def test_another_workers_append_between_read_and_write_is_not_mistaken(
    tmp_path: Path,
) -> None:
    """A landed write whose acknowledgement was lost stays single even when another worker
    appended between this wrapper's read and its write (the tail is re-read before appending)."""
    config = ReconcileConfig(journal=tmp_path / "journal.db")
    raw = SQLiteSession("s", tmp_path / "chat.db")
    await raw.add_items([item("p"), item("x"), item("u", "assistant")])
    faulty = FaultInjectingSession(SQLiteSession("s", tmp_path / "chat.db"))
    first = ReconcilingSession(faulty, config=config)
    second = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    await first.get_items()
    await second.add_items([item("x")])
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await first.add_items([item("u", "assistant")])
    [decision] = await first.reconcile()
    assert decision.outcome is Outcome.COMMITTED
    assert await texts(raw) == ["p", "x", "u", "x", "u"]


class SlowReplyJournal(SQLiteJournal):
    """A journal whose replies take a round trip, as a networked journal's do."""

    async def open_intent(self, *args: Any, **kwargs: Any) -> Any:
        found = await super().open_intent(*args, **kwargs)
        await asyncio.sleep(0.05)
        return found


async def test_an_in_flight_append_is_never_taken_for_a_failed_one(tmp_path: Path) -> None:
    """While one wrapper's append is in flight, another wrapper in the same process waits for
    it instead of replaying it."""
    config = ReconcileConfig(journal=SlowReplyJournal(tmp_path / "journal.db"))
    first = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    second = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    await first.add_items([item("hello")])
    writing = asyncio.create_task(first.add_items([item("charge the card", "assistant")]))
    await asyncio.sleep(0.01)
    await second.get_items()
    await writing
    assert await texts(first) == ["hello", "charge the card"]
    assert await first.decisions() == []


async def test_a_hanging_replay_does_not_hold_the_caller(tmp_path: Path) -> None:
    """A cancelled caller gets control back while a hung replay goes on in the background;
    nobody else replays it meanwhile, and once it ends the next reconciliation settles it."""
    faulty = FaultInjectingSession(SQLiteSession("s", tmp_path / "chat.db"))
    config = ReconcileConfig(journal=tmp_path / "journal.db", in_flight_wait=0.2)
    session = ReconcilingSession(faulty, config=config)
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([item("hi")])
    faulty.plan(Fault.HANG)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(session.get_items(), timeout=0.3)
    other = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    with pytest.raises(ContinuationDenied) as denied:
        await other.get_items()
    assert denied.value.decision.reason is Reason.IN_FLIGHT_ELSEWHERE
    assert await texts(faulty.inner) == []


class GatedSession:
    """First append waits for a signal, second hangs: to line tasks up around the lock."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.session_id = inner, inner.session_id
        self.release_first = asyncio.Event()
        self.calls = 0

    async def get_items(self, limit: int | None = None) -> Any:
        return await self.inner.get_items(limit)

    async def add_items(self, items: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            await self.inner.add_items(items)
            await self.release_first.wait()
            return
        if self.calls == 2:
            await asyncio.Event().wait()
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


async def test_waiting_for_the_session_lock_is_always_bounded(tmp_path: Path) -> None:
    """A task queued behind a hung append of the same wrapper is denied (session_busy) after
    in_flight_wait instead of waiting for ever."""
    inner = GatedSession(SQLiteSession("s", tmp_path / "chat.db"))
    config = ReconcileConfig(journal=tmp_path / "journal.db", in_flight_wait=0.3)
    session = ReconcilingSession(inner, config=config)
    first = asyncio.create_task(session.add_items([item("a")]))
    await asyncio.sleep(0.05)
    hung = asyncio.create_task(session.add_items([item("b")]))
    await asyncio.sleep(0.05)
    inner.release_first.set()
    late = asyncio.create_task(session.add_items([item("c")]))
    with pytest.raises(ContinuationDenied) as denied:
        await asyncio.wait_for(late, timeout=3)
    assert denied.value.decision.reason is Reason.SESSION_BUSY
    await first
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung


async def test_an_intent_kept_only_in_memory_settled_elsewhere_is_dropped(
    tmp_path: Path,
) -> None:
    """An intent this object kept in memory (the journal failed) and that another wrapper then
    settled is dropped, not a permanent conflict."""
    from agents_reconcile.errors import JournalUnavailable

    class FlakyJournal(SQLiteJournal):
        fail_next_transition = False

        async def transition(self, *args: Any, **kwargs: Any) -> bool:
            if self.fail_next_transition:
                self.fail_next_transition = False
                raise JournalUnavailable("journal down for a moment")
            return await super().transition(*args, **kwargs)

    journal = FlakyJournal(tmp_path / "journal.db")
    faulty = FaultInjectingSession(SQLiteSession("s", tmp_path / "chat.db"))
    first = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
    faulty.plan(Fault.REJECT)
    journal.fail_next_transition = True
    with pytest.raises(BackendFailure) as raised:
        await first.add_items([item("hi")])
    assert any("this session object" in note for note in raised.value.__notes__)
    second = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    assert [d.action for d in await second.reconcile()] == [Action.REPLAYED]
    assert await first.reconcile() == []
    await first.add_items([item("again")])
    assert await texts(faulty.inner) == ["hi", "again"]


class CountingReads:
    """Counts the inner session's reads."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.session_id, self.reads = inner, inner.session_id, 0

    async def get_items(self, limit: int | None = None) -> Any:
        self.reads += 1
        return await self.inner.get_items(limit)

    async def add_items(self, items: Any) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> Any:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


async def test_appends_reread_the_tail_only_when_someone_else_wrote(tmp_path: Path) -> None:
    """A write-ahead wrapper appends from memory while the journal counts no other write, and
    re-reads the tail once after another wrapper wrote."""
    config = ReconcileConfig(journal=tmp_path / "journal.db")
    counting = CountingReads(SQLiteSession("s", tmp_path / "chat.db"))
    first = ReconcilingSession(counting, config=config)
    await first.get_items()
    for n in range(5):
        await first.add_items([item(f"m{n}")])
    assert counting.reads == 1
    other = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    await other.add_items([item("elsewhere")])
    await first.add_items([item("after")])
    assert counting.reads == 2
    assert (await texts(counting.inner))[-2:] == ["elsewhere", "after"]


async def test_verify_tail_rereads_before_every_append(tmp_path: Path) -> None:
    """With verify_tail, a writer that bypasses the journal cannot make a landed write look
    missing: the tail is read before each append."""
    counting = CountingReads(SQLiteSession("s", tmp_path / "chat.db"))
    faulty = FaultInjectingSession(counting)
    config = ReconcileConfig(journal=tmp_path / "journal.db", verify_tail=True)
    session = ReconcilingSession(faulty, config=config)
    await session.add_items([item("x"), item("u", "assistant")])
    await counting.inner.add_items([item("x")])  # bypasses every wrapper
    faulty.plan(Fault.LOST_ACK)
    with pytest.raises(BackendFailure):
        await session.add_items([item("u", "assistant")])
    [decision] = await session.reconcile()
    assert decision.outcome is Outcome.COMMITTED
    assert await texts(counting.inner) == ["x", "u", "x", "u"]


class SlowFirstOpening(SQLiteJournal):
    """A journal whose first opening answers late (a loaded machine, a slow journal)."""

    slow = True

    async def open_intent(self, *args: Any, **kwargs: Any) -> Any:
        found = await super().open_intent(*args, **kwargs)
        if self.slow:
            self.slow = False
            await asyncio.sleep(0.2)
        return found


async def test_one_slow_attempt_refused_by_a_stale_memory_is_retried_not_denied(
    tmp_path: Path,
) -> None:
    """An append whose first attempt took longer than in_flight_wait and was refused (another
    wrapper wrote after the tail this one remembered) builds its intent again instead of
    being denied session_busy: a slow attempt is not a session held by someone else."""
    journal = SlowFirstOpening(tmp_path / "journal.db")
    config = ReconcileConfig(journal=journal, in_flight_wait=0.05)
    first = ReconcilingSession(SQLiteSession("s", tmp_path / "chat.db"), config=config)
    second = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=tmp_path / "journal.db"),
    )
    journal.slow = False
    await first.add_items([item("a")])
    await second.add_items([item("b")])  # the first wrapper's memory of the tail is stale now
    journal.slow = True
    await first.add_items([item("c")])
    assert await texts(first) == ["a", "b", "c"]
