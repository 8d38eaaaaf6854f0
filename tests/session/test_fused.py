"""A Redis journal and a revisioned Redis store on one server: the intent and the
compare-and-swap append in one script, with the same outcomes as the two-step way."""

from __future__ import annotations

import ast
import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._core.records import Action, Outcome
from agents_reconcile._session.fused import fused_append
from agents_reconcile.errors import ConfigurationError, ContinuationDenied, JournalUnavailable
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


async def test_an_intent_opened_by_the_script_is_cleared_where_it_lives_without_a_lookup(
    place: Place,
) -> None:
    """The journal remembers the session of an intent the script recorded, as ``open_intent``
    does: clearing it after the append asks the server for no lookup of its session."""
    store = place.store()
    session = place.wrapped(store)
    await run(session, "warm")
    lookups: list[str] = []
    original = place.journal._link.command

    async def spy(operation: str, *args: Any) -> object:
        lookups.append(operation)
        return await original(operation, *args)

    place.journal._link.command = spy  # type: ignore[method-assign]
    calls = counting(place.journal)
    await run(session, "one")
    assert calls == {"open_intent": 0, "open_and_append": 2}
    assert "lookup" not in lookups
    assert await session.pending() == []


def test_the_fused_append_reaches_no_private_part_of_the_journal() -> None:
    """``redis/fused.py`` speaks to the journal through its public methods alone: it reads no
    attribute and imports no name that is private by its leading underscore."""
    import agents_reconcile._backends.redis.fused as fused

    tree = ast.parse(Path(fused.__file__).read_text("utf-8"))
    private = [
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    private += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []


def test_the_postgres_fused_append_reaches_no_private_part_of_the_journal_or_the_store() -> None:
    """``postgres/fused.py`` reaches the journal through its connection object
    (``journal.database``) and the store through its public methods: it reads no attribute of
    either that is private by its leading underscore."""
    import agents_reconcile._backends.postgres.fused as fused

    tree = ast.parse(Path(fused.__file__).read_text("utf-8"))
    private = [
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("journal", "store")
        and node.attr.startswith("_")
    ]
    assert private == []


def test_an_opening_beside_other_keys_is_refused_by_a_cluster_journal() -> None:
    """On a Redis Cluster an intent id is claimed before it is recorded, which one script
    cannot do: the cluster journal refuses a one-script opening, naming why, before sending
    anything."""
    from agents_reconcile._backends.journal import IntentState
    from agents_reconcile._backends.redis.journal import RedisClusterJournal
    from agents_reconcile._core.ownership import current_owner

    from ..support.journal_support import make_intent

    journal = RedisClusterJournal.from_url("redis+cluster://127.0.0.1:7101")
    opening = journal.open_by_script(
        "open_and_append",
        make_intent("i-1"),
        state=IntentState.IN_FLIGHT,
        owner=current_owner(),
        args=[],
        keys=[],
        answer=lambda reply: (reply, False),
    )
    with pytest.raises(ConfigurationError, match="claimed first"):
        asyncio.run(opening)


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
