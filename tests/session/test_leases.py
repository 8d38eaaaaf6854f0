"""Leases and fencing tokens: the journal side (every registered journal) and the rule a
worker follows before taking over another worker's intent."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_reconcile import ContinuationDenied, ReconcileConfig, ReconcilingSession
from agents_reconcile._backends.journal import IntentJournal, IntentState
from agents_reconcile._backends.memory.journal import MemoryJournal
from agents_reconcile._backends.sqlite.store import RevisionedSQLiteSession
from agents_reconcile._core.ownership import Owner, Takeover, current_owner, takeover
from agents_reconcile._core.records import Action, Reason
from agents_reconcile._session.claims import Renewal
from agents_reconcile._session.resolver import RESOLVE_AFTER_LEASES
from agents_reconcile.errors import LeaseLost, ResolutionRefused

from ..support.backends import Place
from ..support.journal_support import STRANGER, make_decision, make_intent

ELSEWHERE = Owner(host="other-host#0badc0de", pid=1, started="1")
USER = {"role": "user", "content": "hello"}


async def opened(journal: IntentJournal, intent_id: str = "i-1") -> int:
    """Open an intent in flight under this process; its token."""
    intent = make_intent(intent_id)
    answer = await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner())
    assert answer.recorded
    entry = await journal.get(intent_id)
    assert entry is not None and entry.fence == answer.write_count
    return entry.fence


async def claimed(journal: IntentJournal, owner: Owner, intent_id: str = "i-1") -> int:
    entry = await journal.get(intent_id)
    assert entry is not None
    assert await journal.transition(
        intent_id,
        state=IntentState.RECONCILING,
        owner=owner,
        expect_state=entry.state,
        expect_owner=entry.owner,
    )
    after = await journal.get(intent_id)
    assert after is not None and after.owner == owner
    return after.fence


async def test_every_claim_takes_a_greater_token(journal: IntentJournal) -> None:
    """Opening gives a token; each claim after it a greater one, whoever claims."""
    first = await opened(journal)
    second = await claimed(journal, STRANGER)
    third = await claimed(journal, current_owner())
    assert first < second < third


async def test_a_claim_counts_no_write(journal: IntentJournal) -> None:
    """Who holds an intent is not a write: a RunState's account of the session stays true."""
    await opened(journal)
    before = await journal.write_count("session-a", make_intent("i-1").backend)
    await claimed(journal, STRANGER)
    assert await journal.write_count("session-a", make_intent("i-1").backend) == before


async def test_a_stale_token_is_refused_everywhere(journal: IntentJournal) -> None:
    """After another worker's claim, the old holder can neither renew, release, clear nor
    settle under its token: LeaseLost (or a refused compare-and-set), nothing changed."""
    me = current_owner()
    mine = await claimed(journal, me, intent_id=await _open_id(journal))
    theirs = await claimed(journal, STRANGER)
    assert theirs > mine
    assert not await journal.transition(
        "i-1",
        state=IntentState.RECONCILING,
        owner=me,
        expect_state=IntentState.RECONCILING,
        expect_owner=me,
        expect_fence=mine,
    )
    with pytest.raises(LeaseLost):
        await journal.settle(make_decision(make_intent("i-1")), owner=me, fence=mine)
    with pytest.raises(LeaseLost):
        await journal.discard("i-1", owner=me)
    entry = await journal.get("i-1")
    assert entry is not None and (entry.owner, entry.fence) == (STRANGER, theirs)
    # The holder settles under its own token.
    await journal.settle(make_decision(make_intent("i-1")), owner=STRANGER, fence=theirs)
    assert await journal.is_settled("i-1")


async def _open_id(journal: IntentJournal) -> str:
    await opened(journal)
    return "i-1"


async def test_a_holder_renews_under_its_token(journal: IntentJournal) -> None:
    """The same state and owner again, with the token expected, renews the lease: the age
    starts again and the token stays."""
    token = await opened(journal)
    await asyncio.sleep(0.3)
    before = await journal.get("i-1")
    assert before is not None and before.held_for(time.time()) >= 0.25
    me = current_owner()
    assert await journal.transition(
        "i-1",
        state=IntentState.IN_FLIGHT,
        owner=me,
        expect_state=IntentState.IN_FLIGHT,
        expect_owner=me,
        expect_fence=token,
    )
    after = await journal.get("i-1")
    assert after is not None and after.fence == token
    assert after.held_for(time.time()) < 0.2


async def test_a_claim_on_a_lease_renewed_since_it_was_read_fails(journal: IntentJournal) -> None:
    """A worker that found a lease expired claims it only if the holder has not renewed it
    since: the claim expects the update time it read."""
    token = await opened(journal)
    seen = await journal.get("i-1")
    assert seen is not None
    await asyncio.sleep(0.01)
    me = current_owner()
    assert await journal.transition(
        "i-1",
        state=IntentState.IN_FLIGHT,
        owner=me,
        expect_state=IntentState.IN_FLIGHT,
        expect_owner=me,
        expect_fence=token,
    )
    assert not await journal.transition(
        "i-1",
        state=IntentState.RECONCILING,
        owner=STRANGER,
        expect_state=seen.state,
        expect_owner=seen.owner,
        expect_updated_at=seen.updated_at,
    )
    fresh = await journal.get("i-1")
    assert fresh is not None and (fresh.owner, fresh.fence) == (me, token)
    assert await journal.transition(
        "i-1",
        state=IntentState.RECONCILING,
        owner=STRANGER,
        expect_state=fresh.state,
        expect_owner=fresh.owner,
        expect_updated_at=fresh.updated_at,
    )


async def test_clearing_requires_the_holder(journal: IntentJournal) -> None:
    """discard with an owner clears only that owner's in-flight intent; an unknown id is no
    error (settled by whoever took it)."""
    token = await opened(journal)
    with pytest.raises(LeaseLost):
        await journal.discard("i-1", owner=STRANGER)
    with pytest.raises(LeaseLost):
        await journal.discard("i-1", owner=current_owner(), fence=token + 1)
    await journal.discard("i-1", owner=current_owner(), fence=token)
    assert await journal.get("i-1") is None
    await journal.discard("i-1", owner=current_owner())


async def test_server_journals_judge_age_on_their_own_clock(place: Place) -> None:
    """Redis and PostgreSQL stamp and age intents by the server's time, so a writer whose
    clock is off cannot shorten (or lengthen) a lease."""
    if place.backend.name not in ("redis", "postgres"):
        pytest.skip(
            "a journal in this process or in a file on this machine: its clock is the reader's"
        )
    journal = place.journal()
    await opened(journal)
    entry = await journal.get("i-1")
    assert entry is not None and entry.age is not None
    assert 0 <= entry.age < 5


def test_takeover_rule() -> None:
    """A worker on another host within its lease holds; past it, its intent is EXPIRED, not
    free (it may be stalled); a failed intent is free; on this host the pid decides."""
    me = current_owner()

    def way(owner: Owner, *, age: float, active: bool = True, alive: bool = True) -> Takeover:
        return takeover(
            owner,
            active=active,
            in_flight_here=False,
            age_seconds=age,
            lease_seconds=1.0,
            me=me,
            started_of=lambda pid: "1" if alive else None,
        )

    assert way(ELSEWHERE, age=0.5) is Takeover.HELD
    assert way(ELSEWHERE, age=1.5) is Takeover.EXPIRED
    assert way(ELSEWHERE, age=1.5, active=False) is Takeover.FREE
    neighbour = Owner(host=me.host, pid=me.pid + 1, started="1")
    assert way(neighbour, age=99) is Takeover.HELD
    assert way(neighbour, age=99, alive=False) is Takeover.FREE


async def test_renewal_keeps_a_slow_holders_lease(tmp_path: Path) -> None:
    """A holder whose append outlives the lease renews it: others see it held throughout,
    and it may still start its write at the end."""
    journal = MemoryJournal()
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=journal, lease_seconds=0.3),
    )
    token = await opened(journal)
    with session._settler.claims.leased("i-1", IntentState.IN_FLIGHT, token) as lease:
        for _ in range(8):
            await asyncio.sleep(0.1)
            entry = await journal.get("i-1")
            assert entry is not None and time.time() - entry.updated_at < 0.3
        lease.check()


async def test_leases_held_at_once_share_one_timer_and_each_is_renewed(tmp_path: Path) -> None:
    """Holding a lease arms no timer of its own: twenty intents held at once on one loop add
    one timer, not twenty, and a slow holder among them is still renewed in time (as are
    leases taken after the timer was armed, and leases of a shorter length)."""
    journal = MemoryJournal()
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=journal, lease_seconds=0.3),
    )
    claims = session._settler.claims
    loop = asyncio.get_running_loop()
    timers_before = len(loop._scheduled)  # type: ignore[attr-defined]
    leases = [claims.leased(f"x-{n}", IntentState.IN_FLIGHT, 0) for n in range(20)]
    for lease in leases:
        lease.__enter__()
    assert len(loop._scheduled) - timers_before == 1  # type: ignore[attr-defined]
    for lease in leases:
        lease.__exit__(None, None, None)

    token = await opened(journal)
    await asyncio.sleep(0.05)
    short = Renewal(
        session._client, "i-2", state=IntentState.IN_FLIGHT, fence=0, lease_seconds=0.15
    )
    other = make_intent("i-2", session_id="session-b")
    assert (
        await journal.open_intent(other, state=IntentState.IN_FLIGHT, owner=current_owner())
    ).recorded
    with claims.leased("i-1", IntentState.IN_FLIGHT, token) as lease, short:
        for _ in range(8):
            await asyncio.sleep(0.1)
            for intent_id, seconds in (("i-1", 0.3), ("i-2", 0.15)):
                entry = await journal.get(intent_id)
                assert entry is not None and time.time() - entry.updated_at < seconds
        lease.check()


def test_a_loop_that_held_a_lease_is_not_kept_alive_by_it(tmp_path: Path) -> None:
    """The leases held on an event loop share a keeper, which must not outlive its loop: a
    process that runs each request on a loop of its own (``Runner.run_sync``) would otherwise
    keep every loop it ever appended on."""
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def append_once() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        session = ReconcilingSession(
            SQLiteSession("s", tmp_path / "chat.db"),
            config=ReconcileConfig(journal=tmp_path / "journal.db"),
        )
        await session.add_items([USER])

    for _ in range(3):
        asyncio.run(append_once())
    gc.collect()
    assert [loop() for loop in loops] == [None, None, None]


async def test_a_lost_lease_stops_the_holder_before_it_writes(tmp_path: Path) -> None:
    """Once another worker claims the intent, the holder's next renewal finds out, and
    ``check`` (called before any write to the store) raises LeaseLost."""
    journal = MemoryJournal()
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"),
        config=ReconcileConfig(journal=journal, lease_seconds=0.3),
    )
    token = await opened(journal)
    with session._settler.claims.leased("i-1", IntentState.IN_FLIGHT, token) as lease:
        await claimed(journal, STRANGER)
        await asyncio.sleep(0.25)
        assert lease.lost
        with pytest.raises(LeaseLost):
            lease.check()


async def test_an_unrenewed_lease_stops_the_holder_at_two_thirds(tmp_path: Path) -> None:
    """A holder that could not confirm a renewal for two thirds of the lease starts no
    write: others may be about to take over."""
    journal = MemoryJournal()
    session = ReconcilingSession(
        SQLiteSession("s", tmp_path / "chat.db"), config=ReconcileConfig(journal=journal)
    )
    lease = Renewal(
        session._client, "i-1", state=IntentState.IN_FLIGHT, fence=0, lease_seconds=0.15
    )
    lease.check()
    await asyncio.sleep(0.11)
    with pytest.raises(LeaseLost):
        lease.check()


async def foreign_intent(session: ReconcilingSession, store: Any, state: IntentState) -> None:
    """An intent of a worker on another host, in ``state``, on top of the current history."""
    from agents_reconcile._core.fingerprint import digest_items
    from agents_reconcile._core.records import PendingWrite

    before = await store.get_items()
    revision = await store.head() if isinstance(store, RevisionedSQLiteSession) else None
    intent = PendingWrite(
        intent_id="foreign-1",
        session_id=session.session_id,
        backend=session.backend_identity,
        batch=(USER,),
        batch_digests=digest_items([USER]),
        before_digests=digest_items(before),
        before_is_whole=True,
        created_at=time.time(),
        persisted_count=len(before),
        expected_revision=revision,
    )
    await session.journal.record(intent, state=state, owner=ELSEWHERE)


def wrapped(tmp_path: Path, store: Any) -> ReconcilingSession:
    config = ReconcileConfig(
        journal=tmp_path / "journal.db", lease_seconds=0.05, in_flight_wait=0.2
    )
    return ReconcilingSession(store, config=config)


async def test_an_expired_lease_is_not_taken_over_where_nothing_fences(tmp_path: Path) -> None:
    """On the SDK's own session a foreign worker whose lease ran out while in flight may be
    stalled, not dead: its batch is never replayed on the rule's word. The run is denied
    ``lease_expired`` (nothing written, nothing claimed); when the owner ends its append
    (here: marks it failed), the next call settles it; an operator may resolve it."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    session = wrapped(tmp_path, store)
    await foreign_intent(session, store, IntentState.IN_FLIGHT)
    await asyncio.sleep(0.1)
    with pytest.raises(ContinuationDenied) as denied:
        await session.add_items([{"role": "user", "content": "mine"}])
    decision = denied.value.decision
    assert decision.reason is Reason.LEASE_EXPIRED and decision.action is Action.DENIED
    assert decision.evidence["fenced"] is False and decision.evidence["lease_seconds"] == 0.05
    assert await store.get_items() == []
    entry = await session.journal.get("foreign-1")
    assert entry is not None and entry.owner == ELSEWHERE  # never claimed
    # The owner finishes: its append failed after all. Now nobody holds it.
    assert await session.journal.transition(
        "foreign-1", state=IntentState.FAILED, owner=ELSEWHERE, expect_owner=ELSEWHERE
    )
    await session.add_items([{"role": "user", "content": "mine"}])
    assert [item["content"] for item in await store.get_items()] == ["hello", "mine"]


async def test_an_expired_lease_whose_write_landed_is_settled(tmp_path: Path) -> None:
    """Where nothing fences, an expired owner's intent is still settled when its batch is
    already in the history: that owner never writes it again (here: killed after the store
    committed, before it cleared its intent)."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    session = wrapped(tmp_path, store)
    await foreign_intent(session, store, IntentState.IN_FLIGHT)
    await store.add_items([USER])  # the owner's write landed
    await asyncio.sleep(0.1)
    await session.add_items([{"role": "user", "content": "mine"}])
    assert [item["content"] for item in await store.get_items()] == ["hello", "mine"]
    [decision] = await session.journal.decisions(intent_id="foreign-1")
    assert (decision.reason, decision.action) == (Reason.BATCH_PRESENT, Action.SETTLED)


async def test_an_operator_may_resolve_an_expired_lease(tmp_path: Path) -> None:
    """The denial names a way out: an operator who knows the owner is gone resolves it."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    session = wrapped(tmp_path, store)
    await foreign_intent(session, store, IntentState.IN_FLIGHT)
    await asyncio.sleep(0.1)
    with pytest.raises(ContinuationDenied):
        await session.add_items([{"role": "user", "content": "mine"}])
    # Until its lease is long past, the owner may only be frozen: refused meanwhile.
    with pytest.raises(ResolutionRefused, match="may only be frozen"):
        await session.resolve("foreign-1", "replay", reason="host-b is gone", actor="ops")
    await asyncio.sleep(0.05 * RESOLVE_AFTER_LEASES)
    decision = await session.resolve(
        "foreign-1", "replay", reason="host-b is decommissioned", actor="ops"
    )
    assert decision.action is Action.REPLAYED
    await session.add_items([{"role": "user", "content": "mine"}])
    assert [item["content"] for item in await store.get_items()] == ["hello", "mine"]


async def test_an_expired_lease_is_taken_over_where_the_store_fences(tmp_path: Path) -> None:
    """On a revisioned store the old owner's late write would be refused by the store's
    compare-and-swap: its expired intent is taken over at once and replayed once."""
    store = RevisionedSQLiteSession("s1", tmp_path / "revisioned.db")
    session = wrapped(tmp_path, store)
    await foreign_intent(session, store, IntentState.IN_FLIGHT)
    await asyncio.sleep(0.1)
    await session.add_items([{"role": "user", "content": "mine"}])
    assert [item["content"] for item in await store.get_items()] == ["hello", "mine"]
    assert await session.journal.is_settled("foreign-1")


async def test_a_failed_foreign_intent_is_settled_whatever_the_store(tmp_path: Path) -> None:
    """A failed intent is held by nobody: settled at once, lease or not."""
    store = SQLiteSession("s1", tmp_path / "chat.db")
    session = wrapped(tmp_path, store)
    await foreign_intent(session, store, IntentState.FAILED)
    await session.add_items([{"role": "user", "content": "mine"}])
    assert [item["content"] for item in await store.get_items()] == ["hello", "mine"]


async def test_a_claim_lost_before_the_replay_is_looked_at_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A settler whose lease gives out just before its replay writes nothing, and does not
    take the intent for settled: it looks again, claims it anew and replays it once."""
    from agents_reconcile.testing import BackendFailure, Fault, FaultInjectingSession

    store = SQLiteSession("s1", tmp_path / "chat.db")
    faulty = FaultInjectingSession(store)
    faulty.plan(Fault.REJECT, at=1)
    session = ReconcilingSession(faulty, config=ReconcileConfig(journal=tmp_path / "journal.db"))
    with pytest.raises(BackendFailure):
        await session.add_items([USER])
    checks = 0
    check = Renewal.check

    def runs_down_once(lease: Renewal) -> None:
        nonlocal checks
        checks += 1
        if checks == 1:
            raise LeaseLost(f"intent {lease.intent_id}: ran down", intent_id=lease.intent_id)
        check(lease)

    monkeypatch.setattr(Renewal, "check", runs_down_once)
    [decision] = await session.reconcile()
    assert decision.action is Action.REPLAYED and checks == 2
    assert await session.pending() == []
    assert [item["content"] for item in await store.get_items()] == ["hello"]
