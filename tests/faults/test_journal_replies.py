"""A journal's reply lost after it recorded an intent: the retried call finds the intent
already there and the append goes on once; nothing is replayed, appended twice or denied."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from agents_reconcile import MemoryJournal, ReconcileConfig, ReconcilingSession, SQLiteJournal
from agents_reconcile.errors import JournalUnavailable
from agents_reconcile.testing import FaultProxy

from ..support.servers import postgres_url, redis_url
from .test_servers import via

pytestmark = pytest.mark.faults


class LosesFirstReply:
    """Mixed into an embedded journal: the first ``open_intent`` after ``arm()`` does its work
    and then fails as a dropped connection would, after the commit."""

    armed = False

    def arm(self) -> None:
        self.armed = True

    async def open_intent(self, *args: Any, **kwargs: Any) -> Any:
        opened = await super().open_intent(*args, **kwargs)  # type: ignore[misc]
        if self.armed:
            self.armed = False
            raise JournalUnavailable("connection lost after the intent was recorded")
        return opened


class LossySQLiteJournal(LosesFirstReply, SQLiteJournal):
    pass


class LossyMemoryJournal(LosesFirstReply, MemoryJournal):
    pass


Journal = tuple[Any, Callable[[], None]]


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def lossy_journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Journal]:
    """A journal and a function that makes the reply to its next intent opening get lost."""
    if request.param == "memory":
        memory = LossyMemoryJournal()
        yield memory, memory.arm
        return
    if request.param == "sqlite":
        embedded = LossySQLiteJournal(tmp_path / "journal.db")
        yield embedded, embedded.arm
        return
    url = redis_url() if request.param == "redis" else postgres_url()
    target = urlsplit(url)
    proxy = await FaultProxy(target.hostname or "127.0.0.1", target.port or 0).start()
    namespace = f"lr{uuid.uuid4().hex[:12]}"
    journal: Any
    if request.param == "redis":
        from agents_reconcile._backends.redis.journal import RedisJournal

        journal = RedisJournal.from_url(via(url, proxy.port), prefix=namespace)
    else:
        from agents_reconcile._backends.postgres.journal import PostgresJournal

        journal = PostgresJournal.from_url(via(url, proxy.port), schema=namespace)

    opening = journal.open_intent
    plan: list[bool] = []

    async def open_intent(*args: Any, **kwargs: Any) -> Any:
        # The proxy loses the reply to the very next request: the one that opens the intent.
        if plan:
            plan.clear()
            proxy.lose_next_reply()
        return await opening(*args, **kwargs)

    journal.open_intent = open_intent
    try:
        yield journal, lambda: plan.append(True)
        assert proxy.lost_replies == 1
    finally:
        await journal.drop()
        await journal.close()
        await proxy.close()


def agent() -> Agent[Any]:
    return Agent(
        name="assistant",
        model=ScriptedModel([[assistant_message("one")], [assistant_message("two")]]),
    )


@pytest.mark.parametrize(
    "config",
    [{}, {"merge_retried_input": False}, {"on_unchanged": "fail"}],
    ids=["default", "no-merge", "operator"],
)
async def test_a_lost_reply_to_an_intent_opening_neither_duplicates_nor_replays(
    lossy_journal: Journal, config: dict[str, Any], tmp_path: Path
) -> None:
    """The second run's input save meets a lost journal reply: the run completes, its input is
    stored once, and no decision (no replay, no denial) is recorded."""
    journal, lose_next = lossy_journal
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal, **config)
    )
    scripted = agent()
    await Runner.run(scripted, "first", session=session, run_config=session.run_config())
    lose_next()
    result = await Runner.run(scripted, "second", session=session, run_config=session.run_config())
    assert result.final_output == "two"
    stored = await SQLiteSession("s", tmp_path / "chat.db").get_items()
    assert [item.get("content") for item in stored if item.get("role") == "user"] == [
        "first",
        "second",
    ]
    assert len(stored) == 4
    assert await session.decisions() == []
    assert await session.pending() == []
