"""The ``EffectJournal`` contracts, checked on a journal that declares
``Capabilities(effects=True)``; skipped, with the reason, on one that does not: a journal without
effects cannot serve effect tools."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from .._backends.journal import keeps_effects
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
    if not keeps_effects(journal):
        skip(
            "the journal does not declare Capabilities(effects=True) (an EffectJournal: "
            "begin_effect, restart_effect, finish_effect, effect, effects, started_effects): "
            "it cannot serve effect tools"
        )


def _owned(effect: Effect, owner: str, **changes: Any) -> Effect:
    """``effect`` under another owner (a restart's record)."""
    return dataclasses.replace(effect, owner=owner, **changes)


@contract("effects")
async def begin_effect_records_once_per_key(subject: Subject) -> None:
    """``begin_effect()`` records an effect only when its key is unknown and returns the record
    held afterwards (the first stays); of callers racing with one key, exactly one records."""
    journal = await _effect_journal(subject)
    effect = make_effect()
    stored, recorded = await journal.begin_effect(effect)
    require(recorded is True and stored == effect, "the first begin_effect() did not record it")
    again, recorded = await journal.begin_effect(make_effect(owner="elsewhere/2/2"))
    require(recorded is False, "begin_effect() of a known key recorded it again")
    require(again == effect, f"begin_effect() of a known key answered {again}, not the first")
    require(await journal.effect(effect.key) == effect, "effect() does not hold the first record")
    require(await journal.effect("0" * 64) is None, "effect() of an unknown key found one")
    journals = [journal, await worker(subject, journal)]
    answers = await asyncio.gather(
        *(
            journals[n % 2].begin_effect(make_effect("race", owner=f"worker/{n}/1"))
            for n in range(4)
        )
    )
    winners = sum(1 for _, recorded in answers if recorded)
    require(winners == 1, f"{winners} racing begin_effect() calls of one key recorded")
    owners = {stored.owner for stored, _ in answers}
    require(len(owners) == 1, f"racing begin_effect() calls answered owners {sorted(owners)}")


@contract("effects")
async def restart_effect_is_a_compare_and_set(subject: Subject) -> None:
    """``restart_effect()`` replaces a started effect only under the owner expected, answering
    False and changing nothing for another owner, a key taken already, a done effect or an
    unknown key."""
    journal = await _effect_journal(subject)
    effect = make_effect()
    await journal.begin_effect(effect)
    mine = _owned(effect, "me/3/3", attempts=2)
    require(
        not await journal.restart_effect(mine, expect_owner="someone/9/9"),
        "restart_effect() expecting another owner took it",
    )
    require(await journal.effect(effect.key) == effect, "a refused restart changed the effect")
    require(
        await journal.restart_effect(mine, expect_owner=effect.owner),
        "restart_effect() expecting its owner did not take it",
    )
    require(await journal.effect(effect.key) == mine, "a restart did not store the new record")
    require(
        not await journal.restart_effect(mine, expect_owner=effect.owner),
        "restart_effect() expecting the owner before the last restart took it again",
    )
    await journal.finish_effect(mine.with_receipt("ok", at=2.0))
    require(
        not await journal.restart_effect(_owned(mine, "late/4/4"), expect_owner=mine.owner),
        "restart_effect() took a done effect",
    )
    unknown = make_effect("never")
    require(
        not await journal.restart_effect(unknown, expect_owner=unknown.owner),
        "restart_effect() of an unknown key answered True",
    )
    require(await journal.effect(unknown.key) is None, "restart_effect() recorded an unknown key")


@contract("effects")
async def finish_effect_needs_the_owners_started_record(subject: Subject) -> None:
    """``finish_effect()`` stores a receipt only over its owner's started record; the very same
    receipt again (its reply lost) returns it, and another receipt, another owner or an unknown
    key raise ``IntentConflict``."""
    journal = await _effect_journal(subject)
    effect = make_effect()
    await refused(
        IntentConflict,
        journal.finish_effect(effect.with_receipt("x", at=1.0)),
        "finish_effect() of an unknown key",
    )
    await journal.begin_effect(effect)
    stranger = _owned(effect, "elsewhere/2/2")
    await refused(
        IntentConflict,
        journal.finish_effect(stranger.with_receipt("x", at=1.0)),
        "finish_effect() by another owner",
    )
    require(await journal.effect(effect.key) == effect, "a refused receipt changed the effect")
    done = effect.with_receipt("charged 5", at=1_700_000_010.0)
    stored = await journal.finish_effect(done)
    require(stored == done and stored.state is EffectState.DONE, "the receipt was not stored")
    require(await journal.effect(effect.key) == done, "effect() does not hold the receipt")
    require(await journal.finish_effect(done) == done, "the same receipt again was not a no-op")
    await refused(
        IntentConflict,
        journal.finish_effect(effect.with_receipt("charged 6", at=1_700_000_020.0)),
        "finish_effect() with another receipt",
    )
    require(await journal.effect(effect.key) == done, "another receipt replaced the first")
    again, recorded = await journal.begin_effect(make_effect())
    require(not recorded and again == done, "a done effect was begun again")


@contract("effects")
async def started_effects_are_those_without_a_receipt(subject: Subject) -> None:
    """``started_effects()`` lists the started effects without a receipt (of every session, or
    of one) in the order they were begun, and ``effects()`` every effect of a session, oldest
    first."""
    journal = await _effect_journal(subject)
    require(await journal.started_effects() == [], "a new journal lists started effects")
    first, done, other = (
        make_effect("c1"),
        make_effect("c2"),
        make_effect("c3", session_id="session-b"),
    )
    for effect in (first, done, other):
        await journal.begin_effect(effect)
    await journal.finish_effect(done.with_receipt("charged 5", at=2.0))
    keys = {first.key: "c1", done.key: "c2", other.key: "c3"}

    async def listed(call: Any) -> list[str]:
        return [keys.get(effect.key, "?") for effect in await call]

    asked: list[tuple[str, Callable[[], Awaitable[list[Effect]]], list[str]]] = [
        ("started_effects()", lambda: journal.started_effects(), ["c1", "c3"]),
        ("started_effects('session-b')", lambda: journal.started_effects("session-b"), ["c3"]),
        ("started_effects('session-c')", lambda: journal.started_effects("session-c"), []),
        ("effects('session-a')", lambda: journal.effects("session-a"), ["c1", "c2"]),
        ("effects('session-b')", lambda: journal.effects("session-b"), ["c3"]),
    ]
    for what, call, wanted in asked:
        found = await listed(call())
        require(found == wanted, f"{what} lists {found}, not {wanted}")
    taken = _owned(first, "me/3/3", attempts=2)
    await journal.restart_effect(taken, expect_owner=first.owner)
    now = [(keys.get(e.key), e.owner) for e in await journal.started_effects("session-a")]
    require(now == [("c1", "me/3/3")], f"after a restart started_effects() lists {now}")
    await journal.finish_effect(taken.with_receipt("ok", at=3.0))
    require(await listed(journal.started_effects()) == ["c3"], "a receipt left it listed")
