"""Pruning the Redis journal, looked at behind its back: the floor is a key of its own that a
new journal object reads, every script that counts a write stamps the count, pruning removes
what it prunes from every key that held it, a write or an opening that comes between finding
what is due and removing it keeps what it needs, and a limit resumes where the last call
stopped. What every pruning journal does is in the conformance contracts
(``test_conformance.py -k prun``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from blake3 import blake3

from agents_reconcile import ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.aside import RawIntent, SetAside
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._backends.redis.journal import RedisJournal
from agents_reconcile._backends.redis.layout import INTENTS, unpacked_row
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action, BackendIdentity
from agents_reconcile._core.retention import Retention
from agents_reconcile._session.fused import fused_append

from ..support.journal_support import BACKEND, make_decision, make_effect, make_intent
from ..support.servers import redis_url

pytestmark = pytest.mark.redis

STAMP = ""
"""The field of a session's counts stamped with when one was last raised."""
HOUR = 3600.0
DAY = 86_400.0
IDLE_NOW = Retention(decisions=None, receipts=None, idle_sessions=0)
IDLE_HOUR = Retention(decisions=None, receipts=None, idle_sessions=timedelta(hours=1))
DECISIONS_DAY = Retention(decisions=timedelta(days=1), receipts=None, idle_sessions=None)


def session_key(prefix: str, session_id: str, name: str) -> str:
    """A session's key as the journal lays it out (hash tag = blake3 of the session id)."""
    return f"{prefix}:{{{blake3(session_id.encode()).hexdigest()[:32]}}}:{name}"


@pytest.fixture
def url() -> str:
    return redis_url()


@pytest.fixture
def prefix() -> str:
    return f"test-retention-{uuid.uuid4().hex}"


@pytest.fixture
async def raw(url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client on the test server, for looking behind the journal's back."""
    client = aioredis.Redis.from_url(url)
    yield client
    await client.aclose()


@pytest.fixture
async def journals(url: str, prefix: str) -> AsyncIterator[list[RedisJournal]]:
    made: list[RedisJournal] = []
    yield made
    if made:
        await made[0].drop()
    for journal in made:
        await journal.close()


@pytest.fixture
def worker(journals: list[RedisJournal], url: str, prefix: str) -> Iterator[Any]:
    """Makes a journal object on the shared prefix, as another worker (or a restart) would."""

    def make() -> RedisJournal:
        journal = RedisJournal.from_url(url, prefix=prefix)
        journals.append(journal)
        return journal

    yield make


async def server_time(raw: aioredis.Redis) -> float:
    seconds, micros = await raw.time()
    return seconds + micros / 1e6


async def prefix_keys(raw: aioredis.Redis, prefix: str) -> set[str]:
    return {key.decode() async for key in raw.scan_iter(match=f"{prefix}:*")}


def before_script(
    journal: RedisJournal, name: str, meddle: Callable[[], Awaitable[object]]
) -> list[int]:
    """Has ``meddle`` run once, right before the journal's next script ``name``: between what
    pruning found and the step that removes it. Returns a list that notes each run."""
    ran: list[int] = []
    original = journal._link.script

    async def spy(script: str, *args: Any, **kwargs: Any) -> object:
        if script == name and not ran:
            ran.append(1)
            await meddle()
        return await original(script, *args, **kwargs)

    journal._link.script = spy  # type: ignore[method-assign]
    return ran


async def age(raw: aioredis.Redis, prefix: str, session_id: str, seconds: float) -> None:
    """Stamps the session's counts ``seconds`` before the server's time."""
    counts = session_key(prefix, session_id, "write_count")
    await raw.hset(counts, STAMP, repr(await server_time(raw) - seconds))


# -- the floor and the stamps ----------------------------------------------------------------


async def test_the_floor_is_a_key_a_new_journal_object_reads(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """Pruned counts raise ``floor`` to the highest of them; another journal object (a restart)
    reads a session without a count as the floor and counts its next write above it."""
    journal = worker()
    for _ in range(5):
        await journal.count_write("five", BACKEND)
    await journal.count_write("one", BACKEND)
    assert (await journal.retention.prune(IDLE_NOW)).write_counts == 2
    assert await raw.get(f"{prefix}:floor") == b"5"

    reopened = worker()
    assert await reopened.write_count("five", BACKEND) == 5
    assert await reopened.write_count("never", BACKEND) == 5
    assert await reopened.count_write("one", BACKEND) == 6
    opened = await reopened.open_intent(
        make_intent("i-1", session_id="fresh"), state=IntentState.IN_FLIGHT, owner=current_owner()
    )
    assert opened.recorded and opened.write_count == 5
    row = unpacked_row(await raw.hget(session_key(prefix, "fresh", INTENTS), "i-1"))
    assert row is not None and row["fence"] == "5"


async def test_every_script_that_counts_a_write_stamps_it(
    worker: Any, raw: aioredis.Redis, prefix: str, url: str
) -> None:
    """record, open_intent (and its clearing), discard, settle, count_write, set_aside and the
    fused open_and_append each stamp the session's counts with the server's time."""
    journal = worker()
    owner = current_owner()
    counts = session_key(prefix, "session-a", "write_count")

    async def stamped(step: Callable[[], Awaitable[object]]) -> None:
        await raw.hdel(counts, STAMP)
        before = await server_time(raw)
        await step()
        stamp = await raw.hget(counts, STAMP)
        assert stamp is not None and before <= float(stamp) <= await server_time(raw)

    intent = make_intent("i-1")
    await stamped(lambda: journal.record(intent, state=IntentState.FAILED, owner=owner))
    await stamped(lambda: journal.settle(make_decision(intent)))
    await stamped(lambda: journal.count_write("session-a", BACKEND))
    await stamped(
        lambda: journal.open_intent(make_intent("i-2"), state=IntentState.IN_FLIGHT, owner=owner)
    )
    await stamped(
        lambda: journal.open_intent(
            make_intent("i-3"), state=IntentState.IN_FLIGHT, owner=owner, clearing="i-2"
        )
    )
    await stamped(lambda: journal.discard("i-3"))

    async def set_aside() -> None:
        await journal.record(make_intent("i-4"), state=IntentState.FAILED, owner=owner)
        found = await journal.aside.raw("i-4")
        assert found is not None
        await journal.aside.set_aside(found, *aside_of(found, time.time()))

    await stamped(set_aside)

    # The fused append, through a wrapped session on a store on the same server.
    from agents_reconcile._backends.redis.store import RevisionedRedisSession

    store = RevisionedRedisSession.from_url("chat", url, prefix=f"{prefix}-store")
    try:
        assert await fused_append(journal, store) is not None
        session = ReconcilingSession(store, config=ReconcileConfig(journal=journal))
        agent = Agent(name="a", model=ScriptedModel([[assistant_message("re")]]))
        chat = session_key(prefix, "chat", "write_count")
        before = await server_time(raw)
        await Runner.run(
            agent, "hi", session=session, run_config=session.run_config(), hooks=session.hooks()
        )
        stamp = await raw.hget(chat, STAMP)
        assert stamp is not None and before <= float(stamp) <= await server_time(raw)
    finally:
        await store.drop()
        await store.close()


def aside_of(found: RawIntent, at: float) -> tuple[SetAside, Any]:
    from agents_reconcile.conformance._aside import _aside

    return _aside(found, at)


# -- what pruning removes --------------------------------------------------------------------


async def test_pruning_removes_decisions_from_every_key_that_held_them(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """A pruned decision leaves the decisions, the log, its session's list and its intent's
    list; an intent left without a decision leaves ``settled``. A denial of an unresolved
    intent stays everywhere."""
    journal = worker()
    owner = current_owner()
    old = time.time() - 3 * DAY
    settled = make_intent("settled")
    await journal.record(settled, state=IntentState.FAILED, owner=owner)
    await journal.note(make_decision(settled, action=Action.DENIED, decided_at=old))
    await journal.settle(make_decision(settled, decided_at=old))
    denied = make_intent("denied", session_id="session-b")
    await journal.record(denied, state=IntentState.FAILED, owner=owner)
    await journal.note(make_decision(denied, action=Action.DENIED, decided_at=old))
    assert await raw.llen(f"{prefix}:log") == 3

    pruned = await journal.retention.prune(DECISIONS_DAY)
    assert (pruned.decisions, pruned.done) == (2, True) and pruned.bytes > 0
    assert await raw.lrange(f"{prefix}:log", 0, -1) == [b"3"]
    assert await raw.hkeys(f"{prefix}:decision") == [b"3"]
    assert await raw.hgetall(f"{prefix}:decided") == {b"denied": b"3"}
    assert await raw.smembers(f"{prefix}:settled") == set()
    assert await raw.exists(session_key(prefix, "session-a", "decisions")) == 0
    assert await raw.lrange(session_key(prefix, "session-b", "decisions"), 0, -1) == [b"3"]
    assert not await journal.is_settled("settled")
    assert [d.intent_id for d in await journal.decisions(session_id="session-b")] == ["denied"]


async def test_pruning_removes_receipts_counts_and_set_aside_entries_everywhere(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """A pruned receipt leaves every effect key, a pruned count its hash, stamp included (only
    the floor stays), a pruned set-aside entry its description and bytes, its position keeping
    an empty id; a started effect stays. With the decision gone too, what is left is the
    started effect, the schema, the floor, the decisions' counter and the aside positions."""
    journal = worker()
    owner = current_owner()
    done, started = make_effect("done-call"), make_effect("started-call", session_id="other")
    for effect in (done, started):
        await journal.effects.begin(effect)
    await journal.effects.finish(done.with_receipt("ok", at=done.started_at + 1.0))
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=owner)
    found = await journal.aside.raw("i-1")
    assert found is not None
    assert await journal.aside.set_aside(found, *aside_of(found, time.time() - 3 * DAY))

    everything = Retention(0, 0, 0)
    pruned = await journal.retention.prune(everything)
    assert (pruned.receipts, pruned.set_aside, pruned.write_counts) == (1, 1, 1)
    assert pruned.decisions == 1 and pruned.done
    assert await raw.hkeys(f"{prefix}:effect_index") == [started.key.encode()]
    for name in ("effect_record", "effect_state", "effect_owner", "effect_updated"):
        assert await raw.exists(session_key(prefix, "session-a", name)) == 0
    assert await raw.exists(session_key(prefix, "session-a", "effect_order")) == 0
    assert await raw.exists(f"{prefix}:aside") == 0
    assert await raw.exists(f"{prefix}:aside_record") == 0
    assert await raw.lrange(f"{prefix}:aside_order", 0, -1) == [b""]
    assert await raw.get(f"{prefix}:floor") == b"2"  # recorded, then set aside
    assert await prefix_keys(raw, prefix) == {
        f"{prefix}:schema",
        f"{prefix}:floor",
        f"{prefix}:seq",
        f"{prefix}:aside_order",
        f"{prefix}:effect_index",
        f"{prefix}:effect_started",
        *(
            session_key(prefix, "other", name)
            for name in ("effect_order", "effect_record", "effect_state", "effect_owner")
        ),
        session_key(prefix, "other", "effect_updated"),
    }

    # The next entry set aside takes a position of its own.
    await journal.record(make_intent("i-2"), state=IntentState.FAILED, owner=owner)
    again = await journal.aside.raw("i-2")
    assert again is not None
    assert await journal.aside.set_aside(again, *aside_of(again, time.time()))
    assert [e.intent_id for e in await journal.aside.entries()] == ["i-2"]
    assert await raw.lrange(f"{prefix}:aside_order", 0, -1) == [b"", b"i-2"]
    assert await journal.drop() > 0
    assert await prefix_keys(raw, prefix) == set()


async def test_a_dry_run_counts_what_pruning_would_remove_and_removes_nothing(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """A dry run answers what the same call would remove, bytes included, and leaves every key
    as it was."""
    journal = worker()
    old = time.time() - 3 * DAY
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(intent, decided_at=old))
    effect = make_effect()
    await journal.effects.begin(effect)
    await journal.effects.finish(effect.with_receipt("ok", at=2.0))
    kept = {key: await raw.dump(key) for key in await prefix_keys(raw, prefix)}
    everything = Retention(0, 0, 0)
    dry = await journal.retention.prune(everything, dry_run=True)
    assert {key: await raw.dump(key) for key in await prefix_keys(raw, prefix)} == kept
    pruned = await journal.retention.prune(everything)
    assert dry == pruned
    assert (pruned.decisions, pruned.receipts, pruned.write_counts) == (1, 1, 1)


async def test_a_count_under_a_backend_with_an_unresolved_intent_stays_with_the_stamp(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """Of an idle session's counts, the one under a backend with an unresolved intent stays,
    and the stamp with it; the others go, and the floor rises to the highest of them."""
    journal = worker()
    other = BackendIdentity("tests.Other", "elsewhere")
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    for _ in range(4):
        await journal.count_write("session-a", other)
    await age(raw, prefix, "session-a", 2 * HOUR)
    pruned = await journal.retention.prune(IDLE_HOUR)
    assert pruned.write_counts == 1
    counts = session_key(prefix, "session-a", "write_count")
    assert set(await raw.hkeys(counts)) == {str(BACKEND).encode(), STAMP.encode()}
    assert await raw.get(f"{prefix}:floor") == b"4"
    assert await journal.write_count("session-a", other) == 4
    assert await journal.count_write("session-a", other) == 5


# -- races: what comes between finding and removing ------------------------------------------


async def test_a_count_raised_after_it_was_found_idle_is_kept(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """A session counted again between the sweep that found its count idle and the script that
    would remove it keeps its count, and the floor stays; left alone, the same count goes."""
    journal, other = worker(), worker()
    await journal.count_write("raced", BACKEND)
    await journal.count_write("raced", BACKEND)
    await age(raw, prefix, "raced", 2 * HOUR)

    ran = before_script(journal, "prune_counts", lambda: other.count_write("raced", BACKEND))
    pruned = await journal.retention.prune(IDLE_HOUR)
    assert ran and pruned.write_counts == 0
    assert await raw.hget(session_key(prefix, "raced", "write_count"), str(BACKEND)) == b"3"
    assert await raw.exists(f"{prefix}:floor") == 0

    await age(raw, prefix, "raced", 2 * HOUR)
    pruned = await other.retention.prune(IDLE_HOUR)
    assert pruned.write_counts == 1
    assert await raw.get(f"{prefix}:floor") == b"3"


async def test_a_count_whose_session_opened_an_intent_after_it_was_found_is_kept(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """An intent opened between the sweep and the removal keeps its session's count: the
    script checks for an unresolved intent under the count's backend as it removes."""
    journal, other = worker(), worker()
    await journal.count_write("raced", BACKEND)
    await age(raw, prefix, "raced", 2 * HOUR)

    async def opening() -> None:
        # Opened with the stamp left old: only the unresolved intent keeps the count.
        intent = make_intent("i-1", session_id="raced")
        await other.record(intent, state=IntentState.FAILED, owner=current_owner())
        await age(raw, prefix, "raced", 2 * HOUR)

    ran = before_script(journal, "prune_counts", opening)
    assert (await journal.retention.prune(IDLE_HOUR)).write_counts == 0
    assert ran and await journal.write_count("raced", BACKEND) == 2


async def test_a_decision_whose_intent_came_back_after_it_was_found_is_kept(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """A denial of an intent discarded since is due; when the intent is recorded again between
    finding the denial and removing it, the denial stays with it."""
    journal, other = worker(), worker()
    owner = current_owner()
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=owner)
    await journal.note(
        make_decision(intent, action=Action.DENIED, decided_at=time.time() - DAY * 3)
    )
    await journal.discard("i-1")
    assert (await journal.retention.prune(DECISIONS_DAY, dry_run=True)).decisions == 1

    async def again() -> None:
        await other.record(intent, state=IntentState.FAILED, owner=owner)

    # 'find' and 'remove' are one script file: the second run of it is the removal.
    runs: list[str] = []
    original = journal._link.script

    async def spy(script: str, keys: list[bytes], args: list[Any], **kwargs: Any) -> object:
        if script == "prune_decisions" and args[1] == "remove":
            runs.append("remove")
            await again()
        return await original(script, keys, args, **kwargs)

    journal._link.script = spy
    assert (await journal.retention.prune(DECISIONS_DAY)).decisions == 0
    assert runs == ["remove"]
    assert [d.intent_id for d in await journal.decisions(intent_id="i-1")] == ["i-1"]
    assert await raw.llen(f"{prefix}:log") == 1


# -- limits ------------------------------------------------------------------------------------


def young_then_old(now: float) -> list[tuple[str, float]]:
    """Three ids of entries made at ``now``, then three of entries three days older, each
    with its time: the young ones at the head of a list a limited walk goes through."""
    young = [(f"young-{n}", now) for n in range(3)]
    return young + [(f"old-{n}", now - 3 * DAY) for n in range(3)]


async def prune_in_steps(
    journal: RedisJournal, retention: Retention, limit: int, what: str, *, calls: int
) -> tuple[int, int]:
    """``prune(retention, limit=limit)`` called until a call says the walk is done, within
    ``calls`` calls, each removing at most ``limit`` of ``what`` (a count of ``Pruned``): how
    many of those went, and in how many calls."""
    removed = 0
    for call in range(1, calls + 1):
        pruned = await journal.retention.prune(retention, limit=limit)
        assert getattr(pruned, what) <= limit
        removed += getattr(pruned, what)
        if pruned.done:
            return removed, call
    raise AssertionError(f"prune(limit={limit}) was not done after {calls} calls")


async def test_a_limited_sweep_resumes_where_the_last_call_stopped(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """prune(limit=1) examines one session's counts a call, from where this object's last
    call stopped, until the sweep ends (done); a dry run moves nothing, and a new journal
    object starts a sweep of its own."""
    journal = worker()
    for n in range(4):
        await journal.count_write(f"s-{n}", BACKEND)
    dry = await journal.retention.prune(IDLE_NOW, limit=1, dry_run=True)
    assert dry.write_counts <= 1 and not dry.done
    counts = journal.retention._walks.counts
    assert counts.sweep.cursor == 0 and not counts.sweep.begun
    removed, calls = await prune_in_steps(journal, IDLE_NOW, 1, "write_counts", calls=20)
    assert removed == 4 and calls >= 4
    assert await raw.get(f"{prefix}:floor") == b"1"
    assert not journal.retention._walks.counts.sweep.begun


async def test_a_limited_walk_of_decisions_goes_past_those_it_keeps(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """Decisions kept at the head of the log (young, or about an unresolved intent) do not
    hold a limited walk back: the next call goes on after them, and the walk ends."""
    journal = worker()
    owner = current_owner()
    for intent_id, at in young_then_old(time.time()):
        intent = make_intent(intent_id)
        await journal.record(intent, state=IntentState.FAILED, owner=owner)
        await journal.settle(make_decision(intent, decided_at=at))
    removed, _ = await prune_in_steps(journal, DECISIONS_DAY, 2, "decisions", calls=10)
    assert removed == 3
    assert sorted(d.intent_id for d in await journal.decisions(limit=100)) == [
        "young-0",
        "young-1",
        "young-2",
    ]
    assert await raw.llen(f"{prefix}:log") == 3


async def test_a_limited_walk_of_set_aside_entries_goes_past_those_it_keeps(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """Young set-aside entries at the head of the list do not hold a limited walk back: each
    call examines at most its limit, the next goes on after them, the walk ends with only the
    old entries gone, and a dry run moves nothing."""
    journal = worker()
    owner = current_owner()
    for intent_id, at in young_then_old(time.time()):
        await journal.record(make_intent(intent_id), state=IntentState.FAILED, owner=owner)
        found = await journal.aside.raw(intent_id)
        assert found is not None
        assert await journal.aside.set_aside(found, *aside_of(found, at))
    dry = await journal.retention.prune(DECISIONS_DAY, limit=2, dry_run=True)
    assert dry.set_aside == 0 and not dry.done
    removed, calls = await prune_in_steps(journal, DECISIONS_DAY, 2, "set_aside", calls=10)
    assert removed == 3 and calls >= 3
    left = sorted(entry.intent_id for entry in await journal.aside.entries())
    assert left == ["young-0", "young-1", "young-2"]
    assert await raw.lrange(f"{prefix}:aside_order", 0, -1) == [
        b"young-0",
        b"young-1",
        b"young-2",
        b"",
        b"",
        b"",
    ]
