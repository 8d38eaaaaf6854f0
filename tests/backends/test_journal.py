"""What every engine's journal does beyond the contracts ``agents_reconcile.conformance`` holds
it to (``test_conformance`` runs those on each): records it must store exactly, races between
its workers, reopening, event loops, credentials, driver errors, and effects."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import pytest

from agents_reconcile._backends.journal import IntentJournal, IntentState
from agents_reconcile._backends.opening import open_journal
from agents_reconcile._backends.schema import Unversioned
from agents_reconcile._core.effect_records import Effect, EffectState
from agents_reconcile._core.fingerprint import journal_batch
from agents_reconcile._core.ownership import current_owner
from agents_reconcile._core.sealing import PayloadKey
from agents_reconcile.errors import (
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
    RecordError,
    RecordMalformed,
    RecordTampered,
    UnsupportedRecordVersion,
)

from ..support.backends import Place, closed_port
from ..support.journal_support import (
    BACKEND,
    STRANGER,
    make_decision,
    make_effect,
    make_intent,
)


def ids(entries: Sequence[Any]) -> list[str]:
    """Intent ids of journal entries, in order."""
    return [entry.intent.intent_id for entry in entries]


def workers(place: Place, journal: IntentJournal, count: int) -> list[Any]:
    """``journal`` and other journal objects on its data (where the backend's data outlives
    an object; otherwise ``journal`` again), ``count`` in all."""
    others = [place.journal() if place.backend.durable else journal for _ in range(count - 1)]
    return [journal, *others]


async def test_discard_removes_without_a_decision(journal: IntentJournal) -> None:
    """discard() forgets the intent and records no decision, so it is not settled."""
    await journal.record(make_intent("i-1"), state=IntentState.IN_FLIGHT, owner=current_owner())
    await journal.record(make_intent("i-2", text="x"), state=IntentState.FAILED, owner=STRANGER)

    await journal.discard("i-1")

    assert await journal.get("i-1") is None
    assert ids(await journal.pending("session-a")) == ["i-2"]
    assert not await journal.is_settled("i-1")
    assert await journal.decisions() == []


async def test_a_retried_open_intent_after_a_claim_is_blocked_by_it(
    journal: IntentJournal,
) -> None:
    """open_intent retried after another owner claimed the intent (or its state moved) is not
    recorded: the intent as it now stands is reported as blocking, with the current count."""
    me = current_owner()
    intent = make_intent("i-1")
    await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)
    assert await journal.transition(
        "i-1", state=IntentState.RECONCILING, owner=STRANGER, expect_state=IntentState.IN_FLIGHT
    )

    opened = await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)

    assert not opened.recorded and opened.write_count == 1
    [entry] = opened.blocking
    assert (entry.intent, entry.state, entry.owner) == (intent, IntentState.RECONCILING, STRANGER)

    assert await journal.transition("i-1", state=IntentState.FAILED, owner=me)
    opened = await journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=me)
    assert not opened.recorded and ids(opened.blocking) == ["i-1"]
    assert await journal.write_count("session-a", BACKEND) == 1


async def test_a_batch_with_lone_surrogates_round_trips(journal: IntentJournal) -> None:
    """An intent whose batch holds lone surrogates (in a value and in a key) comes back equal,
    and recording it again is the no-op a retried record is."""
    lone = b"\xff\xfe binary".decode("utf-8", "surrogateescape")
    batch, digests = journal_batch(
        [
            {"type": "function_call_output", "call_id": "c1", "output": lone},
            {"role": "user", "content": [{"\ud800": lone, "n": 1.5}]},
        ]
    )
    intent = dataclasses.replace(make_intent("i-1"), batch=batch, batch_digests=digests)
    owner = current_owner()
    await journal.record(intent, state=IntentState.IN_FLIGHT, owner=owner)
    await journal.record(intent, state=IntentState.FAILED, owner=STRANGER)
    [entry] = await journal.pending("session-a")
    assert entry.intent == intent
    assert entry.intent.batch[0]["output"] == lone
    assert entry.intent.batch[1]["content"][0]["\ud800"] == lone
    assert (entry.state, entry.owner) == (IntentState.IN_FLIGHT, owner)


# -- what every backend's own suite used to check for itself ------------------------------------


def forged(record: bytes, edit: str) -> bytes:
    """The stored record of make_intent("i-1"), edited as ``edit`` says."""
    body = orjson.loads(record)
    if edit == "stale_digest":
        body["batch"] = [{"role": "user", "content": "transfer everything"}]
        return orjson.dumps(body)
    if edit == "recomputed_digest":
        batch = ({"role": "user", "content": "transfer everything"},)
        return dataclasses.replace(make_intent("i-1"), batch=batch).encode()
    if edit == "future_version":
        return orjson.dumps(dict(body, v=99))
    return b"\x00 not a record"


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        ("stale_digest", RecordTampered),
        ("recomputed_digest", RecordTampered),
        ("future_version", UnsupportedRecordVersion),
        ("garbage", RecordMalformed),
    ],
)
async def test_a_record_edited_behind_the_journals_back_is_refused(
    place: Place, journal: IntentJournal, edit: str, error: type[RecordError]
) -> None:
    """An intent record edited in storage raises the same record error from get(), pending()
    and a record() that has to compare with it, on every backend."""
    storage = place.storage()
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    stored = await storage.intent_record("session-a", "i-1")
    await storage.replace_intent_record("session-a", "i-1", forged(stored, edit))
    with pytest.raises(error):
        await journal.get("i-1")
    with pytest.raises(error):
        await journal.pending("session-a")
    with pytest.raises(error):
        await journal.pending(None)
    with pytest.raises(error):
        await journal.record(intent, state=IntentState.FAILED, owner=current_owner())


async def test_check_and_migrate_an_empty_journal(place: Place, journal: IntentJournal) -> None:
    """check() says what is missing and creates nothing; migrate() applies the schema once and
    says so; then check() is satisfied and schema_version() is this release's."""
    if isinstance(journal, Unversioned):
        pytest.skip(f"{place.backend.name}: its storage has no schema")
    problem = await journal.check()
    assert problem is not None and "migrate" in problem
    assert await journal.schema_version() is None
    # Every step, in order: the intents, decisions, counts, effects and set-aside entries,
    # then what pruning needs (when each count was last raised, the floor).
    version = sys.modules[type(journal).__module__].SCHEMA_VERSION
    assert version >= 2
    assert await journal.migrate() == [f"journal schema {n}" for n in range(1, version + 1)]
    assert await journal.check() is None
    assert await journal.migrate() == []
    assert await journal.schema_version() == version


async def test_a_newer_schema_is_refused_and_left_alone(
    place: Place, journal: IntentJournal
) -> None:
    """A schema stamped with a newer version is refused by a journal opened afterwards (its
    operations and migrate() raise JournalCorrupt naming the version; check() says it is
    newer), and nothing changes it."""
    storage = place.storage()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await journal.close()
    future = 42
    await storage.stamp("journal", future)

    fresh = place.journal()
    with pytest.raises(JournalCorrupt, match=rf"\b{future}\b"):
        await fresh.pending("session-a")
    with pytest.raises(JournalCorrupt):
        await fresh.record(make_intent("i-2"), state=IntentState.FAILED, owner=current_owner())
    with pytest.raises(JournalCorrupt, match=rf"\b{future}\b"):
        await fresh.migrate()
    problem = await fresh.check()
    assert problem is not None and str(future) in problem and "newer" in problem
    assert await fresh.schema_version() == future
    assert await storage.intent_record("session-a", "i-1") == make_intent("i-1").encode()


async def test_a_closed_journal_opens_again_and_another_sees_its_data(
    place: Place, journal: IntentJournal
) -> None:
    """After close() a journal opens what it needs on its next use and still holds its data;
    another journal object on the same place sees it and settles it."""
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    await journal.close()
    assert ids(await journal.pending("session-a")) == ["i-1"]
    other = place.journal() if place.backend.durable else journal
    await other.settle(make_decision(make_intent("i-1")))
    await other.close()
    assert await journal.is_settled("i-1")
    assert await journal.pending(None) == []


def test_a_journal_works_from_one_event_loop_to_the_next(place: Place) -> None:
    """A journal used by successive asyncio.run calls (each closing its loop) keeps working,
    and keeps its data."""
    journal = place.journal()

    async def finish() -> list[str]:
        entries = await journal.pending("session-a")
        await journal.close()
        return ids(entries)

    with warnings.catch_warnings():
        # Each loop's connections die with it unclosed, as any asyncio client's do when its
        # loop ends first: collect them here, where their warnings are expected.
        warnings.simplefilter("ignore", ResourceWarning)
        asyncio.run(journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=STRANGER))
        entry = asyncio.run(journal.get("i-1"))
        assert entry is not None and entry.owner == STRANGER
        assert asyncio.run(finish()) == ["i-1"]
        gc.collect()


async def test_no_message_or_repr_shows_the_servers_password(place: Place) -> None:
    """A journal at an address with a password, on a server nobody listens at: its repr, and
    every error its operations raise, name the server without the password."""
    if not place.backend.server:
        pytest.skip(f"{place.backend.name}: its address holds no credentials")
    secret = "hunter2-not-shown"
    parts = urlsplit(place.address)
    address = urlunsplit(parts._replace(netloc=f"agent:{secret}@127.0.0.1:{closed_port()}"))
    journal = place.backend.open_journal(address, namespace=place.space)
    assert secret not in repr(journal)
    intent = make_intent("i-1")
    operations = [
        lambda: journal.pending("session-a"),
        lambda: journal.pending(None),
        lambda: journal.record(intent, state=IntentState.IN_FLIGHT, owner=current_owner()),
        lambda: journal.open_intent(intent, state=IntentState.IN_FLIGHT, owner=current_owner()),
        lambda: journal.settle(make_decision(intent)),
        lambda: journal.check(),
        lambda: journal.migrate(),
    ]
    for operation in operations:
        with pytest.raises(JournalUnavailable) as caught:
            await operation()
        assert secret not in str(caught.value)
        assert "127.0.0.1" in str(caught.value)
    await journal.close()


# -- clearing an acknowledged intent in the next opening ---------------------------------------


# -- several workers on one journal's data -----------------------------------------------------


async def test_an_id_one_session_holds_is_refused_to_another_worker_for_another_session(
    place: Place, journal: IntentJournal
) -> None:
    """An id held by one session cannot be recorded or opened for another session by another
    worker, and that session stays empty."""
    _, other = workers(place, journal, 2)
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=current_owner())
    elsewhere = make_intent("i-1", session_id="session-b")
    with pytest.raises(IntentConflict):
        await other.record(elsewhere, state=IntentState.FAILED, owner=current_owner())
    with pytest.raises(IntentConflict):
        await other.open_intent(elsewhere, state=IntentState.FAILED, owner=current_owner())
    assert await other.pending("session-b") == []


async def test_racing_records_of_one_intent_store_and_count_it_once(
    place: Place, journal: IntentJournal
) -> None:
    """Four workers recording one intent at once all succeed; it is stored and counted once;
    while an intent of the session is unresolved, records of others still go in."""
    racing = workers(place, journal, 4)
    await journal.migrate()
    owner = current_owner()
    for round_ in range(20):
        intent = make_intent(f"r{round_}", created_at=1_000.0 + round_, text=str(round_))
        await asyncio.gather(
            *(each.record(intent, state=IntentState.FAILED, owner=owner) for each in racing)
        )
        assert await racing[1].write_count("session-a", BACKEND) == round_ + 1
    assert ids(await racing[2].pending("session-a")) == [f"r{n}" for n in range(20)]


@pytest.mark.parametrize("same", [False, True], ids=["different", "same"])
async def test_racing_settlements_settle_once(
    place: Place, journal: IntentJournal, same: bool
) -> None:
    """Two workers settling one intent at once store one decision and count one write: with
    different decisions the loser's is refused; with the very same decision (a retry racing
    its first attempt) both succeed."""
    first, second = workers(place, journal, 2)
    refusal = "IntentConflict"
    owner = current_owner()
    for round_ in range(15):
        intent = make_intent(f"s{round_}", text=str(round_))
        await first.record(intent, state=IntentState.RECONCILING, owner=owner)
        decisions = [make_decision(intent, decided_at=100.0 + n * (not same)) for n in range(2)]
        results = await asyncio.gather(
            first.settle(decisions[0], owner=owner),
            second.settle(decisions[1], owner=owner),
            return_exceptions=True,
        )
        outcomes = sorted(type(result).__name__ for result in results)
        assert outcomes == (["NoneType", "NoneType"] if same else sorted([refusal, "NoneType"]))
        stored = await second.decisions(intent_id=intent.intent_id)
        assert stored == [decisions[results.index(None)]]
    assert await first.pending(None) == []
    assert await first.write_count("session-a", BACKEND) == 30


async def test_a_record_filed_under_another_id_is_refused(place: Place, journal: Any) -> None:
    """A valid record copied over another intent's or another effect's (its digest matches,
    its id or key does not) is refused instead of passing as that intent or effect."""
    storage = place.storage()
    owner = current_owner()
    await journal.record(make_intent("i-1"), state=IntentState.FAILED, owner=owner)
    await journal.record(make_intent("i-2", text="other"), state=IntentState.FAILED, owner=owner)
    copied = await storage.intent_record("session-a", "i-1")
    await storage.replace_intent_record("session-a", "i-2", copied)
    with pytest.raises(RecordTampered):
        await journal.get("i-2")

    first, second = make_effect("c1"), make_effect("c2")
    await journal.effects.begin(first)
    await journal.effects.begin(second)
    copied = await storage.effect_record("session-a", first.key)
    await storage.replace_effect_record("session-a", second.key, copied)
    with pytest.raises(RecordTampered):
        await journal.effects.get(second.key)
    assert await journal.effects.get(first.key) == first


def test_open_journal_passes_a_journal_object_through(journal: IntentJournal) -> None:
    """open_journal() of a journal object, whatever its backend, returns that very object."""
    assert open_journal(journal) is journal


# -- effects beside the intents ----------------------------------------------------------------


def taken_by(effect: Effect, owner: str) -> Effect:
    """``effect`` started again under ``owner``, one attempt more."""
    return dataclasses.replace(effect, owner=owner, attempts=effect.attempts + 1)


async def test_effects_count_no_write_of_their_session(journal: Any) -> None:
    """Beginning, restarting and finishing effects count no write of the session and list no
    intent."""
    effect = make_effect()
    await journal.effects.begin(effect)
    mine = taken_by(effect, "me/3/3")
    assert await journal.effects.restart(mine, expect_owner=effect.owner)
    await journal.effects.finish(mine.with_receipt("ok", at=2.0))
    assert await journal.write_count("session-a", BACKEND) == 0
    assert await journal.pending(None) == []


@pytest.mark.parametrize("same", [False, True], ids=["different", "same"])
async def test_racing_receipts_store_one(place: Place, journal: Any, same: bool) -> None:
    """Two workers storing a receipt for one started effect at once: with different receipts
    one wins and the other gets IntentConflict; with the very same receipt (a retry racing
    its first attempt) both succeed. The record stored is the winner's."""
    first, second = workers(place, journal, 2)
    await first.migrate()
    for round_ in range(15):
        effect = make_effect(f"c{round_}")
        await first.effects.begin(effect)
        receipts = [effect.with_receipt(f"ok {n * (not same)}", at=10.0) for n in range(2)]
        results = await asyncio.gather(
            first.effects.finish(receipts[0]),
            second.effects.finish(receipts[1]),
            return_exceptions=True,
        )
        kinds = sorted(type(result).__name__ for result in results)
        assert kinds == (["Effect", "Effect"] if same else ["Effect", "IntentConflict"])
        winner = next(result for result in results if isinstance(result, Effect))
        assert await second.effects.get(effect.key) == winner


async def test_racing_restarts_take_the_effect_once(place: Place, journal: Any) -> None:
    """Workers restarting one started effect from the same owner at once: exactly one takes
    it, and its record is the one stored."""
    racing = workers(place, journal, 4)
    await journal.migrate()
    for round_ in range(15):
        effect = make_effect(f"c{round_}")
        await journal.effects.begin(effect)
        mine = [taken_by(effect, f"worker/{n}/1") for n in range(4)]
        taken = await asyncio.gather(
            *(
                each.effects.restart(record, expect_owner=effect.owner)
                for each, record in zip(racing, mine, strict=True)
            )
        )
        assert sum(taken) == 1
        assert await racing[1].effects.get(effect.key) == mine[taken.index(True)]


async def test_a_receipt_sealed_anew_is_the_same_receipt(place: Place, journal: Any) -> None:
    """A sealed output is sealed with a new nonce on every encoding: the same receipt again is
    still a no-op returning the stored one, another output conflicts, and a worker holding
    the key reads the receipt back."""
    key = PayloadKey(os.urandom(32))
    journal.keyring.add([key])
    effect = make_effect(seal_key=key)
    await journal.effects.begin(effect)
    done = effect.with_receipt("charged 5 (SECRET)", at=10.0)
    assert done.encode() != done.encode()
    assert await journal.effects.finish(done) == done
    assert await journal.effects.finish(done) == done
    with pytest.raises(IntentConflict):
        await journal.effects.finish(effect.with_receipt("charged 6", at=10.0))
    _, reader = workers(place, journal, 2)
    reader.keyring.add([key])
    stored = await reader.effects.get(effect.key)
    assert stored == done and stored is not None and stored.state is EffectState.DONE
    assert stored.output == "charged 5 (SECRET)"


async def test_a_sealed_receipt_is_stored_sealed_and_left_by_its_retry(
    place: Place, journal: Any
) -> None:
    """The stored record of a sealed receipt does not show its output, and the same receipt
    again leaves the stored bytes as they are."""
    storage = place.storage()
    key = PayloadKey(os.urandom(32))
    journal.keyring.add([key])
    effect = make_effect(seal_key=key)
    await journal.effects.begin(effect)
    done = effect.with_receipt("charged 5 (SECRET-sealed-output)", at=3.0)
    await journal.effects.finish(done)
    stored = await storage.effect_record("session-a", effect.key)
    assert b"SECRET-sealed-output" not in stored
    assert await journal.effects.finish(done) == done
    assert await storage.effect_record("session-a", effect.key) == stored
