"""A cancelled request (a client that disconnects) never leaves a lie behind: an intent whose
opening or claim landed after its caller was cancelled is cleared or given back, and a store
write that lands after the cancellation is waited out before its intent is freed, so nothing
is replayed on top of it. On the real runner, over every journal, with a bare twin where the
bare session's result is the measure."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._selftest.scenario import item_name
from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

from ..support.backends import Place, registered

JOURNALS = [p for p in registered("journal") if p.values[0].name != "memory"]


@pytest.fixture(params=JOURNALS)
async def place(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Place]:
    found = Place(request.param, tmp_path, "journal")
    yield found
    await found.cleanup()


class SlowReplies:
    """A journal whose replies to the calls named in ``slow`` arrive ``delay`` seconds after
    the call landed (a reply on its way, a lock held by another connection)."""

    def __init__(self, journal: Any, slow: set[str], delay: float = 0.3) -> None:
        self._journal = journal
        self._slow = slow
        self._delay = delay
        self.landed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._journal, name)
        if name not in self._slow:
            return attribute

        async def slow(*args: Any, **kwargs: Any) -> Any:
            answer = await attribute(*args, **kwargs)
            if kwargs.get("state") in (IntentState.IN_FLIGHT, IntentState.RECONCILING):
                self.landed.set()
                await asyncio.sleep(self._delay)
            return answer

        return slow


def agent(*texts: str) -> Agent[Any]:
    steps = [[assistant_message(text)] for text in texts]
    return Agent(name="assistant", model=ScriptedModel(steps))


async def history(store: Any) -> list[str]:
    return [item_name(item) for item in await store.get_items()]


async def cancelled(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_a_run_cancelled_while_its_intent_is_opened_leaves_nothing_behind(
    place: Place, tmp_path: Path, streamed: bool
) -> None:
    """The request is cancelled after the journal recorded the input's intent, before its
    reply came back: the append never started, so the intent is cleared once the opening
    ends, not left in flight under this live process (holding every other worker back) and
    not replayed by the session's next use."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    journal = SlowReplies(place.journal(), {"open_intent"})
    session = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
    first = agent("never")
    if streamed:

        async def consume() -> None:
            result = Runner.run_streamed(
                first, "hi", session=session, run_config=session.run_config()
            )
            async for _ in result.stream_events():
                pass

        task = asyncio.ensure_future(consume())
    else:
        task = asyncio.ensure_future(
            Runner.run(first, "hi", session=session, run_config=session.run_config())
        )
    await asyncio.wait_for(journal.landed.wait(), 10)
    await cancelled(task)
    await asyncio.sleep(0.5)  # the opening's reply arrives; its intent is cleared
    assert await session.journal.pending("s1") == []
    assert await history(store) == []
    await Runner.run(agent("ok"), "next", session=session, run_config=session.run_config())
    assert await history(store) == ["user:next", "assistant:ok"]


async def test_a_claim_that_lands_after_its_caller_was_cancelled_is_given_back(
    place: Place, tmp_path: Path
) -> None:
    """A settlement's claim (a compare-and-set in the journal) lands after its caller was
    cancelled: the intent goes back to failed, for the next judge, instead of staying
    'reconciling' under a live process that will never settle it."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    faulty = FaultInjectingSession(store)
    journal = SlowReplies(place.journal(), set())
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=journal))
    faulty.plan(Fault.REJECT)
    with pytest.raises(BackendFailure):
        await session.add_items([{"role": "user", "content": "hi"}])
    journal._slow.add("transition")
    task = asyncio.ensure_future(session.get_items())
    await asyncio.wait_for(journal.landed.wait(), 10)
    await cancelled(task)
    await asyncio.sleep(0.5)
    [entry] = await session.journal.pending("s1")
    assert entry.state is IntentState.FAILED
    journal._slow.clear()
    assert [item["content"] for item in await session.get_items()] == ["hi"]
    assert await session.journal.pending("s1") == []


class LateLanding(SQLiteSession):
    """A store whose write reaches the server after its caller was cancelled, as a network
    driver's request already sent does (the SDK's SQLite sessions shield their own)."""

    landing: ClassVar[set[asyncio.Future[None]]] = set()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = asyncio.Event()

    async def add_items(self, items: list[Any]) -> None:
        write = asyncio.ensure_future(self._land(items))
        self.landing.add(write)
        write.add_done_callback(self.landing.discard)
        self.started.set()
        await asyncio.wait({write})  # a cancelled caller does not stop the request

    async def _land(self, items: list[Any]) -> None:
        await asyncio.sleep(0.2)
        await super().add_items(items)


@pytest.mark.parametrize("wrapped", [True, False], ids=["wrapped", "bare"])
async def test_a_write_that_lands_after_the_cancellation_is_stored_once(
    place: Place, tmp_path: Path, wrapped: bool
) -> None:
    """The client disconnects while the input's write is on its way; it lands anyway. The
    client's retry right after must not judge it missing and replay it (it would then be
    stored twice, worse than the bare session, which stores it once)."""
    store = LateLanding("s1", tmp_path / "chat.db")
    session: Any = store
    run_config = None
    if wrapped:
        session = ReconcilingSession(store, config=ReconcileConfig(journal=place.journal()))
        run_config = session.run_config()
    task = asyncio.ensure_future(
        Runner.run(agent("never"), "pay 5", session=session, run_config=run_config)
    )
    await asyncio.wait_for(store.started.wait(), 10)
    await cancelled(task)
    await Runner.run(agent("ok"), "again", session=session, run_config=run_config)
    await asyncio.gather(*LateLanding.landing)
    stored = await history(store)
    assert stored.count("user:pay 5") == 1
    assert stored[-1] == "assistant:ok"
    if wrapped:
        assert stored == ["user:pay 5", "user:again", "assistant:ok"]
        assert await session.pending() == []


class Probe:
    """A call that records how far it got."""

    def __init__(self) -> None:
        self.started = False
        self.finished = False

    async def at_once(self) -> str:
        self.started = self.finished = True
        return "answer"

    async def slowly(self, fail: bool = False) -> str:
        self.started = True
        await asyncio.sleep(0.05)
        self.finished = True
        if fail:
            raise ValueError("the call failed after it suspended")
        return "answer"


@pytest.mark.parametrize("eager", [False, True], ids=["task", "eager"])
async def test_a_call_outliving_its_caller_answers_as_if_awaited(eager: bool) -> None:
    """Started eagerly or in a task of its own, a call answers what it returns and raises what
    it raises, whether it answers at once or after suspending."""
    from agents_reconcile._core.cancellation import outliving_cancellation
    from agents_reconcile._session.claims import InFlight

    async def nothing(_: Any) -> None:
        raise AssertionError("nobody was cancelled")

    probe = Probe()
    assert (
        await outliving_cancellation(probe.at_once(), InFlight(), nothing, eager=eager) == "answer"
    )
    assert (
        await outliving_cancellation(probe.slowly(), InFlight(), nothing, eager=eager) == "answer"
    )
    with pytest.raises(ValueError, match="after it suspended"):
        await outliving_cancellation(probe.slowly(fail=True), InFlight(), nothing, eager=eager)


@pytest.mark.parametrize("eager", [False, True], ids=["task", "eager"])
async def test_a_call_outlives_its_cancelled_caller_and_is_put_right_after(eager: bool) -> None:
    """The caller is cancelled while the call is suspended: it gets its cancellation at once;
    the call runs to its end, and what comes after it is given the call's outcome."""
    from agents_reconcile._core.cancellation import outliving_cancellation
    from agents_reconcile._session.claims import InFlight

    probe = Probe()
    after: list[str] = []

    async def afterwards(call: asyncio.Future[str]) -> None:
        after.append(call.result())

    in_flight = InFlight()
    caller = asyncio.ensure_future(
        outliving_cancellation(probe.slowly(), in_flight, afterwards, eager=eager)
    )
    await asyncio.sleep(0.01)
    await cancelled(caller)
    assert probe.started and not probe.finished
    await asyncio.gather(*in_flight.background)
    assert probe.finished and after == ["answer"]


async def test_a_call_in_a_task_of_its_own_costs_few_turns_of_the_loop() -> None:
    """A call that answers at once (a store's append that does not suspend) costs no turn of
    the loop where asyncio starts tasks eagerly (3.12 on), else the two its task needs (its
    first step, then the caller's); ``asyncio.shield`` around it took one more."""
    from agents_reconcile._core.cancellation import outliving_cancellation
    from agents_reconcile._session.claims import InFlight

    async def nothing(_: Any) -> None:
        raise AssertionError("nobody was cancelled")

    loop = asyncio.get_running_loop()
    turns = 0
    ticking = True

    def tick() -> None:
        nonlocal turns
        if ticking:
            turns += 1
            loop.call_soon(tick)

    loop.call_soon(tick)
    await asyncio.sleep(0)  # the ticker runs once per turn from here
    before = turns
    assert await outliving_cancellation(Probe().at_once(), InFlight(), nothing) == "answer"
    used = turns - before
    ticking = False
    assert used <= (0 if sys.version_info >= (3, 12) else 2)


@pytest.mark.parametrize("fast", [True, False], ids=["at_once", "suspending"])
async def test_a_call_runs_as_a_task_of_its_own(fast: bool) -> None:
    """Whether it answers at once or suspends, the call runs as a task of its own from its
    first step, never as its caller: what it arms against its own task (a timeout) reaches
    it and not the caller."""
    from agents_reconcile._core.cancellation import outliving_cancellation
    from agents_reconcile._session.claims import InFlight

    async def nothing(_: Any) -> None:
        raise AssertionError("nobody was cancelled")

    caller = asyncio.current_task()

    async def call() -> asyncio.Task[Any] | None:
        running = asyncio.current_task()
        if not fast:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        return running

    if fast:
        running = await outliving_cancellation(call(), InFlight(), nothing)
        assert running is not None and running is not caller
    else:
        with pytest.raises(TimeoutError):
            await outliving_cancellation(call(), InFlight(), nothing)
        assert caller is not None and not caller.cancelling()


async def test_a_call_whose_caller_is_already_cancelled_never_starts() -> None:
    """A cancellation already on its way when the call would start: nothing starts, so
    nothing lands that would need putting right, and what comes after hears of it."""
    from agents_reconcile._core.cancellation import outliving_cancellation
    from agents_reconcile._session.claims import InFlight

    probe = Probe()
    in_flight = InFlight()
    heard: list[bool] = []

    async def afterwards(call: asyncio.Future[str]) -> None:
        heard.append(call.cancelled())

    async def caller() -> None:
        current = asyncio.current_task()
        assert current is not None
        current.cancel()
        await outliving_cancellation(probe.slowly(), in_flight, afterwards)

    await cancelled_by_itself(asyncio.ensure_future(caller()))
    await asyncio.gather(*in_flight.background)
    assert not probe.started and heard == [True]


async def cancelled_by_itself(task: asyncio.Future[Any]) -> None:
    with pytest.raises(asyncio.CancelledError):
        await task
