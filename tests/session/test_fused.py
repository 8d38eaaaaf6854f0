"""A Redis journal and a revisioned Redis store on one server: the intent and the
compare-and-swap append in one script, with the same outcomes as the two-step way."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.records import Action, Outcome
from agents_reconcile._session.fused import fused_append
from agents_reconcile.errors import ContinuationDenied, JournalUnavailable
from agents_reconcile.testing import FaultInjectingSession

from ..support.fused_support import killed_child, left_both_or_neither, text
from ..support.servers import redis_url

pytestmark = pytest.mark.redis


class Place:
    def __init__(self) -> None:
        from agents_reconcile._backends.redis.journal import RedisJournal

        self.url = redis_url()
        tag = uuid.uuid4().hex[:10]
        self.store_prefix, self.session_id = f"fs{tag}", f"chat-{tag}"
        self.journal = RedisJournal.from_url(self.url, prefix=f"fj{tag}")
        self.opened: list[Any] = []

    def store(self) -> Any:
        from agents_reconcile._backends.redis.store import RevisionedRedisSession

        store = RevisionedRedisSession.from_url(self.session_id, self.url, prefix=self.store_prefix)
        self.opened.append(store)
        return store

    def wrapped(self, inner: Any) -> ReconcilingSession:
        return ReconcilingSession(inner, config=ReconcileConfig(journal=self.journal))

    async def close(self) -> None:
        await self.journal.drop()
        await self.journal.close()
        if self.opened:
            await self.opened[0].drop()
        for store in self.opened:
            await store.close()


@pytest.fixture
async def place() -> AsyncIterator[Place]:
    found = Place()
    yield found
    await found.close()


def counting(journal: Any) -> dict[str, int]:
    """How often each opening script is sent to the server."""
    calls = {"open_intent": 0, "open_and_append": 0}
    original = journal._link.script

    async def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in calls:
            calls[name] += 1
        return await original(name, *args, **kwargs)

    journal._link.script = spy
    return calls


async def run(session: ReconcilingSession, prompt: str) -> None:
    agent = Agent(name="a", model=ScriptedModel([[assistant_message(f"re: {prompt}")]]))
    await Runner.run(
        agent, prompt, session=session, run_config=session.run_config(), hooks=session.hooks()
    )


async def test_each_append_is_one_script(place: Place) -> None:
    store = place.store()
    assert await fused_append(place.journal, store) is not None
    calls = counting(place.journal)
    session = place.wrapped(store)
    for prompt in ("one", "two"):
        await run(session, prompt)
    assert calls == {"open_intent": 0, "open_and_append": 4}
    assert text(await store.get_items()) == ["one", "re: one", "two", "re: two"]
    assert await session.pending() == []
    writes = await store.writes_after(0)
    assert [w.revision for w in writes] == [1, 2, 3, 4]
    assert await place.journal.decisions(session_id=place.session_id) == []


async def test_a_wrapped_store_goes_the_two_step_way(place: Place) -> None:
    faulty = FaultInjectingSession(place.store())
    assert await fused_append(place.journal, faulty) is None
    calls = counting(place.journal)
    await run(place.wrapped(faulty), "one")
    assert calls == {"open_intent": 2, "open_and_append": 0}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "two-step"])
async def test_another_writer_in_between_is_judged_alike(place: Place, fused: bool) -> None:
    """Another writer appends after this wrapper last saw the head: the store refuses, the
    record of writes shows an extension, and the default policy denies it, either way."""
    store = place.store()
    inner: Any = store if fused else FaultInjectingSession(store)
    session = place.wrapped(inner)
    await run(session, "one")
    await place.store().add_items([{"role": "user", "content": "someone else"}])
    with pytest.raises(ContinuationDenied) as denied:
        await session.add_items([{"role": "user", "content": "two"}])
    assert denied.value.decision.reason.value == "extended_by_others"
    assert text(await store.get_items()) == ["one", "re: one", "someone else"]


async def test_a_lost_reply_is_judged_committed(place: Place) -> None:
    """The script ran, its reply was lost: the intent is pending, its write is in the record
    of writes, and reconciling settles it as committed without writing it again."""
    store = place.store()
    session = place.wrapped(store)
    journal = place.journal
    original = journal._link.script

    async def lost(name: str, *args: Any, **kwargs: Any) -> Any:
        reply = await original(name, *args, **kwargs)
        if name == "open_and_append":
            raise JournalUnavailable("injected: the reply was lost")
        return reply

    journal._link.script = lost  # type: ignore[method-assign]
    with pytest.raises(JournalUnavailable):
        await session.add_items([{"role": "user", "content": "one"}])
    journal._link.script = original  # type: ignore[method-assign]
    [pending] = await session.pending()
    [decision] = await session.reconcile()
    assert (decision.outcome, decision.action) == (Outcome.COMMITTED, Action.SETTLED)
    assert decision.intent_id == pending.intent_id
    assert text(await store.get_items()) == ["one"]
    await session.add_items([{"role": "user", "content": "two"}])
    assert text(await store.get_items()) == ["one", "two"]


CHILD = """
import asyncio, sys
from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core import crashpoints
from agents_reconcile._backends.redis.journal import RedisJournal
from agents_reconcile._backends.redis.store import RevisionedRedisSession

url, session_id, store_prefix, journal_prefix, point = sys.argv[1:6]
crashpoints.arm(crashpoints.CrashPoint(point))
store = RevisionedRedisSession.from_url(session_id, url, prefix=store_prefix)
journal = RedisJournal.from_url(url, prefix=journal_prefix)
session = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
asyncio.run(session.add_items([{"role": "user", "content": "one"}]))
"""


@pytest.mark.parametrize(
    ("point", "outcome"),
    [("before_intent_recorded", None), ("before_intent_cleared", Outcome.COMMITTED)],
)
async def test_sigkill_around_the_script_leaves_both_or_neither(
    place: Place, point: str, outcome: Outcome | None
) -> None:
    await killed_child(
        CHILD, place.url, place.session_id, place.store_prefix, place.journal.prefix, point
    )
    store = place.store()
    await left_both_or_neither(place.wrapped(store), store, outcome)
