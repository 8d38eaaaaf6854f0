"""Behaviour specific to the Redis journal: records and values edited at its keys, the count
kept beside an opened intent, the version every writing script checks, effects under their
session's hash tag, scripts, round trips, key ownership and replies lost after a script ran.
What every journal does (the contracts of ``agents_reconcile.conformance``; edited records,
several workers, races, sealed receipts, the schema, closing, a second event loop, addresses
without passwords) is in ``test_conformance.py`` and ``test_journal.py``; what every journal
does with effects is in ``test_effect_journal.py`` as well."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import redis.asyncio as aioredis
from blake3 import blake3

from agents_reconcile._backends.journal import IntentState, Opened
from agents_reconcile._backends.redis.journal import SCHEMA, SCHEMA_VERSION, RedisJournal
from agents_reconcile._backends.redis.layout import INTENTS, unpacked_row
from agents_reconcile._core.effect_records import Effect, EffectState
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.records import Action
from agents_reconcile.errors import (
    ConfigurationError,
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
    RecordTampered,
)
from agents_reconcile.testing import FaultProxy

from ..support.journal_support import (
    BACKEND,
    STRANGER,
    make_decision,
    make_effect,
    make_intent,
    proxy_to,
)
from ..support.servers import OwnRedis, redis_url

pytestmark = pytest.mark.redis


def session_key(prefix: str, session_id: str, name: str) -> str:
    """A session's key as the journal lays it out (hash tag = blake3 of the session id)."""
    return f"{prefix}:{{{blake3(session_id.encode()).hexdigest()[:32]}}}:{name}"


@pytest.fixture
def url() -> str:
    return redis_url()


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
async def raw(url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client on the test server, for looking behind the journal's back."""
    client = aioredis.Redis.from_url(url)
    yield client
    await client.aclose()


@pytest.fixture
async def journals(
    url: str, prefix: str
) -> AsyncIterator[list[tuple[RedisJournal, aioredis.Redis]]]:
    """Journals on one prefix, each with its own client, like workers; all dropped, closed,
    and their clients closed afterwards."""
    made: list[tuple[RedisJournal, aioredis.Redis]] = []
    yield made
    if made:
        await made[0][0].drop()
    for journal, client in made:
        await journal.close()
        await client.aclose()


@pytest.fixture
def worker(
    journals: list[tuple[RedisJournal, aioredis.Redis]], url: str, prefix: str
) -> Iterator[Any]:
    """Makes another journal object on the shared prefix, on a client (a connection pool) of
    its own, as another worker would have."""

    def make(*, prefix: str = prefix) -> RedisJournal:
        client = aioredis.Redis.from_url(url)
        journal = RedisJournal(client, prefix=prefix)
        journals.append((journal, client))
        return journal

    yield make


# -- addresses ------------------------------------------------------------------------------


def test_bad_url_is_a_configuration_error_without_the_password() -> None:
    """A URL the driver cannot parse raises ConfigurationError naming no password."""
    with pytest.raises(ConfigurationError) as caught:
        RedisJournal.from_url("redis://agent:hunter2-secret@127.0.0.1:6390/0?socket_timeout=x")
    assert "hunter2-secret" not in str(caught.value)


# -- records edited on the server ----------------------------------------------------------


async def test_tampered_decision_is_refused(worker: Any, raw: aioredis.Redis) -> None:
    """A stored decision edited with a plain client raises RecordTampered from decisions()."""
    journal: RedisJournal = worker()
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.settle(make_decision(intent))
    key = f"{journal.prefix}:decision"
    [number] = await raw.hkeys(key)
    stored = orjson.loads(await raw.hget(key, number))
    await raw.hset(key, number, orjson.dumps(dict(stored, action="denied")))
    with pytest.raises(RecordTampered):
        await journal.decisions(intent_id="i-1")


async def test_foreign_data_at_a_journal_key_is_corrupt(worker: Any, raw: aioredis.Redis) -> None:
    """A journal key holding the wrong kind of value raises JournalCorrupt, not the driver's
    error."""
    journal: RedisJournal = worker()
    await journal.migrate()
    await raw.set(f"{journal.prefix}:index", "not a hash")
    with pytest.raises(JournalCorrupt):
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    with pytest.raises(JournalCorrupt):
        await journal.get("i-1")


# -- the count an intent was opened at -------------------------------------------------------


async def test_the_count_an_intent_was_opened_at_goes_with_it(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """The count stored per opened intent is removed with the intent; an intent stored by
    record() has none, and answers a retried opening with 0."""
    journal = worker()
    owner = current_owner()
    key = session_key(prefix, "session-a", INTENTS)
    await journal.count_write("session-a", BACKEND)
    await journal.open_intent(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner)
    row = unpacked_row(await raw.hget(key, "i-1"))
    assert row is not None and row["fence"] == "1"
    await journal.discard("i-1")
    assert await raw.exists(key) == 0

    await journal.record(make_intent("i-2"), state=IntentState.IN_FLIGHT, owner=owner)
    row = unpacked_row(await raw.hget(key, "i-2"))
    assert row is not None and row["fence"] == ""
    again = await journal.open_intent(make_intent("i-2"), state=IntentState.IN_FLIGHT, owner=owner)
    assert again == Opened(recorded=True, write_count=0)


async def test_intents_created_at_one_instant_are_listed_in_the_byte_order_of_their_ids(
    worker: Any,
) -> None:
    """A session's unresolved intents are kept in one hash and sorted when read: by creation
    time, then by id in byte order (as a sorted set orders equal scores), whatever the
    server's locale."""
    journal = worker()
    ids = ["b", "\u00e9", "B", "a", "_", "ab"]
    for ident in ids:
        intent = make_intent(ident, created_at=5.0)
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.record(
        make_intent("first", created_at=4.0), state=IntentState.FAILED, owner=current_owner()
    )
    listed = [entry.intent.intent_id for entry in await journal.pending("session-a")]
    assert listed == ["first", *sorted(ids, key=lambda ident: ident.encode())]


async def test_a_refused_opening_leaves_its_id_free(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """An opening claims its id's index entry before its last checks; one refused by them
    (blocked, stale, settled) gives it up, so the id stays free for any session."""
    journal = worker()
    owner = current_owner()
    flight = IntentState.IN_FLIGHT
    await journal.open_intent(make_intent("i-1"), state=flight, owner=owner)
    blocked = await journal.open_intent(make_intent("i-2"), state=flight, owner=owner)
    stale = await journal.open_intent(
        make_intent("i-3", session_id="session-b"), state=flight, owner=owner, expect_write_count=7
    )
    settled = make_intent("i-4", session_id="session-c")
    await journal.record(settled, state=IntentState.FAILED, owner=owner)
    await journal.settle(make_decision(settled))
    with pytest.raises(IntentConflict):
        await journal.open_intent(settled, state=flight, owner=owner)
    assert not blocked.recorded and not stale.recorded
    assert await raw.hkeys(f"{prefix}:index") == [b"i-1"]
    for ident in ("i-2", "i-3"):
        elsewhere = make_intent(ident, session_id="session-d", text=ident)
        await journal.record(elsewhere, state=IntentState.FAILED, owner=owner)
        assert [e.intent.intent_id for e in await journal.pending("session-d")][-1] == ident


# -- schema version --------------------------------------------------------------------------


async def as_layout_3(raw: aioredis.Redis, prefix: str) -> None:
    """A journal as layout 3 left it (never released): an intent of session ``old`` held in
    flight, kept as a hash per field of it under the session's tag, with its index entry, its
    listing member and the session's count."""
    intent = make_intent("i-old", session_id="old")
    owner = str(current_owner())
    await raw.set(f"{prefix}:schema", 3)
    await raw.hset(f"{prefix}:index", "i-old", "old")
    await raw.zadd(f"{prefix}:listing", {b"old\x00i-old": 0})
    await raw.zadd(session_key(prefix, "old", "open"), {"i-old": intent.created_at})
    for name, value in (
        ("record", intent.encode()),
        ("backend", str(intent.backend)),
        ("state", IntentState.IN_FLIGHT.value),
        ("owner", owner),
        ("updated", repr(intent.created_at)),
        ("fence", "1"),
    ):
        await raw.hset(session_key(prefix, "old", name), "i-old", value)
    await raw.hset(session_key(prefix, "old", "write_count"), mapping={str(BACKEND): 2, "": 1.0})


async def test_a_journal_of_an_older_layout_is_refused_saying_what_to_do(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """A journal laid out before this release's layout (a hash per field of an intent, never
    released) is refused, never upgraded nor written: a write, a read, migrate() and check()
    each say which version it holds, that no release wrote it and what to do; drop() deletes
    every key of it."""
    await as_layout_3(raw, prefix)
    before = {key: await raw.dump(key) async for key in raw.scan_iter(match=f"{prefix}:*")}
    journal = worker()
    said = "journal schema version 3, a layout from before this release's 4 that no release wrote"
    owner = current_owner()
    with pytest.raises(JournalCorrupt, match=said) as refused:
        await journal.open_intent(
            make_intent("i-new", session_id="old"), state=IntentState.IN_FLIGHT, owner=owner
        )
    assert "drop()" in str(refused.value) and "another prefix" in str(refused.value)
    with pytest.raises(JournalCorrupt, match=said):
        await journal.pending("old")
    with pytest.raises(JournalCorrupt, match=said):
        await journal.migrate()
    found = await journal.check()
    assert found is not None and said in found
    assert await journal.schema_version() == 3
    assert {key: await raw.dump(key) async for key in raw.scan_iter(match=f"{prefix}:*")} == before

    assert await journal.drop() == len(before)
    assert [key async for key in raw.scan_iter(match=f"{prefix}:*")] == []
    assert await journal.migrate() == [SCHEMA.applied(n) for n in range(1, SCHEMA_VERSION + 1)]


async def test_a_running_worker_refuses_to_write_once_the_schema_is_newer(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """Every writing script checks the version itself, so a worker that started before a newer
    release upgraded the journal raises JournalCorrupt on its next write, and the version is
    left as it is."""
    running = worker()
    await running.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await raw.set(f"{prefix}:schema", SCHEMA_VERSION + 1)
    with pytest.raises(JournalCorrupt, match="newer"):
        await running.record(
            make_intent("i-2", text="x"), state=IntentState.FAILED, owner=current_owner()
        )
    assert await raw.get(f"{prefix}:schema") == str(SCHEMA_VERSION + 1).encode()


async def test_the_effect_scripts_refuse_a_newer_schema(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """The effect scripts check the version as every writing script does: on a newer one they
    raise JournalCorrupt and change nothing."""
    running = worker()
    effect = make_effect()
    await running.effects.begin(effect)
    await raw.set(f"{prefix}:schema", SCHEMA_VERSION + 1)
    mine = Effect(**{**effect.__dict__, "owner": "me/3/3", "attempts": 2})
    with pytest.raises(JournalCorrupt, match="newer"):
        await running.effects.begin(make_effect("c2"))
    with pytest.raises(JournalCorrupt, match="newer"):
        await running.effects.restart(mine, expect_owner=effect.owner)
    with pytest.raises(JournalCorrupt, match="newer"):
        await running.effects.finish(effect.with_receipt("ok", at=2.0))
    assert await raw.get(f"{prefix}:schema") == str(SCHEMA_VERSION + 1).encode()
    await raw.set(f"{prefix}:schema", SCHEMA_VERSION)
    assert await running.effects.get(effect.key) == effect
    assert [e.key for e in await running.effects.of_session("session-a")] == [effect.key]


async def test_a_newer_or_unreadable_version_is_left_alone_by_migrate(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """migrate() stores a version only where there is none: a newer one, or a value that is
    no version, raises JournalCorrupt and stays as it was."""
    journal = worker()
    for stored in (str(SCHEMA_VERSION + 1), "0", "two"):
        await raw.set(f"{prefix}:schema", stored)
        with pytest.raises(JournalCorrupt):
            await journal.migrate()
        with pytest.raises(JournalCorrupt):
            await journal.effects.begin(make_effect())
        assert await raw.get(f"{prefix}:schema") == stored.encode()
    await raw.delete(f"{prefix}:schema")
    assert await journal.migrate() == [SCHEMA.applied(n) for n in range(1, SCHEMA_VERSION + 1)]


# -- effects ---------------------------------------------------------------------------------


async def test_effects_live_under_their_session_hash_tag(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """An effect's keys carry its session's hash tag, whatever the session id holds; only the
    effect index (key -> session) is global; drop() removes them all."""
    journal = worker()
    odd = "tenant:{42}/chat 7"
    effect = make_effect(session_id=odd)
    await journal.effects.begin(effect)
    await journal.effects.finish(effect.with_receipt("ok", at=2.0))
    tag = "{" + blake3(odd.encode()).hexdigest()[:32] + "}"
    keys = {key.decode() async for key in raw.scan_iter(match=f"{prefix}:*")}
    assert keys == {
        f"{prefix}:schema",
        f"{prefix}:effect_index",
        *(
            f"{prefix}:{tag}:{name}"
            for name in ("effect_order", "effect_record", "effect_state", "effect_owner")
        ),
        f"{prefix}:{tag}:effect_updated",
    }
    assert await raw.hget(f"{prefix}:effect_index", effect.key) == odd.encode()
    assert await raw.hget(f"{prefix}:{tag}:effect_state", effect.key) == b"done"
    assert await raw.hget(f"{prefix}:{tag}:effect_owner", effect.key) == b"host/1/1"
    assert await raw.lrange(f"{prefix}:{tag}:effect_order", 0, -1) == [effect.key.encode()]
    assert [e.key for e in await journal.effects.of_session(odd)] == [effect.key]
    assert await journal.drop() == len(keys)
    assert [key async for key in raw.scan_iter(match=f"{prefix}:*")] == []
    assert await journal.effects.get(effect.key) is None


async def test_an_effect_row_that_disagrees_with_its_record_is_refused(
    worker: Any, raw: aioredis.Redis
) -> None:
    """A state edited beside an intact record raises RecordTampered instead of passing as that
    effect, and reads as it was once the state is put back."""
    journal: RedisJournal = worker()
    first, second = make_effect("c1"), make_effect("c2")
    await journal.effects.begin(first)
    await journal.effects.begin(second)
    state = session_key(journal.prefix, "session-a", "effect_state")

    await raw.hset(state, first.key, "done")
    with pytest.raises(RecordTampered):
        await journal.effects.get(first.key)
    with pytest.raises(RecordTampered):
        await journal.effects.of_session("session-a")
    await raw.hset(state, first.key, "started")
    assert await journal.effects.get(first.key) == first


async def test_a_key_begun_in_another_session_stays_there(worker: Any) -> None:
    """An effect key is one session's: beginning it again under another session answers the
    record that session holds, and a receipt naming the other session conflicts."""
    journal = worker()
    effect = make_effect()
    await journal.effects.begin(effect)
    elsewhere = Effect(**{**effect.__dict__, "session_id": "session-b", "owner": "x/2/2"})
    assert await journal.effects.begin(elsewhere) == (effect, False)
    assert await journal.effects.of_session("session-b") == []
    with pytest.raises(IntentConflict):
        await journal.effects.finish(elsewhere.with_receipt("ok", at=2.0))
    assert not await journal.effects.restart(elsewhere, expect_owner=effect.owner)
    assert await journal.effects.get(effect.key) == effect


async def test_a_receipt_without_output_or_a_restart_of_a_done_effect_is_refused(
    worker: Any,
) -> None:
    """effects.finish() takes a receipt and effects.restart() a started effect: either misused
    raises ValueError and leaves the effect done."""
    journal = worker()
    effect = make_effect()
    await journal.effects.begin(effect)
    mine = Effect(**{**effect.__dict__, "owner": "me/3/3", "attempts": 2})
    assert await journal.effects.restart(mine, expect_owner=effect.owner)
    await journal.effects.finish(mine.with_receipt("ok", at=2.0))
    with pytest.raises(ValueError):
        await journal.effects.finish(mine)
    with pytest.raises(ValueError):
        await journal.effects.restart(mine.with_receipt("ok", at=2.0), expect_owner="me/3/3")
    assert (await journal.effects.get(effect.key)).state is EffectState.DONE


# -- keys, scripts and connections ---------------------------------------------------------


async def test_drop_removes_only_its_own_keys(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """drop() deletes this journal's keys and leaves those of a journal whose prefix extends
    this one's, of an unrelated prefix, and keys that are not laid out as a journal's."""
    mine = worker()
    nested = worker(prefix=f"{prefix}:x")
    other = worker(prefix=f"{prefix}-other")
    owner = current_owner()
    for journal in (mine, nested, other):
        intent = make_intent("i-1")
        await journal.record(intent, state=IntentState.FAILED, owner=owner)
        await journal.note(make_decision(intent, action=Action.DENIED))
    await raw.set(f"{prefix}:not-a-journal-key", "kept")

    assert await mine.drop() > 0
    assert [key async for key in raw.scan_iter(match=f"{prefix}:*")] != []
    left = {key.decode() async for key in raw.scan_iter(match=f"{prefix}*")}
    assert all(
        key.startswith((f"{prefix}:x:", f"{prefix}-other:")) or key == f"{prefix}:not-a-journal-key"
        for key in left
    )
    assert await mine.pending(None) == []
    assert [e.intent.intent_id for e in await nested.pending(None)] == ["i-1"]
    assert [e.intent.intent_id for e in await other.pending(None)] == ["i-1"]
    await nested.drop()
    await other.drop()
    await raw.delete(f"{prefix}:not-a-journal-key")


async def test_a_session_keeps_its_keys_under_one_hash_tag(
    worker: Any, raw: aioredis.Redis, prefix: str
) -> None:
    """Every per-session key of a session, whatever its id holds, carries the same hash tag."""
    journal = worker()
    odd = "tenant:{42}/chat 7"
    intent = make_intent("i-1", session_id=odd)
    await journal.record(intent, state=IntentState.RECONCILING, owner=current_owner())
    await journal.settle(make_decision(intent))
    tag = "{" + blake3(odd.encode()).hexdigest()[:32] + "}"
    keys = {key.decode() async for key in raw.scan_iter(match=f"{prefix}:{{*")}
    assert keys and all(key.startswith(f"{prefix}:{tag}:") for key in keys)
    assert await journal.decisions(session_id=odd) == [make_decision(intent)]


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[str]:
    """The URL of a Redis server of this test's own: emptying a server's script cache is
    seen by every client of it, and the other tests on the shared server count scripts."""
    redis_url()  # only where the suites have Redis
    server = OwnRedis(tmp_path / "redis")
    server.start()
    yield server.url
    server.stop()


async def test_flushed_script_cache_is_reloaded(own_server: str, prefix: str) -> None:
    """After the server forgets its scripts, the next operation loads them again."""
    raw = aioredis.Redis.from_url(own_server)
    journal = RedisJournal.from_url(own_server, prefix=prefix)
    try:
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
        await raw.script_flush()
        assert await journal.transition("i-1", state=IntentState.CANCELLED, owner=STRANGER)
        entry = await journal.get("i-1")
        assert entry is not None and entry.state is IntentState.CANCELLED
    finally:
        await journal.close()
        await raw.aclose()


# What a new connection may send before the first command.
HANDSHAKE = ("CLIENT", "HELLO", "AUTH", "SELECT", "READONLY")


class CountingConnection(aioredis.Connection):
    """Notes the name of every command it packs (pipelines pack each command too)."""

    sent: ClassVar[list[str]] = []

    def pack_command(self, *args: Any) -> list[bytes]:
        name = args[0]
        self.sent.append(name.decode() if isinstance(name, bytes) else str(name))
        return super().pack_command(*args)


@pytest.fixture
async def counted(url: str, prefix: str) -> AsyncIterator[tuple[RedisJournal, list[str]]]:
    """A journal whose commands are counted, with the list they are noted in."""
    sent: list[str] = []
    connection = type("Counting", (CountingConnection,), {"sent": sent})
    client = aioredis.Redis.from_url(url, connection_class=connection)
    journal = RedisJournal(client, prefix=prefix)
    yield journal, sent
    await journal.drop()
    await journal.close()


async def test_open_intent_and_discard_are_one_command_each(
    counted: tuple[RedisJournal, list[str]], raw: aioredis.Redis, prefix: str
) -> None:
    """The write-ahead path costs one round trip per call, a retried opening included: no
    schema check, lookup or script load of its own once the scripts are on the server."""
    journal, sent = counted
    owner = current_owner()
    # Warm-up on an empty prefix: connects, may load the scripts, and stores the schema.
    await journal.open_intent(make_intent("i-0"), state=IntentState.IN_FLIGHT, owner=owner)
    await journal.discard("i-0")
    assert await raw.get(f"{prefix}:schema") == str(SCHEMA_VERSION).encode()
    # A journal object's first call (here after close() reopens the connections) needs no
    # separate schema check: the script checks it.
    await journal.close()
    sent.clear()
    await journal.open_intent(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner)
    assert [name for name in sent if name not in HANDSHAKE] == ["EVALSHA"]
    await journal.discard("i-1")
    for n in range(2, 5):
        sent.clear()
        opened = await journal.open_intent(
            make_intent(f"i-{n}"), state=IntentState.IN_FLIGHT, owner=owner
        )
        assert opened == Opened(recorded=True, write_count=2 * n)
        assert sent == ["EVALSHA"]
        sent.clear()
        retried = await journal.open_intent(
            make_intent(f"i-{n}"), state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=n
        )
        assert retried == opened and sent == ["EVALSHA"]
        sent.clear()
        await journal.discard(f"i-{n}")
        assert sent == ["EVALSHA"]
        assert await journal.get(f"i-{n}") is None


async def test_an_opening_that_clears_the_previous_intent_makes_twelve_server_calls(
    own_server: str, prefix: str
) -> None:
    """An append's opening (its session's previous intent cleared in the same script) makes
    twelve calls of the server's: the version read, the session's intents read, the cleared
    row, its index entry and its listing member removed, the count read, the new id's index
    entry claimed (one ``HSETNX``), its settled mark read, the server's time read, and the new
    row, its listing member and the count written."""
    client = aioredis.Redis.from_url(own_server)
    journal = RedisJournal(client, prefix=prefix)
    owner = current_owner()
    flight = IntentState.IN_FLIGHT
    try:
        await journal.open_intent(make_intent("i-0"), state=flight, owner=owner)
        await journal.open_intent(make_intent("i-1"), state=flight, owner=owner, clearing="i-0")
        await client.config_resetstat()
        opened = await journal.open_intent(
            make_intent("i-2"), state=flight, owner=owner, clearing="i-1"
        )
        stats = await client.info("commandstats")
    finally:
        await journal.drop()
        await journal.close()
        await client.aclose()
    assert opened.recorded
    calls = {
        name.removeprefix("cmdstat_"): found["calls"]
        for name, found in stats.items()
        if name not in ("cmdstat_evalsha", "cmdstat_config|resetstat")
    }
    assert calls == {
        "get": 1,
        "hgetall": 1,
        "zrem": 1,
        "hdel": 2,
        "hget": 1,
        "hsetnx": 1,
        "sismember": 1,
        "time": 1,
        "hset": 2,
        "zadd": 1,
    }


class TripCountingConnection(CountingConnection):
    """Notes every command, and each time it writes to the server (a pipeline writes once)."""

    trips: ClassVar[list[int]] = []

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        self.trips.append(1)
        await super().send_packed_command(command, check_health)


async def test_a_server_spends_one_command_per_call_and_one_trip_for_every_session_s_rows(
    url: str, prefix: str
) -> None:
    """On one server recording, reading, settling (by another session too) and asking whether
    an intent is settled cost one command each, with no claim or bucket of a cluster's; the
    unresolved intents of every session are their sessions' names, then every session's rows
    in one trip."""
    sent: list[str] = []
    trips: list[int] = []
    connection = type("Trips", (TripCountingConnection,), {"sent": sent, "trips": trips})
    client = aioredis.Redis.from_url(url, connection_class=connection)
    journal = RedisJournal(client, prefix=prefix)
    owner = current_owner()
    try:
        intents = [make_intent(f"i-{n}", session_id=f"s-{n}") for n in range(3)]
        for intent in intents:
            await journal.record(intent, state=IntentState.IN_FLIGHT, owner=owner)
        assert len(await journal.pending(None)) == 3  # the scripts are on the server now
        await journal.settle(make_decision(make_intent("warm", session_id="s-0")))
        fresh = make_intent("i-3", session_id="s-3")
        checks: list[tuple[Any, list[str]]] = [
            (journal.record(fresh, state=IntentState.IN_FLIGHT, owner=owner), ["EVALSHA"]),
            (journal.get("i-3"), ["EVALSHA"]),
            (journal.is_settled("i-3"), ["SISMEMBER"]),
            (
                journal.settle(dataclasses.replace(make_decision(fresh), session_id="s-0")),
                ["EVALSHA"],
            ),
            (journal.is_settled("i-3"), ["SISMEMBER"]),
        ]
        for call, commands in checks:
            sent.clear()
            await call
            assert sent == commands
        sent.clear()
        trips.clear()
        assert [entry.intent.intent_id for entry in await journal.pending(None)] == [
            "i-0",
            "i-1",
            "i-2",
        ]
        assert sent == ["HVALS", "EVALSHA", "EVALSHA", "EVALSHA"]
        assert len(trips) == 2
    finally:
        await journal.drop()
        await journal.close()
        await client.aclose()


async def test_effects_cost_one_command_each(
    counted: tuple[RedisJournal, list[str]],
) -> None:
    """Beginning and finishing an effect are one script each; reading one effect by its key
    alone looks up its session first."""
    journal, sent = counted
    await journal.effects.begin(make_effect("warm"))
    await journal.effects.finish(make_effect("warm").with_receipt("ok", at=1.0))
    await journal.effects.of_session("session-a")
    effect = make_effect()
    sent.clear()
    assert await journal.effects.begin(effect) == (effect, True)
    assert sent == ["EVALSHA"]
    sent.clear()
    done = effect.with_receipt("ok", at=2.0)
    assert await journal.effects.finish(done) == done
    assert sent == ["EVALSHA"]
    sent.clear()
    assert await journal.effects.get(effect.key) == done
    assert sent == ["HGET", "EVALSHA"]


async def test_flushed_scripts_cost_one_more_command(own_server: str, prefix: str) -> None:
    """A script the server lost is run from its source at once, not loaded and then run."""
    sent: list[str] = []
    connection = type("Counting", (CountingConnection,), {"sent": sent})
    client = aioredis.Redis.from_url(own_server, connection_class=connection)
    journal = RedisJournal(client, prefix=prefix)
    raw = aioredis.Redis.from_url(own_server)
    owner = current_owner()
    try:
        await journal.open_intent(make_intent("i-0"), state=IntentState.IN_FLIGHT, owner=owner)
        await journal.discard("i-0")
        await raw.script_flush()
        sent.clear()
        opened = await journal.open_intent(
            make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=owner
        )
        assert opened.blocking == [] and sent == ["EVALSHA", "EVAL"]
        sent.clear()
        await journal.discard("i-1")
        assert sent == ["EVALSHA", "EVAL"]
        sent.clear()
        await journal.open_intent(make_intent("i-2"), state=IntentState.IN_FLIGHT, owner=owner)
        assert sent == ["EVALSHA"]
        assert [entry.intent.intent_id for entry in await journal.pending("session-a")] == ["i-2"]
    finally:
        await journal.close()
        await raw.aclose()


async def test_a_stale_session_hint_is_corrected_by_the_script(
    counted: tuple[RedisJournal, list[str]], url: str, prefix: str
) -> None:
    """When the intent moved to another session, the script names it: the call is made
    again there, with no lookup in between."""
    journal, sent = counted
    other = RedisJournal.from_url(url, prefix=prefix)
    try:
        owner = current_owner()
        # Warm-up: the scripts used below are on the server.
        await journal.record(make_intent("i-0"), state=IntentState.FAILED, owner=owner)
        await journal.transition("i-0", state=IntentState.CANCELLED, owner=owner)
        await journal.discard("i-0")
        await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=owner)
        await other.discard("i-1")
        await other.record(
            make_intent("i-1", session_id="session-b"), state=IntentState.FAILED, owner=owner
        )
        sent.clear()
        assert await journal.transition("i-1", state=IntentState.CANCELLED, owner=STRANGER)
        assert sent == ["EVALSHA", "EVALSHA"]
        entry = await other.get("i-1")
        assert entry is not None and entry.state is IntentState.CANCELLED
        assert entry.intent.session_id == "session-b"
        await other.discard("i-1")
        sent.clear()
        await journal.discard("i-1")
        assert sent == ["EVALSHA"]
        await other.record(make_intent("i-2"), state=IntentState.FAILED, owner=owner)
        sent.clear()
        # No hint at all: one lookup, then the script.
        await journal.discard("i-2")
        assert sent == ["HGET", "EVALSHA"]
        assert await other.get("i-2") is None
    finally:
        await other.close()


# -- replies lost on the way back ----------------------------------------------------------


@pytest.fixture
async def proxied(url: str, prefix: str) -> AsyncIterator[tuple[RedisJournal, FaultProxy]]:
    """A journal whose connections go through a proxy that can lose a reply."""
    proxy, through = await proxy_to(url)
    journal = RedisJournal.from_url(through, prefix=prefix)
    yield journal, proxy
    await journal.close()
    await proxy.close()
    # Directly: a loss the test armed and never used must not take the clean-up's reply.
    direct = RedisJournal.from_url(url, prefix=prefix)
    await direct.drop()
    await direct.close()


async def warm_up(journal: RedisJournal) -> None:
    """Every script the tests below lose a reply of is on the server, so the reply lost is
    the script's own, not a NOSCRIPT."""
    owner = current_owner()
    warm = make_intent("warm", session_id="warm")
    await journal.open_intent(warm, state=IntentState.RECONCILING, owner=owner)
    await journal.settle(make_decision(warm), owner=owner)


async def test_a_lost_reply_to_open_intent_is_answered_by_the_retry(
    proxied: tuple[RedisJournal, FaultProxy], raw: aioredis.Redis, prefix: str
) -> None:
    """open_intent whose reply is lost after the script ran, made again on a new connection,
    answers recorded with the count the first attempt saw; the intent is counted once."""
    journal, proxy = proxied
    owner = current_owner()
    await warm_up(journal)
    await journal.count_write("session-a", BACKEND)
    intent = make_intent("i-1")

    proxy.lose_next_reply()
    with pytest.raises(JournalUnavailable):
        await journal.open_intent(
            intent, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=1
        )
    assert proxy.lost_replies == 1
    assert await raw.hget(f"{prefix}:index", "i-1") == b"session-a"

    opened = await journal.open_intent(
        intent, state=IntentState.IN_FLIGHT, owner=owner, expect_write_count=1
    )
    assert opened == Opened(recorded=True, write_count=1)
    assert [entry.intent for entry in await journal.pending("session-a")] == [intent]
    assert await journal.write_count("session-a", BACKEND) == 2


async def test_a_lost_reply_to_settle_is_answered_by_the_retry(
    proxied: tuple[RedisJournal, FaultProxy], raw: aioredis.Redis, prefix: str
) -> None:
    """settle whose reply is lost after the script ran, made again on a new connection,
    succeeds without storing or counting the decision twice."""
    journal, proxy = proxied
    owner = current_owner()
    await warm_up(journal)
    intent = make_intent("i-1")
    await journal.open_intent(intent, state=IntentState.RECONCILING, owner=owner)
    decision = make_decision(intent)

    proxy.lose_next_reply()
    with pytest.raises(JournalUnavailable):
        await journal.settle(decision, owner=owner)
    assert proxy.lost_replies == 1
    assert await raw.sismember(f"{prefix}:settled", "i-1")

    await journal.settle(decision, owner=owner)
    assert await journal.decisions(intent_id="i-1") == [decision]
    assert await journal.write_count("session-a", BACKEND) == 2


async def test_a_lost_reply_to_effects_finish_is_answered_by_the_retry(
    proxied: tuple[RedisJournal, FaultProxy], raw: aioredis.Redis, prefix: str
) -> None:
    """effects.finish() whose reply is lost after the script ran, made again, finds its very
    record stored and returns it."""
    journal, proxy = proxied
    warm = make_effect("warm", session_id="warm")
    await journal.effects.begin(warm)
    await journal.effects.finish(warm.with_receipt("ok", at=1.0))
    effect = make_effect()
    await journal.effects.begin(effect)
    done = effect.with_receipt("charged 5", at=2.0)

    proxy.lose_next_reply()
    with pytest.raises(JournalUnavailable):
        await journal.effects.finish(done)
    assert proxy.lost_replies == 1
    key = session_key(prefix, "session-a", "effect_state")
    assert await raw.hget(key, effect.key) == b"done"

    assert await journal.effects.finish(done) == done
    assert await journal.effects.get(effect.key) == done
