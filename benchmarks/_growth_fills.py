"""What the journals of ``journal_growth.py`` are filled with, and the bulk writers that put it
in each engine's own schema, row for row what the journal itself writes.

A journal is filled with sessions, each a ``Left``: its write count and when the count was
last raised (the stamp pruning reads: ``counted_at`` on SQLite and PostgreSQL, the field ''
of the session's ``write_count`` hash on Redis), an unresolved intent (in flight, owned by a
process on a host long gone), a settled decision, a tool call's receipt. Records are built by
the package's own builders and encoders (``conformance._records``, ``PendingWrite.encode``,
``Decision.encode``, ``Effect.with_receipt`` and ``Effect.encode``), rows by the journal's own
row builders, statements' column orders or key layout. ``check_sample`` then reads sessions
back through the journal itself, which decodes, so checks, every record it reads.

Two fills: ``growth_sessions`` (the other sessions of the growth table, each active a day
ago) and ``retention_sessions`` (a year of sessions, for the retention figure).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from blake3 import blake3

from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.effect_records import Effect
from agents_reconcile._core.ownership import Owner
from agents_reconcile._core.records import BackendIdentity, Decision, PendingWrite
from agents_reconcile.conformance._records import make_decision, make_effect, make_intent

BACKEND: Final = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/srv/app/chat.db")
GONE: Final = Owner(host="retired-host#0badf00d", pid=4242, started="5eed")
"""The owner of every unresolved intent and receipt: a process on a host that is gone."""
DAY_AGO: Final = time.time() - 86_400.0
CHUNK: Final = 20_000
"""Sessions written per transaction (or pipeline)."""
YEAR: Final = 365 * 86_400.0
TURNS: Final = 10
TURN_GAP: Final = 60.0
"""Seconds between two turns of one session in the retention fill."""
_SPREAD: Final = 0.6180339887498949
"""Session n of the retention fill is active at fraction (n x this) mod 1 of the year: evenly
spread, and unrelated to the order of its id (as random ids are)."""


@dataclass(slots=True)
class Left:
    """One session, and what it left in the journal."""

    session_id: str
    writes: int
    """Its write count (an unresolved intent's opening counted in it: its last write)."""
    counted_at: float
    """When its count was last raised (its unresolved intent's opening, when it has one)."""
    intent: PendingWrite | None = None
    """Unresolved: in flight since it was opened (at ``counted_at``), owned by ``GONE``."""
    decision: Decision | None = None
    """Settled an earlier failure."""
    receipt: Effect | None = None
    """A tool call's receipt (state done), stored at its ``finished_at``."""


def _ident(kind: str, n: int) -> str:
    # Ids as random as the journal's own (new_write_id), and the same on every call.
    return blake3(f"{kind} {n}".encode()).hexdigest()[:32]


def _intent(kind: str, n: int, session_id: str, at: float) -> PendingWrite:
    return make_intent(
        _ident(kind, n),
        session_id=session_id,
        backend=BACKEND,
        created_at=at,
        text=f"turn {n} of {session_id}",
    )


def _chunks(size: int, make: Any) -> Iterator[list[Left]]:
    for start in range(0, size, CHUNK):
        yield [make(n) for n in range(start, min(start + CHUNK, size))]


def growth_sessions(size: int) -> Iterator[list[Left]]:
    """The other sessions of a growth journal of ``size``, a chunk at a time: each appended
    once a day ago (its intent opened and acknowledged: two writes counted); 1% hold an
    abandoned intent besides, 1% a decision that settled an earlier failure."""

    def other(n: int) -> Left:
        session_id = f"other-{n:07d}"
        at = DAY_AGO + n * 1e-3
        left = Left(session_id, 2, at)
        if n % 100 == 0:
            left.intent = _intent("growth", n, session_id, at)
            left.writes = 3
        elif n % 100 == 50:
            earlier = _intent("growth", n, session_id, at)
            left.decision = make_decision(earlier, decided_at=at)
            left.writes = 4
        return left

    return _chunks(size, other)


def retention_sessions(size: int, now: float) -> Iterator[list[Left]]:
    """``size`` sessions, a chunk at a time, each of which made ``TURNS`` turns a minute
    apart, the sessions spread evenly over the year before ``now``: each counted 2 writes a
    turn (its last turn's stamp); one decision per 100 turns (every tenth session, settling an
    earlier failure, decided at its fourth turn); one receipt per session (a tool call at one
    of its turns); one session in 1,000 left an intent unresolved at its last turn."""

    def kept(n: int) -> Left:
        session_id = f"kept-{n:07d}"
        first = now - YEAR + (n * _SPREAD) % 1.0 * (YEAR - TURNS * TURN_GAP)
        turn = [first + k * TURN_GAP for k in range(TURNS)]
        left = Left(session_id, 2 * TURNS, turn[-1])
        if n % 1000 == 7:
            left.intent = _intent("abandoned", n, session_id, turn[-1])
        if n % 10 == 0:
            earlier = _intent("failed", n, session_id, turn[3])
            left.decision = make_decision(earlier, decided_at=turn[3])
        at = turn[n % TURNS]
        call = make_effect(f"call_{n:07d}", session_id=session_id, owner=str(GONE))
        left.receipt = replace(call, started_at=at).with_receipt(
            {"charged": 5, "currency": "EUR", "receipt": f"rcpt_{n:07d}"}, at=at + 0.5
        )
        return left

    return _chunks(size, kept)


# -- the engines' bulk writers ---------------------------------------------------------------


def sqlite_fill(path: Path, chunks: Iterable[list[Left]]) -> None:
    """Write ``chunks`` into the (migrated) SQLite journal at ``path``, a transaction each."""
    # The journal's own row builder and statements: what open_intent, settle and the
    # effects' begin and finish write.
    from agents_reconcile._backends.sqlite.journal import _intent_row
    from agents_reconcile._backends.sqlite.statements import insert_decision

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for chunk in chunks:
            conn.execute("BEGIN")
            # Each session's live row: its count and, for an abandoned write, the intent it
            # holds, opened at its creation and never moved since (its token the count before).
            lives, effects = [], []
            for left in chunk:
                if left.decision is not None:
                    insert_decision(conn, left.decision)
                live: tuple[Any, ...] = (None,) * 7
                if left.intent is not None:
                    row = _intent_row(
                        left.intent, IntentState.IN_FLIGHT, GONE, left.intent.encode()
                    )
                    live = (*row[:1], *row[3:6], left.intent.created_at, row[7], left.writes - 1)
                lives.append((*_count_row(left, left.writes), *live))
                if left.receipt is not None:
                    effects.append(_effect_row(left.receipt))
            conn.executemany(
                "INSERT INTO live (session_id, backend, write_count, counted_at, intent_id,"
                " state, owner, created_at, updated_at, record, fence)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                lives,
            )
            conn.executemany(
                "INSERT INTO effects (key, session_id, state, owner, started_at, updated_at,"
                " record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                effects,
            )
            conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()


def _count_row(left: Left, writes: int) -> tuple[Any, ...]:
    return (left.session_id, str(BACKEND), writes, left.counted_at)


def _effect_row(receipt: Effect) -> tuple[Any, ...]:
    """A receipt's row: begun at its start, its receipt stored at ``finished_at``."""
    assert receipt.finished_at is not None
    return (
        receipt.key,
        receipt.session_id,
        receipt.state.value,
        receipt.owner,
        receipt.started_at,
        receipt.finished_at,
        receipt.encode(),
    )


# The columns open_intent, settle, count_write and the effects' statements write (the
# decisions' in decision_args' order).
_PG_COLUMNS: Final = {
    "slots": [
        "session_id", "backend", "slot", "write_count", "counted_at", "intent_id", "state",
        "owner", "created_at", "updated_at", "fence", "record",
    ],
    "decisions": [
        "intent_id", "session_id", "backend", "outcome", "reason", "action", "decided_at",
        "record",
    ],
    "effects": ["key", "session_id", "state", "owner", "created_at", "updated_at", "record"],
}  # fmt: skip


def _pg_slot(left: Left) -> tuple[Any, ...]:
    """A session's slot 0, in ``_PG_COLUMNS`` order: its count, and its unresolved intent when
    it has one, opened at its creation and never moved since, its token the count before it."""
    intent = left.intent
    live: tuple[Any, ...] = (None, None, None, 0.0, None, None, None)
    if intent is not None:
        live = (
            intent.intent_id, IntentState.IN_FLIGHT.value, str(GONE), intent.created_at,
            intent.created_at, left.writes - 1, intent.encode(),
        )  # fmt: skip
    return (left.session_id, str(BACKEND), 0, left.writes, left.counted_at, *live)


async def postgres_fill(url: str, schema: str, chunks: Iterable[list[Left]]) -> None:
    """Write ``chunks`` into the (migrated) PostgreSQL journal in ``schema``, by COPY."""
    import asyncpg

    from agents_reconcile._backends.postgres.statements import decision_args

    conn = await asyncpg.connect(url)
    try:
        for chunk in chunks:
            rows: dict[str, list[tuple[Any, ...]]] = {
                "slots": [_pg_slot(left) for left in chunk],
                "decisions": [
                    decision_args(left.decision) for left in chunk if left.decision is not None
                ],
                "effects": [
                    _effect_row(left.receipt) for left in chunk if left.receipt is not None
                ],
            }
            for table, records in rows.items():
                if records:
                    await conn.copy_records_to_table(
                        table, records=records, columns=_PG_COLUMNS[table], schema_name=schema
                    )
        await conn.execute(f"ANALYZE {', '.join(f'{schema}.{table}' for table in _PG_COLUMNS)}")
    finally:
        await conn.close()


async def redis_fill(url: str, prefix: str, chunks: Iterable[list[Left]]) -> None:
    """Write ``chunks`` into the (migrated) Redis journal under ``prefix``, a pipeline each."""
    import redis.asyncio as aioredis

    from agents_reconcile._backends.redis.layout import (
        LISTING,
        STAMP,
        JournalKeys,
        listed,
        packed_row,
    )

    layout = JournalKeys(prefix)
    names = layout.names
    client = aioredis.Redis.from_url(url)
    seq = 0
    try:
        for chunk in chunks:
            pipe = client.pipeline(transaction=False)
            for left in chunk:
                keys = layout.session(left.session_id)
                intents, count, decided = keys
                # What raise_count (scripts/prelude.lua) keeps: the count, and the session's
                # stamp on the server's clock (its TIME, as seconds.microseconds).
                pipe.hset(count, mapping={str(BACKEND): left.writes, STAMP: _at(left.counted_at)})
                intent = left.intent
                if intent is not None:
                    ident = intent.intent_id
                    # What store_intent keeps of an opened intent.
                    row = packed_row(
                        state=IntentState.IN_FLIGHT.value,
                        fence=str(left.writes - 1),
                        updated=_at(intent.created_at),
                        created=repr(float(intent.created_at)),
                        backend=str(intent.backend),
                        owner=str(GONE),
                        record=intent.encode(),
                    )
                    pipe.hset(intents, ident, row)
                    pipe.hset(names["index"], ident, left.session_id)
                    pipe.zadd(names[LISTING], {listed(left.session_id, ident): 0})
                if left.decision is not None:
                    # What store_decision and settle keep of a settling decision.
                    seq += 1
                    ident = left.decision.intent_id
                    pipe.hset(names["decision"], seq, left.decision.encode())
                    pipe.rpush(names["log"], seq)
                    pipe.rpush(decided, seq)
                    pipe.hset(names["decided"], ident, seq)
                    pipe.sadd(names["settled"], ident)
                receipt = left.receipt
                if receipt is not None:
                    # What begin_effect and then finish_effect keep of a receipt.
                    assert receipt.finished_at is not None
                    e_order, e_record, e_state, e_owner, e_updated = layout.effects(
                        left.session_id
                    )[-5:]
                    key = receipt.key
                    pipe.hset(names["effect_index"], key, left.session_id)
                    pipe.rpush(e_order, key)
                    pipe.hset(e_state, key, receipt.state.value)
                    pipe.hset(e_owner, key, receipt.owner)
                    pipe.hset(e_updated, key, _at(receipt.finished_at))
                    pipe.hset(e_record, key, receipt.encode())
            await pipe.execute()
        if seq:
            await client.set(names["seq"], seq)
    finally:
        await client.aclose()


def _at(seconds: float) -> str:
    """A time as the Redis scripts stamp one (``now()`` in ``scripts/prelude.lua``)."""
    return f"{seconds:.6f}"


# -- reading them back -----------------------------------------------------------------------


async def check_sample(journal: Any, sample: Iterable[Left]) -> None:
    """Read each session of ``sample`` back through ``journal`` (which decodes, so checks,
    every record it reads): its count, its unresolved intent, its decisions, its receipt."""
    for left in sample:
        pending = await journal.pending(left.session_id)
        if left.intent is not None:
            [entry] = pending
            assert entry.intent == left.intent and entry.state is IntentState.IN_FLIGHT
            assert entry.owner == GONE
        else:
            assert pending == [], pending
        found = await journal.decisions(session_id=left.session_id, limit=5)
        if left.decision is not None:
            assert await journal.is_settled(left.decision.intent_id)
            assert found == [left.decision], found
        else:
            assert found == [], found
        if left.receipt is not None:
            assert await journal.effects.get(left.receipt.key) == left.receipt
            assert await journal.effects.of_session(left.session_id) == [left.receipt]
        assert await journal.write_count(left.session_id, BACKEND) == left.writes
