"""Conformance suite for revisioned stores: every implementation, the same contract.

Each store is a full SDK ``Session`` and a ``RevisionedStore``: an append is a compare-and-swap
on the head revision that records its write id atomically with the items.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agents_reconcile.errors import RevisionConflict
from agents_reconcile.revision import RevisionedStore, is_revisioned
from agents_reconcile.stores import MemoryRevisionedSession, RevisionedSQLiteSession

from .servers import postgres_url, redis_url

Opener = Callable[[str], Awaitable[Any]]


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.memory),
        pytest.param("sqlite", marks=pytest.mark.sqlite),
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens store objects on one backend (a namespace of their own on a server): two objects
    with the same session id are two workers on the same data."""
    opened: list[Any] = []
    shared: dict[str, Any] = {}
    namespace = f"t{uuid.uuid4().hex[:16]}"
    kind = request.param
    url = redis_url() if kind == "redis" else postgres_url() if kind == "postgres" else ""

    async def open_store(session_id: str) -> Any:
        store: Any
        if kind == "memory":
            store = MemoryRevisionedSession(session_id, shared=shared)
        elif kind == "sqlite":
            store = RevisionedSQLiteSession(session_id, tmp_path / "store.db")
        elif kind == "redis":
            from agents_reconcile.stores.redis import RevisionedRedisSession

            store = RevisionedRedisSession.from_url(session_id, url, prefix=namespace)
        else:
            from agents_reconcile.stores.postgres import RevisionedPostgresSession

            store = RevisionedPostgresSession.from_url(session_id, url, schema=namespace)
        opened.append(store)
        return store

    yield open_store
    if opened and kind in ("redis", "postgres"):
        await opened[0].drop()
    for store in opened:
        closer = getattr(store, "close", None)
        if closer is not None:
            await closer()


async def test_is_a_session_and_revisioned(opener: Opener) -> None:
    store = await opener("s")
    assert is_revisioned(store) and isinstance(store, RevisionedStore)
    for name in ("get_items", "add_items", "pop_item", "clear_session"):
        assert callable(getattr(store, name))
    assert store.session_id == "s"


async def test_a_new_session_is_empty_at_revision_zero(opener: Opener) -> None:
    store = await opener("s")
    assert await store.head() == 0
    assert await store.get_items() == []
    assert await store.get_items(limit=3) == []
    assert await store.pop_item() is None
    assert await store.find_write("nothing") is None
    assert await store.writes_after(0) == []


async def test_items_round_trip_in_order_and_limit_reads_the_tail(opener: Opener) -> None:
    store = await opener("s")
    await store.add_items([item("a"), item("b", "assistant")])
    await store.add_items(
        [item("c"), {"type": "function_call_output", "call_id": "x", "output": "ok"}]
    )
    assert await store.get_items() == [
        item("a"),
        item("b", "assistant"),
        item("c"),
        {"type": "function_call_output", "call_id": "x", "output": "ok"},
    ]
    assert await store.get_items(limit=2) == [
        item("c"),
        {"type": "function_call_output", "call_id": "x", "output": "ok"},
    ]
    assert await store.get_items(limit=0) == []
    assert len(await store.get_items(limit=100)) == 4


async def test_every_write_moves_the_head_by_one_and_is_recorded(opener: Opener) -> None:
    store = await opener("s")
    await store.add_items([item("a"), item("b")])
    assert await store.head() == 1
    revision = await store.append_if([item("c")], expected=1, write_id="w-2", writer="me")
    assert revision == 2 and await store.head() == 2
    assert await store.pop_item() == item("c")
    await store.clear_session()
    assert await store.head() == 4
    writes = await store.writes_after(0)
    assert [w.revision for w in writes] == [1, 2, 3, 4]
    assert [w.kind for w in writes] == ["append", "append", "pop", "clear"]
    assert [w.count for w in writes] == [2, 1, 1, 2]
    assert writes[1].write_id == "w-2" and writes[1].writer == "me"
    assert await store.get_items() == []
    assert [w.revision for w in await store.writes_after(2, limit=1)] == [3]


async def test_find_write_returns_the_record(opener: Opener) -> None:
    store = await opener("s")
    await store.append_if([item("a")], expected=0, write_id="w-1", writer="worker-1")
    found = await store.find_write("w-1")
    assert found is not None
    assert (found.revision, found.write_id, found.writer, found.kind, found.count) == (
        1,
        "w-1",
        "worker-1",
        "append",
        1,
    )
    assert found.at > 0


async def test_append_if_on_another_head_writes_nothing(opener: Opener) -> None:
    store = await opener("s")
    await store.add_items([item("a")])
    with pytest.raises(RevisionConflict) as conflict:
        await store.append_if([item("b")], expected=0, write_id="w", writer="me")
    assert (conflict.value.expected, conflict.value.actual) == (0, 1)
    assert await store.get_items() == [item("a")]
    assert await store.find_write("w") is None
    assert await store.head() == 1


async def test_a_write_id_is_recorded_once(opener: Opener) -> None:
    store = await opener("s")
    await store.append_if([item("a")], expected=0, write_id="w", writer="me")
    with pytest.raises(RevisionConflict):
        await store.append_if([item("a")], expected=1, write_id="w", writer="me")
    assert await store.get_items() == [item("a")]
    assert await store.head() == 1


async def test_sessions_are_separate(opener: Opener) -> None:
    one, two = await opener("s1"), await opener("s2")
    await one.add_items([item("a")])
    await two.append_if([item("b")], expected=0, write_id="w", writer="me")
    assert await one.get_items() == [item("a")]
    assert await two.get_items() == [item("b")]
    assert await one.find_write("w") is None
    assert await one.head() == 1 and await two.head() == 1


async def test_two_workers_racing_on_one_head_commit_exactly_one(opener: Opener) -> None:
    """Many workers append against the same head at once: exactly one wins each round."""
    workers = [await opener("shared") for _ in range(4)]
    for round_number in range(5):
        head: int = await workers[0].head()

        async def attempt(
            index: int, store: Any, round_number: int = round_number, head_now: int = head
        ) -> bool:
            try:
                await store.append_if(
                    [item(f"r{round_number}-w{index}")],
                    expected=head_now,
                    write_id=f"r{round_number}-w{index}",
                    writer=f"w{index}",
                )
            except RevisionConflict:
                return False
            return True

        won = await asyncio.gather(*(attempt(i, s) for i, s in enumerate(workers)))
        assert sum(won) == 1
    assert await workers[0].head() == 5
    assert len(await workers[1].get_items()) == 5


async def test_works_with_the_sdk_runner_directly(opener: Opener) -> None:
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message

    store = await opener("runner")
    agent = Agent(name="a", model=ScriptedModel([[assistant_message("hello")]]))
    result = await Runner.run(agent, "hi", session=store)
    assert result.final_output == "hello"
    stored = await store.get_items()
    assert stored[0] == {"role": "user", "content": "hi"}
    assert len(stored) == 2
    assert await store.head() == 2
