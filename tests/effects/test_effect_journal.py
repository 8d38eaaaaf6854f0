"""The effects component of every registered journal (``JournalEffects``): an effect's intent is
recorded once per key, its receipt stored over it by its owner only, the very same receipt
again is a no-op, a restart takes a started effect from its owner by compare-and-set, and
records come back as written (sealed outputs sealed, signed records checked)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents_reconcile._backends.components import JournalEffects
from agents_reconcile._backends.journal import IntentState
from agents_reconcile._core.effect_records import Effect, EffectState, effect_key
from agents_reconcile._core.ownership import current_owner
from agents_reconcile.errors import IntentConflict, RecordError

from ..support.backends import Place
from ..support.journal_support import make_effect, make_intent

SECRET = "effect-output-SECRET-theta"


def test_the_key_is_the_call_and_its_canonical_arguments() -> None:
    key = effect_key("s", "c1", "charge_card", '{"amount": 5, "to": "x"}')
    assert key == effect_key("s", "c1", "charge_card", '{"to":"x","amount":5}')
    assert key != effect_key("s", "c2", "charge_card", '{"amount": 5, "to": "x"}')
    assert key != effect_key("t", "c1", "charge_card", '{"amount": 5, "to": "x"}')
    assert key != effect_key("s", "c1", "refund", '{"amount": 5, "to": "x"}')
    assert key != effect_key("s", "c1", "charge_card", '{"amount": 6, "to": "x"}')
    assert len(key) == 64


async def test_every_journal_keeps_effects(journal: Any) -> None:
    """Every registered journal has an effects component."""
    assert isinstance(journal.effects, JournalEffects)


async def test_an_intent_is_recorded_once_per_key(journal: Any) -> None:
    effect = make_effect()
    stored, recorded = await journal.effects.begin(effect)
    assert recorded and stored == effect
    again, recorded = await journal.effects.begin(make_effect(owner="elsewhere/2/2"))
    assert not recorded
    assert again == effect, "the first intent stays, with its owner"
    assert await journal.effects.get(effect.key) == effect
    assert await journal.effects.get("0" * 64) is None


async def test_racing_intents_record_exactly_one(place: Place) -> None:
    if not place.backend.durable:
        pytest.skip(f"{place.backend.name}: each journal object holds its own data")
    journals = [place.journal() for _ in range(4)]
    answers = await asyncio.gather(
        *(j.effects.begin(make_effect(owner=f"worker/{n}/1")) for n, j in enumerate(journals))
    )
    assert sum(recorded for _, recorded in answers) == 1
    assert len({stored.owner for stored, _ in answers}) == 1


async def test_a_receipt_is_stored_by_the_owner_once(journal: Any) -> None:
    effect = make_effect()
    await journal.effects.begin(effect)
    done = effect.with_receipt(f"charged 5 ({SECRET})", at=1_700_000_010.0)
    stored = await journal.effects.finish(done)
    assert stored == done and stored.state is EffectState.DONE
    assert (await journal.effects.get(effect.key)) == done
    assert await journal.effects.finish(done) == done, "the very same receipt again"
    with pytest.raises(IntentConflict):
        await journal.effects.finish(effect.with_receipt("charged 6", at=1_700_000_020.0))
    again, recorded = await journal.effects.begin(make_effect())
    assert not recorded and again == done, "a done effect is never begun again"


async def test_a_receipt_needs_the_started_record_of_its_owner(journal: Any) -> None:
    effect = make_effect()
    with pytest.raises(IntentConflict):
        await journal.effects.finish(effect.with_receipt("x", at=1.0))
    await journal.effects.begin(effect)
    stranger = Effect(**{**effect.__dict__, "owner": "elsewhere/2/2"})
    with pytest.raises(IntentConflict):
        await journal.effects.finish(stranger.with_receipt("x", at=1.0))
    assert (await journal.effects.get(effect.key)) == effect


async def test_a_restart_takes_a_started_effect_by_compare_and_set(journal: Any) -> None:
    effect = make_effect()
    await journal.effects.begin(effect)
    mine = Effect(**{**effect.__dict__, "owner": "me/3/3", "attempts": 2})
    assert not await journal.effects.restart(mine, expect_owner="someone/9/9")
    assert await journal.effects.restart(mine, expect_owner=effect.owner)
    assert (await journal.effects.get(effect.key)) == mine
    assert not await journal.effects.restart(mine, expect_owner=effect.owner), "taken already"
    done = mine.with_receipt("ok", at=2.0)
    await journal.effects.finish(done)
    assert not await journal.effects.restart(
        Effect(**{**mine.__dict__, "owner": "late/4/4"}), expect_owner=mine.owner
    ), "a done effect is never restarted"


async def test_effects_of_a_session_oldest_first(journal: Any) -> None:
    first, second = make_effect("c1"), make_effect("c2")
    other = make_effect("c3", session_id="session-b")
    for effect in (first, second, other):
        await journal.effects.begin(effect)
    assert [e.key for e in await journal.effects.of_session("session-a")] == [first.key, second.key]
    assert [e.key for e in await journal.effects.of_session("session-b")] == [other.key]


async def test_effects_leave_the_intents_alone(journal: Any) -> None:
    """Effects are kept beside the session writes: no pending intent, no write counted."""
    intent = make_intent("i-1")
    await journal.record(intent, state=IntentState.FAILED, owner=current_owner())
    await journal.effects.begin(make_effect())
    assert [e.intent.intent_id for e in await journal.pending("session-a")] == ["i-1"]


async def test_an_edited_receipt_is_refused(place: Place, journal: Any) -> None:
    effect = make_effect()
    await journal.effects.begin(effect)
    await journal.effects.finish(effect.with_receipt("charged 5", at=3.0))
    storage: Any = place.storage()
    raw: bytes = await storage.effect_record("session-a", effect.key)
    await storage.replace_effect_record(
        "session-a", effect.key, raw.replace(b"charged 5", b"charged 9")
    )
    with pytest.raises(RecordError):
        await place.journal().effects.get(effect.key)


async def test_started_effects_are_those_without_a_receipt_in_every_session(journal: Any) -> None:
    """The journal-wide listing of what may wait for an operator: started effects of every
    session (or of one), in the order they were begun; a receipt takes an effect off it, a
    restart keeps it there under its new owner."""
    first, done, other = (
        make_effect("c1"),
        make_effect("c2"),
        make_effect("c3", session_id="session-b"),
    )
    assert await journal.effects.started() == []
    for effect in (first, done, other):
        await journal.effects.begin(effect)
    await journal.effects.finish(done.with_receipt(f"charged 5 ({SECRET})", at=2.0))
    assert [e.key for e in await journal.effects.started()] == [first.key, other.key]
    assert [e.key for e in await journal.effects.started("session-b")] == [other.key]
    assert await journal.effects.started("session-c") == []
    taken = Effect(**{**first.__dict__, "owner": "me/3/3", "attempts": 2})
    assert await journal.effects.restart(taken, expect_owner=first.owner)
    listed = await journal.effects.started("session-a")
    assert [(e.key, e.owner, e.state) for e in listed] == [
        (first.key, "me/3/3", EffectState.STARTED)
    ]
    await journal.effects.finish(taken.with_receipt("ok", at=3.0))
    assert [e.key for e in await journal.effects.started()] == [other.key]


async def test_a_damaged_started_effect_hides_no_other(place: Place, journal: Any) -> None:
    """Read for an operator (``collecting_damage``), an edited started row is reported with
    its key and session and the other started effects are still listed; read otherwise, it
    raises."""
    from agents_reconcile._backends.rows import collecting_damage

    edited, kept = make_effect("c1"), make_effect("c2", session_id="session-b")
    for effect in (edited, kept):
        await journal.effects.begin(effect)
    storage: Any = place.storage()
    raw: bytes = await storage.effect_record("session-a", edited.key)
    await storage.replace_effect_record(
        "session-a", edited.key, raw.replace(b'"attempts":1', b'"attempts":7')
    )
    reader = place.journal()
    with collecting_damage() as damaged:
        listed = await reader.effects.started()
    assert [e.key for e in listed] == [kept.key]
    assert [(d.kind, d.ident, d.session_id) for d in damaged] == [
        ("effect", edited.key, "session-a")
    ]
    with pytest.raises(RecordError):
        await reader.effects.started()
