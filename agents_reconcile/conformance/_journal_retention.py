"""The retention component's contracts (``JournalRetention``, ``journal.retention``): it removes
what its retention lets go, never what a guarantee still needs, and a session's write count
never goes down. Checked on a journal whose ``retention`` is one; skipped, with the reason, on
one whose ``retention`` is None (such a journal keeps everything)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any, Final

from .._core.fingerprint import digest_items
from .._core.records import Action, PendingWrite
from .._core.retention import Pruned, Retention
from ._core import Subject, contract, require, skip
from ._effects import _require_effects
from ._journal import FAILED, IN_FLIGHT, journal_of, worker
from ._records import BACKEND, ME, make_decision, make_effect, make_intent

__all__: list[str] = []

NO_RETENTION: Final = (
    "the journal has no retention component (journal.retention is None; a JournalRetention: "
    "prune): it keeps everything"
)

DAY: Final = 86_400.0
# Only the kind a check is about is let go; the others are kept for good.
_DECISIONS: Final = Retention(decisions=timedelta(days=1), receipts=None, idle_sessions=None)
_EVERYTHING_NOW: Final = Retention(0, 0, 0)


async def _pruning_journal(subject: Subject) -> Any:
    journal = await journal_of(subject)
    if journal.retention is None:
        skip(NO_RETENTION)
    return journal


async def _prune(journal: Any, retention: Retention, **options: Any) -> Pruned:
    pruned = await journal.retention.prune(retention, **options)
    require(isinstance(pruned, Pruned), f"retention.prune() answered {pruned!r}, not a Pruned")
    return pruned  # type: ignore[no-any-return]


async def _settled(journal: Any, name: str, at: float, session_id: str = "session-a") -> None:
    intent = make_intent(name, session_id=session_id, created_at=at)
    await journal.record(intent, state=FAILED, owner=ME)
    await journal.settle(make_decision(intent, decided_at=at))


@contract("retention")
async def pruning_removes_old_decisions_and_keeps_those_of_unresolved_intents(
    subject: Subject,
) -> None:
    """``retention.prune()`` removes the decisions decided longer ago than the retention keeps them,
    unless their intent is unresolved: a denial nobody resolved stays, however old, and so
    does its intent; younger decisions stay. A dry run counts the same and removes nothing."""
    journal = await _pruning_journal(subject)
    now = time.time()
    await _settled(journal, "old-1", now - 3 * DAY)
    await _settled(journal, "old-2", now - 2 * DAY, session_id="session-b")
    await _settled(journal, "young", now - 60.0)
    denied = make_intent("denied", created_at=now - 5 * DAY)
    await journal.record(denied, state=FAILED, owner=ME)
    await journal.note(make_decision(denied, action=Action.DENIED, decided_at=now - 4 * DAY))
    dry = await _prune(journal, _DECISIONS, dry_run=True)
    require(
        (dry.decisions, dry.receipts, dry.write_counts) == (2, 0, 0),
        f"a dry run counts {dry}, not the two old settled decisions alone",
    )
    require(len(await journal.decisions(limit=100)) == 4, "a dry run removed decisions it counted")
    pruned = await _prune(journal, _DECISIONS)
    require(
        (pruned.decisions, pruned.done) == (2, True) and pruned.bytes > 0,
        f"retention.prune() answered {pruned}, not two decisions removed (with their bytes), done",
    )
    kept = {d.intent_id for d in await journal.decisions(limit=100)}
    require(kept == {"young", "denied"}, f"after pruning, decisions about {sorted(kept)} remain")
    require(
        [e.intent.intent_id for e in await journal.pending(None)] == ["denied"],
        "pruning touched an unresolved intent",
    )
    again = await _prune(journal, _DECISIONS)
    require(again.rows == 0, f"a second retention.prune() removed {again} more")
    kept_all = await _prune(journal, Retention(decisions=10 * DAY))
    require(kept_all.decisions == 0, "a retention longer than every age removed decisions")


@contract("retention")
async def pruned_write_counts_never_go_down(subject: Subject) -> None:
    """``retention.prune()`` removes the write counts of sessions idle longer than the retention
    keeps them, never that of a session with an unresolved intent; a session whose count was pruned
    reads at least the count it had (the journal's floor), and its next write counts above it, as
    does a new session's. A retention longer than the idle time removes none."""
    journal = await _pruning_journal(subject)
    for _ in range(3):
        await journal.count_write("idle-a", BACKEND)
    await journal.count_write("idle-b", BACKEND)
    busy = make_intent("busy-1", session_id="busy")
    await journal.record(busy, state=IN_FLIGHT, owner=ME)
    busy_count = await journal.write_count("busy", BACKEND)
    kept = await _prune(journal, Retention(None, None, timedelta(hours=1)))
    require(kept.write_counts == 0, f"an hour's retention pruned {kept.write_counts} fresh counts")
    await asyncio.sleep(0.05)
    pruned = await _prune(journal, Retention(None, None, 0))
    require(
        (pruned.write_counts, pruned.done) == (2, True),
        f"retention.prune() of idle counts answered {pruned}, not the two idle sessions' "
        "counts, done",
    )
    require(
        await journal.write_count("busy", BACKEND) == busy_count,
        "the count of a session with an unresolved intent was pruned",
    )
    for session, had in (("idle-a", 3), ("idle-b", 1), ("never-written", 0)):
        now = await journal.write_count(session, BACKEND)
        require(now >= had, f"{session}'s write count went down from {had} to {now}")
    floor = await journal.write_count("never-written", BACKEND)
    require(floor >= 3, f"after a count of 3 was pruned, a session never written reads {floor}")
    after = await journal.count_write("idle-b", BACKEND)
    require(after > floor, f"a write after pruning counts {after}, not above the floor {floor}")
    opened = await journal.open_intent(
        make_intent("fresh-1", session_id="fresh"), state=IN_FLIGHT, owner=ME
    )
    require(
        opened.recorded and opened.write_count >= floor,
        f"a new session opens at count {opened.write_count}, below the floor {floor}",
    )


@contract("retention")
async def pruning_keeps_started_effects_and_young_receipts(subject: Subject) -> None:
    """``retention.prune()`` removes receipts stored longer ago than the retention keeps them; a
    started effect (no receipt) stays however old, and so does a receipt younger than the
    retention."""
    journal = await _pruning_journal(subject)
    _require_effects(journal)
    done, started = make_effect("done-call"), make_effect("started-call")
    for effect in (done, started):
        await journal.effects.begin(effect)
    await journal.effects.finish(done.with_receipt("charged", at=done.started_at + 1.0))
    receipts = Retention(None, timedelta(hours=1), None)
    require((await _prune(journal, receipts)).receipts == 0, "a young receipt was pruned")
    await asyncio.sleep(0.05)
    pruned = await _prune(journal, Retention(None, 0, None))
    require(
        pruned.receipts == 1, f"retention.prune() answered {pruned}, not one old receipt removed"
    )
    require(await journal.effects.get(done.key) is None, "the pruned receipt still reads back")
    require(
        [e.key for e in await journal.effects.started()] == [started.key],
        "pruning removed a started effect",
    )


def _tool_turn(intent_id: str, session_id: str, call_id: str, output: str) -> PendingWrite:
    """A pending write of one tool turn: the call ``call_id`` and the output it showed."""
    batch: tuple[dict[str, Any], ...] = (
        {"type": "function_call", "call_id": call_id, "name": "charge_card", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call_id, "output": output},
    )
    before = ({"role": "user", "content": "pay"},)
    return PendingWrite(
        intent_id=intent_id,
        session_id=session_id,
        backend=BACKEND,
        batch=batch,
        batch_digests=digest_items(batch),
        before_digests=digest_items(before),
        before_is_whole=True,
        created_at=time.time(),
        persisted_count=1,
    )


@contract("retention")
async def pruning_keeps_receipts_an_unresolved_intent_needs(subject: Subject) -> None:
    """``retention.prune()`` keeps, however old, the receipt of an effect whose output a write still
    unresolved holds (its session's unresolved intent is checked against it before it is
    accepted or replayed), and removes it once that intent is settled; an old receipt no
    unresolved intent needs goes as ever. A dry run counts the same."""
    journal = await _pruning_journal(subject)
    _require_effects(journal)
    needed = make_effect("vouching-call", session_id="session-a")
    idle = make_effect("idle-call", session_id="session-b")
    for effect in (needed, idle):
        await journal.effects.begin(effect)
        await journal.effects.finish(effect.with_receipt("charged 5", at=effect.started_at + 1.0))
    pending = _tool_turn("tool-turn", "session-a", needed.call_id, "charged 5")
    await journal.record(pending, state=FAILED, owner=ME)
    await asyncio.sleep(0.05)
    receipts_now = Retention(None, 0, None)
    dry = await _prune(journal, receipts_now, dry_run=True)
    require(dry.receipts == 1, f"a dry run counts {dry.receipts} receipts, not the idle one")
    pruned = await _prune(journal, receipts_now)
    require(
        pruned.receipts == 1,
        f"retention.prune() removed {pruned.receipts} receipts, not the idle one",
    )
    kept = await journal.effects.get(needed.key)
    require(
        kept is not None
        and kept.output_digest == needed.with_receipt("charged 5", at=0).output_digest,
        "retention.prune() removed the receipt of an effect whose output an unresolved intent "
        "holds: the check of that output before it is accepted would pass for want of the receipt",
    )
    require(await journal.effects.get(idle.key) is None, "the receipt nobody needs was kept")
    await journal.settle(make_decision(pending))
    after = await _prune(journal, receipts_now)
    require(
        after.receipts == 1 and await journal.effects.get(needed.key) is None,
        f"once its intent settled, retention.prune() answered {after} and kept the old receipt",
    )


@contract("retention")
async def pruning_removes_old_set_aside_entries(subject: Subject) -> None:
    """``retention.prune()`` removes set-aside entries set aside longer ago than the decisions'
    retention, with their decisions, and keeps younger ones."""
    journal = await _pruning_journal(subject)
    if journal.aside is None:
        skip("the journal has no aside component (journal.aside is None)")
    from ._aside import _aside, _raw

    now = time.time()
    for name, at in (("aside-old", now - 3 * DAY), ("aside-young", now - 60.0)):
        await journal.record(make_intent(name), state=FAILED, owner=ME)
        aside, decision = _aside(await _raw(journal, name), at)
        require(
            await journal.aside.set_aside(await _raw(journal, name), aside, decision), "set aside"
        )
    pruned = await _prune(journal, _DECISIONS)
    require(
        (pruned.set_aside, pruned.decisions) == (1, 1),
        f"retention.prune() answered {pruned}, not the old entry and its decision",
    )
    left = [entry.intent_id for entry in await journal.aside.entries()]
    require(left == ["aside-young"], f"set-aside entries left: {left}")


@contract("retention")
async def pruning_is_bounded_by_its_limit(subject: Subject) -> None:
    """``prune(limit=n)`` removes at most ``n`` rows of each kind and says it is not done while
    more are due; called again, it removes the rest and says so, also when the kinds it
    sweeps hold different numbers of rows (a sweep that ends waits for the others)."""
    journal = await _pruning_journal(subject)
    now = time.time()
    for n in range(5):
        await _settled(journal, f"old-{n}", now - 2 * DAY - n)
    # Rows that stay, so that each sweep goes on ending at its own pace.
    for n in range(3):
        await _settled(journal, f"young-{n}", now - 60.0 - n, session_id=f"young-{n}")
    for n in range(7):
        await journal.count_write(f"fresh-{n}", BACKEND)
    both = Retention(decisions=timedelta(days=1), receipts=None, idle_sessions=timedelta(hours=1))
    removed = 0
    for _ in range(10):
        pruned = await _prune(journal, both, limit=2)
        require(pruned.decisions <= 2, f"prune(limit=2) removed {pruned.decisions} decisions")
        removed += pruned.decisions
        if pruned.done:
            break
    require(
        removed == 5 and pruned.done, f"prune(limit=2), repeated, removed {removed} of 5 and ended"
    )
    left = sorted(d.intent_id for d in await journal.decisions(limit=100))
    require(left == ["young-0", "young-1", "young-2"], f"after pruning ended, left: {left}")


@contract("retention")
async def pruning_beside_writers_loses_nothing_they_need(subject: Subject) -> None:
    """``retention.prune()`` with nothing kept, run again and again while other workers open, claim,
    acknowledge and settle intents, never removes an unresolved intent, a denial of one, or a
    count a writer still reads: each writer's counts only grow."""
    journal = await _pruning_journal(subject)
    others = [await worker(subject, journal) for _ in range(3)]
    stop = asyncio.Event()

    async def writer(n: int, journal: Any) -> None:
        session = f"busy-{n}"
        seen = await journal.write_count(session, BACKEND)
        for turn in range(12):
            intent = make_intent(f"w{n}-{turn}", session_id=session)
            # The pruner runs between every two steps, even on a journal that never suspends.
            await asyncio.sleep(0)
            opened = await journal.open_intent(intent, state=IN_FLIGHT, owner=ME)
            require(opened.recorded, f"worker {n} could not open turn {turn}: {opened}")
            await asyncio.sleep(0)
            require(opened.write_count >= seen, f"worker {n}'s count went down to {opened}")
            if turn % 3 == 2:
                await journal.note(make_decision(intent, action=Action.DENIED, decided_at=1.0))
                entry = await journal.get(intent.intent_id)
                require(entry is not None, f"pruning removed worker {n}'s unresolved intent")
                denials = await journal.decisions(intent_id=intent.intent_id)
                require(denials, f"pruning removed the denial of worker {n}'s open intent")
                await journal.settle(make_decision(intent, decided_at=2.0))
            else:
                await journal.discard(intent.intent_id, owner=ME)
            now = await journal.write_count(session, BACKEND)
            require(now > seen, f"worker {n}'s count went from {seen} to {now}")
            seen = now

    async def pruner() -> None:
        while not stop.is_set():
            await journal.retention.prune(_EVERYTHING_NOW, limit=50)
            await asyncio.sleep(0)

    running = asyncio.ensure_future(pruner())
    try:
        await asyncio.gather(*(writer(n, other) for n, other in enumerate(others)))
    finally:
        stop.set()
        await running
    left = await journal.pending(None)
    require(left == [], f"intents left unresolved: {[e.intent.intent_id for e in left]}")
