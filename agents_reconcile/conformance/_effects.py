"""The effects component's contracts (``JournalEffects``, ``journal.effects``), checked on a
journal whose ``effects`` is one; skipped, with the reason, on one whose ``effects`` is None: a
journal without effects cannot serve effect tools."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from .._core.effect_records import Effect, EffectState
from ..errors import IntentConflict
from ._core import Subject, contract, refused, require, skip
from ._journal import journal_of, worker
from ._records import make_effect

__all__: list[str] = []


async def _effect_journal(subject: Subject) -> Any:
    journal = await journal_of(subject)
    _require_effects(journal)
    return journal


def _require_effects(journal: Any) -> None:
    """Skip the contract, saying why, unless ``journal`` keeps effects."""
    if journal.effects is None:
        skip(
            "the journal has no effects component (journal.effects is None; a JournalEffects: "
            "begin, restart, finish, get, of_session, started): it cannot serve effect tools"
        )


def _owned(effect: Effect, owner: str, **changes: Any) -> Effect:
    """``effect`` under another owner (a restart's record)."""
    return dataclasses.replace(effect, owner=owner, **changes)


@contract("effects")
async def begin_effect_records_once_per_key(subject: Subject) -> None:
    """``effects.begin()`` records an effect only when its key is unknown and returns the record
    held afterwards (the first stays); of callers racing with one key, exactly one records."""
    journal = await _effect_journal(subject)
    effect = make_effect()
    stored, recorded = await journal.effects.begin(effect)
    require(recorded is True and stored == effect, "the first effects.begin() did not record it")
    again, recorded = await journal.effects.begin(make_effect(owner="elsewhere/2/2"))
    require(recorded is False, "effects.begin() of a known key recorded it again")
    require(again == effect, f"effects.begin() of a known key answered {again}, not the first")
    require(
        await journal.effects.get(effect.key) == effect,
        "effects.get() does not hold the first record",
    )
    require(
        await journal.effects.get("0" * 64) is None, "effects.get() of an unknown key found one"
    )
    journals = [journal, await worker(subject, journal)]
    answers = await asyncio.gather(
        *(
            journals[n % 2].effects.begin(make_effect("race", owner=f"worker/{n}/1"))
            for n in range(4)
        )
    )
    winners = sum(1 for _, recorded in answers if recorded)
    require(winners == 1, f"{winners} racing effects.begin() calls of one key recorded")
    owners = {stored.owner for stored, _ in answers}
    require(len(owners) == 1, f"racing effects.begin() calls answered owners {sorted(owners)}")


@contract("effects")
async def restart_effect_is_a_compare_and_set(subject: Subject) -> None:
    """``effects.restart()`` replaces a started effect only under the owner expected, answering
    False and changing nothing for another owner, a key taken already, a done effect or an
    unknown key."""
    journal = await _effect_journal(subject)
    effect = make_effect()
    await journal.effects.begin(effect)
    mine = _owned(effect, "me/3/3", attempts=2)
    require(
        not await journal.effects.restart(mine, expect_owner="someone/9/9"),
        "effects.restart() expecting another owner took it",
    )
    require(await journal.effects.get(effect.key) == effect, "a refused restart changed the effect")
    require(
        await journal.effects.restart(mine, expect_owner=effect.owner),
        "effects.restart() expecting its owner did not take it",
    )
    require(await journal.effects.get(effect.key) == mine, "a restart did not store the new record")
    require(
        not await journal.effects.restart(mine, expect_owner=effect.owner),
        "effects.restart() expecting the owner before the last restart took it again",
    )
    await journal.effects.finish(mine.with_receipt("ok", at=2.0))
    require(
        not await journal.effects.restart(_owned(mine, "late/4/4"), expect_owner=mine.owner),
        "effects.restart() took a done effect",
    )
    unknown = make_effect("never")
    require(
        not await journal.effects.restart(unknown, expect_owner=unknown.owner),
        "effects.restart() of an unknown key answered True",
    )
    require(
        await journal.effects.get(unknown.key) is None, "effects.restart() recorded an unknown key"
    )


@contract("effects")
async def finish_effect_needs_the_owners_started_record(subject: Subject) -> None:
    """``effects.finish()`` stores a receipt only over its owner's started record; the very same
    receipt again (its reply lost) returns it, and another receipt, another owner or an unknown
    key raise ``IntentConflict``."""
    journal = await _effect_journal(subject)
    effect = make_effect()
    await refused(
        IntentConflict,
        journal.effects.finish(effect.with_receipt("x", at=1.0)),
        "effects.finish() of an unknown key",
    )
    await journal.effects.begin(effect)
    stranger = _owned(effect, "elsewhere/2/2")
    await refused(
        IntentConflict,
        journal.effects.finish(stranger.with_receipt("x", at=1.0)),
        "effects.finish() by another owner",
    )
    require(await journal.effects.get(effect.key) == effect, "a refused receipt changed the effect")
    done = effect.with_receipt("charged 5", at=1_700_000_010.0)
    stored = await journal.effects.finish(done)
    require(stored == done and stored.state is EffectState.DONE, "the receipt was not stored")
    require(
        await journal.effects.get(effect.key) == done, "effects.get() does not hold the receipt"
    )
    require(await journal.effects.finish(done) == done, "the same receipt again was not a no-op")
    await refused(
        IntentConflict,
        journal.effects.finish(effect.with_receipt("charged 6", at=1_700_000_020.0)),
        "effects.finish() with another receipt",
    )
    require(await journal.effects.get(effect.key) == done, "another receipt replaced the first")
    again, recorded = await journal.effects.begin(make_effect())
    require(not recorded and again == done, "a done effect was begun again")


@contract("effects")
async def started_effects_are_those_without_a_receipt(subject: Subject) -> None:
    """``effects.started()`` lists the started effects without a receipt (of every session, or of
    one) in the order they were begun, and ``effects.of_session()`` every effect of a session,
    oldest first."""
    journal = await _effect_journal(subject)
    require(await journal.effects.started() == [], "a new journal lists started effects")
    first, done, other = (
        make_effect("c1"),
        make_effect("c2"),
        make_effect("c3", session_id="session-b"),
    )
    for effect in (first, done, other):
        await journal.effects.begin(effect)
    await journal.effects.finish(done.with_receipt("charged 5", at=2.0))
    keys = {first.key: "c1", done.key: "c2", other.key: "c3"}

    async def listed(call: Any) -> list[str]:
        return [keys.get(effect.key, "?") for effect in await call]

    asked: list[tuple[str, Callable[[], Awaitable[list[Effect]]], list[str]]] = [
        ("effects.started()", lambda: journal.effects.started(), ["c1", "c3"]),
        ("effects.started('session-b')", lambda: journal.effects.started("session-b"), ["c3"]),
        ("effects.started('session-c')", lambda: journal.effects.started("session-c"), []),
        (
            "effects.of_session('session-a')",
            lambda: journal.effects.of_session("session-a"),
            ["c1", "c2"],
        ),
        (
            "effects.of_session('session-b')",
            lambda: journal.effects.of_session("session-b"),
            ["c3"],
        ),
    ]
    for what, call, wanted in asked:
        found = await listed(call())
        require(found == wanted, f"{what} lists {found}, not {wanted}")
    taken = _owned(first, "me/3/3", attempts=2)
    await journal.effects.restart(taken, expect_owner=first.owner)
    now = [(keys.get(e.key), e.owner) for e in await journal.effects.started("session-a")]
    require(now == [("c1", "me/3/3")], f"after a restart effects.started() lists {now}")
    await journal.effects.finish(taken.with_receipt("ok", at=3.0))
    require(await listed(journal.effects.started()) == ["c3"], "a receipt left it listed")
