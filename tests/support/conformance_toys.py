"""Toy backends for the conformance suite's own tests: correct ones (the in-memory journal and
store, a list-backed session, and versions of them with a schema), and broken ones, each
breaking one contract the way a real backend might."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from agents_reconcile._backends.components import Page
from agents_reconcile._backends.journal import IntentState, JournalEntry, Opened
from agents_reconcile._backends.memory.aside import MemoryAside
from agents_reconcile._backends.memory.effects import MemoryEffects
from agents_reconcile._backends.memory.journal import MemoryJournal
from agents_reconcile._backends.memory.pages import MemoryPages
from agents_reconcile._backends.memory.retention import MemoryRetention
from agents_reconcile._backends.memory.sealing import MemorySealing
from agents_reconcile._backends.memory.store import MemoryRevisionedSession
from agents_reconcile._backends.pages import effects_in_memory
from agents_reconcile._backends.store_items import decode_item, encode_item
from agents_reconcile._core.records import Action, BackendIdentity, Decision, PendingWrite
from agents_reconcile._core.retention import Pruned, Retention
from agents_reconcile.conformance import Report, check_journal, check_session, check_store
from agents_reconcile.conformance._core import Subject
from agents_reconcile.conformance._journal import JOURNAL_METHODS
from agents_reconcile.errors import JournalCorrupt, RevisionConflict, SchemaMismatch

# -- correct toys ------------------------------------------------------------------------------


class ListSession:
    """A plain SDK session on lists in a shared mapping (one list per session id)."""

    def __init__(self, session_id: str, shared: dict[str, list[Any]]) -> None:
        self.session_id = session_id
        self.session_settings = None
        self.items = shared.setdefault(session_id, [])

    async def get_items(self, limit: int | None = None) -> list[Any]:
        if limit is None:
            return [dict(found) for found in self.items]
        return [dict(found) for found in self.items[-limit:]] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        self.items.extend(dict(found) for found in items)

    async def pop_item(self) -> Any | None:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


class SchemaBox:
    """The schema version a toy's storage holds (None: none yet)."""

    def __init__(self) -> None:
        self.version: int | None = None


class ToySchema:
    """Schema methods over a ``SchemaBox``: version 3 is this release's; a newer one is refused
    with ``error``, before anything touches it."""

    VERSION = 3
    error: type[Exception] = JournalCorrupt

    def __init__(self, box: SchemaBox, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.box = box

    async def schema_version(self) -> int | None:
        return self.box.version

    async def check(self) -> str | None:
        found = self.box.version
        if found is None:
            return "the storage has no schema; run migrate"
        if found > self.VERSION:
            return f"the storage has schema version {found}, newer than {self.VERSION}"
        return None

    async def migrate(self) -> list[str]:
        found = self.refuse_newer()
        self.box.version = self.VERSION
        return [f"schema {n}" for n in range((found or 0) + 1, self.VERSION + 1)]

    def refuse_newer(self) -> int | None:
        found = self.box.version
        if found is not None and found > self.VERSION:
            raise self.error(f"schema version {found} is newer than {self.VERSION}")
        return found


class VersionedJournal(ToySchema, MemoryJournal):
    """The in-memory journal with a schema: migrated on first write, a newer one refused."""

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Any) -> None:
        if self.box.version is None:
            await self.migrate()
        self.refuse_newer()
        await super().record(intent, state=state, owner=owner)


class VersionedStore(ToySchema, MemoryRevisionedSession):
    """The in-memory revisioned store with a schema: migrated on first write."""

    error = SchemaMismatch

    async def add_items(self, items: list[Any]) -> None:
        if self.box.version is None:
            await self.migrate()
        self.refuse_newer()
        await super().add_items(items)


# -- broken journals ---------------------------------------------------------------------------


class WithoutNote(MemoryJournal):
    """Has no ``note()``."""

    note = None  # type: ignore[assignment]


class RecordsEverythingInFlight(MemoryJournal):
    """Records every intent as in flight, whatever state it is given."""

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Any) -> None:
        await super().record(intent, state=IntentState.IN_FLIGHT, owner=owner)


class RecordOverwrites(MemoryJournal):
    """``record()`` of a known id replaces it (content, state and owner)."""

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Any) -> None:
        held = self._rows.entries.get(intent.intent_id)
        if held is None:
            await super().record(intent, state=state, owner=owner)
        else:
            self._rows.entries[intent.intent_id] = replace(
                held, intent=intent, state=state, owner=owner
            )


class RetriedOpeningAnswersTheCountNow(MemoryJournal):
    """A retried ``open_intent()`` answers the session's count now, not the one it first saw."""

    async def open_intent(self, intent: PendingWrite, **kwargs: Any) -> Opened:
        opened = await super().open_intent(intent, **kwargs)
        if opened.recorded:
            now = await self.write_count(intent.session_id, intent.backend)
            return Opened(recorded=True, write_count=now - 1)
        return opened


class OpensASecondIntent(MemoryJournal):
    """``open_intent()`` records an intent whatever else its session has unresolved."""

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Any,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        known = intent.intent_id in self._rows.entries or intent.intent_id in self._rows.settled
        if known or clearing is not None:
            return await super().open_intent(
                intent,
                state=state,
                owner=owner,
                expect_write_count=expect_write_count,
                clearing=clearing,
            )
        return await _record_opening(self, intent, state, owner, expect_write_count)


async def _record_opening(
    journal: MemoryJournal,
    intent: PendingWrite,
    state: IntentState,
    owner: Any,
    expect_write_count: int | None,
) -> Opened:
    """Record ``intent`` as ``open_intent`` does, without asking what else is unresolved."""
    writes = await journal.write_count(intent.session_id, intent.backend)
    if expect_write_count is not None and writes != expect_write_count:
        return Opened(recorded=False, write_count=writes)
    await journal.record(intent, state=state, owner=owner)
    journal._rows.entries[intent.intent_id] = replace(
        journal._rows.entries[intent.intent_id], fence=writes
    )
    journal._rows.opened_at[intent.intent_id] = writes
    return Opened(recorded=True, write_count=writes)


class RacyOpenings(MemoryJournal):
    """``open_intent()`` looks, lets other tasks run, then records: a check-then-act race
    (called one at a time it is right)."""

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Any,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        blocking = await self.pending(intent.session_id, intent.backend)
        if blocking or clearing is not None or intent.intent_id in self._rows.settled:
            return await super().open_intent(
                intent,
                state=state,
                owner=owner,
                expect_write_count=expect_write_count,
                clearing=clearing,
            )
        await asyncio.sleep(0)
        return await _record_opening(self, intent, state, owner, expect_write_count)


class IgnoresTheExpectedCount(MemoryJournal):
    """``open_intent()`` ignores ``expect_write_count``."""

    async def open_intent(self, intent: PendingWrite, **kwargs: Any) -> Opened:
        kwargs["expect_write_count"] = None
        return await super().open_intent(intent, **kwargs)


class ClaimsCountAWrite(MemoryJournal):
    """A claim counts a write of its session."""

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        changed = await super().transition(intent_id, **kwargs)
        if changed and kwargs["state"] is IntentState.RECONCILING:
            entry = self._rows.entries[intent_id]
            await self.count_write(entry.intent.session_id, entry.intent.backend)
        return changed


class TransitionIgnoresTheExpectedOwner(MemoryJournal):
    """``transition()`` ignores ``expect_owner``."""

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        kwargs["expect_owner"] = None
        return await super().transition(intent_id, **kwargs)


class FenceNeverGrows(MemoryJournal):
    """A claim keeps the intent's fencing token."""

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        before = self._rows.entries.get(intent_id)
        changed = await super().transition(intent_id, **kwargs)
        if changed and before is not None:
            self._rows.entries[intent_id] = replace(
                self._rows.entries[intent_id], fence=before.fence
            )
        return changed


class DiscardIgnoresTheOwner(MemoryJournal):
    """``discard()`` forgets the intent whoever asks."""

    async def discard(self, intent_id: str, *, owner: Any = None, fence: int | None = None) -> None:
        await super().discard(intent_id)


class DiscardForgivesASettlement(MemoryJournal):
    """``discard()`` by an owner of an intent another worker settled changes nothing, and
    says nothing of it."""

    async def discard(self, intent_id: str, *, owner: Any = None, fence: int | None = None) -> None:
        if await self.is_settled(intent_id):
            return
        await super().discard(intent_id, owner=owner, fence=fence)


class SettleIgnoresTheFence(MemoryJournal):
    """``settle()`` ignores the fencing token."""

    async def settle(self, decision: Decision, *, owner: Any = None, fence: Any = None) -> None:
        await super().settle(decision, owner=owner)


class DroppedIntentsStay(MemoryJournal):
    """An intent settled with a ``dropped`` decision stays unresolved."""

    async def settle(self, decision: Decision, **kwargs: Any) -> None:
        entry = self._rows.entries.get(decision.intent_id)
        await super().settle(decision, **kwargs)
        if entry is not None and decision.action is Action.DROPPED:
            self._rows.entries[decision.intent_id] = entry


class SettlesAgain(MemoryJournal):
    """``settle()`` of a settled intent stores the decision and counts again."""

    async def settle(self, decision: Decision, **kwargs: Any) -> None:
        if decision.intent_id in self._rows.settled:
            self._rows.decisions.append(decision)
            await self.count_write(decision.session_id, decision.backend)
            return
        await super().settle(decision, **kwargs)


class NotesCountAWrite(MemoryJournal):
    """``note()`` counts a write of its session."""

    async def note(self, decision: Decision) -> None:
        await super().note(decision)
        await self.count_write(decision.session_id, decision.backend)


class NotesAnything(MemoryJournal):
    """``note()`` takes a settling decision too."""

    async def note(self, decision: Decision) -> None:
        self._rows.decisions.append(decision)


class PendingInRecordingOrder(MemoryJournal):
    """``pending()`` lists intents in the order they were recorded."""

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        listed = await super().pending(session_id, backend)
        order = list(self._rows.entries)
        return sorted(listed, key=lambda entry: order.index(entry.intent.intent_id))


class PendingIgnoresTheBackend(MemoryJournal):
    """``pending()`` ignores the backend it is asked about."""

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        return await super().pending(session_id)


class DecisionsOldestFirst(MemoryJournal):
    """``decisions()`` lists the oldest first."""

    async def decisions(self, *, limit: int = 100, **filters: Any) -> list[Decision]:
        every = await super().decisions(limit=10**9, **filters)
        return list(reversed(every))[:limit]


class DecisionsIgnoreLimit(MemoryJournal):
    """``decisions()`` ignores ``limit``."""

    async def decisions(self, *, limit: int = 100, **filters: Any) -> list[Decision]:
        return await super().decisions(**filters)


class NewestIsTheOldest(MemoryJournal):
    """Gives the oldest decision of each intent as its newest."""

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        found: dict[str, Decision] = {}
        for decision in await self.decisions(limit=10_000):
            if decision.intent_id in intent_ids:
                found[decision.intent_id] = decision  # newest first: the oldest wins
        return found


class CountsAgainOverAnything(MemoryJournal):
    """``note_again()`` answers True, and replaces nothing, whatever the newest decision is."""

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        return True


class _PagesFromTheFirst(MemoryPages):
    async def intents(self, *, limit: int, **asked: Any) -> Page[JournalEntry]:
        return await super().intents(limit=limit, session_id=asked.get("session_id"))


class PagesIgnoreTheCursor(MemoryJournal):
    """``pages.intents()`` lists from the first intent whatever cursor it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = _PagesFromTheFirst(self._rows)


class _PagesWithoutDecisions(MemoryPages):
    async def intents(self, **asked: Any) -> Page[JournalEntry]:
        page = await super().intents(**asked)
        return replace(page, newest={}, more_waiting=0)


class PagesWithoutDecisions(MemoryJournal):
    """``pages.intents()`` gives no newest decisions, and counts none waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = _PagesWithoutDecisions(self._rows)


class _PagesCountEverything(MemoryPages):
    async def intents(self, **asked: Any) -> Page[JournalEntry]:
        page = await super().intents(**asked)
        if page.counted_all:
            return page
        every = await super().intents(limit=10**9)
        return replace(page, more=len(every.rows) - len(page.rows))


class PagesCountEverything(MemoryJournal):
    """``pages.intents()`` counts every intent that follows a page, however many."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = _PagesCountEverything(self._rows)


class _PagesListFinishedEffects(MemoryPages):
    async def started_effects(
        self, *, limit: int, session_id: str | None = None, **asked: Any
    ) -> Page[Any]:
        every = [e for e in self._rows.effects.values() if session_id in (None, e.session_id)]
        return await effects_in_memory(
            [self._rows.aged(effect) for effect in every],
            limit=limit,
            after=asked.get("after"),
            newest=self._newest,
            overdue_before=asked.get("overdue_before"),
        )


class _PagesKnowByPrefix(MemoryPages):
    async def counts_writes_of(self, session_id: str) -> bool:
        return any(counted.startswith(session_id) for counted, _ in self._rows.write_counts)


class PagesKnowByPrefix(MemoryJournal):
    """``pages.counts_writes_of()`` matches the start of a counted session's name (a ``LIKE``
    without its exact match)."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = _PagesKnowByPrefix(self._rows)


class EffectPagesListFinishedEffects(MemoryJournal):
    """``pages.started_effects()`` lists effects that have their receipt too."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = _PagesListFinishedEffects(self._rows)


class _PrunesDenialsOfOpenIntents(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        entries, self._rows.entries = self._rows.entries, {}
        try:
            return await super().prune(retention, **options)
        finally:
            self._rows.entries = entries


class PrunesDenialsOfOpenIntents(MemoryJournal):
    """``retention.prune()`` removes old decisions whether or not their intent is still
    unresolved."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PrunesDenialsOfOpenIntents(self._rows)


class _PrunedCountsStartAgain(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        pruned = await super().prune(retention, **options)
        self._rows.floor = 0
        return pruned


class PrunedCountsStartAgain(MemoryJournal):
    """A session whose count was pruned counts from 0 again (no floor)."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PrunedCountsStartAgain(self._rows)


class _PrunesStartedEffects(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        pruned = await super().prune(retention, **options)
        if retention.receipts is not None and not options.get("dry_run"):
            self._rows.effects.clear()
        return pruned


class PrunesStartedEffects(MemoryJournal):
    """``retention.prune()`` removes started effects as if they were receipts."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PrunesStartedEffects(self._rows)


class _PrunesVouchingReceipts(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        entries, self._rows.entries = self._rows.entries, {}
        try:
            return await super().prune(retention, **options)
        finally:
            self._rows.entries = entries


class PrunesVouchingReceipts(MemoryJournal):
    """``retention.prune()`` removes old receipts whatever unresolved intent of their session needs
    them."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PrunesVouchingReceipts(self._rows)


class _KeepsSetAsideEntries(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        kept, self._rows.aside = self._rows.aside, []
        try:
            return await super().prune(retention, **options)
        finally:
            self._rows.aside = kept + self._rows.aside


class KeepsSetAsideEntries(MemoryJournal):
    """``retention.prune()`` never removes a set-aside entry."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _KeepsSetAsideEntries(self._rows)


class _PruneIgnoresLimit(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        options.pop("limit", None)
        found = await super().prune(retention, **options)
        return replace(found, done=False) if found.rows else found


class PruneIgnoresLimit(MemoryJournal):
    """``retention.prune(limit=n)`` removes everything due at once."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PruneIgnoresLimit(self._rows)


class _PrunesBusySessions(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        found = await super().prune(retention, **options)
        if retention.idle_sessions is not None and not options.get("dry_run"):
            self._rows.write_counts.clear()
            self._rows.counted_at.clear()
            self._rows.floor = 0
        return found


class PrunesBusySessions(MemoryJournal):
    """``retention.prune()`` forgets every idle count, a busy session's too, and raises no floor."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PrunesBusySessions(self._rows)


class ClearsAnyIntent(MemoryJournal):
    """``open_intent(clearing=...)`` forgets the intent named, whoever holds it."""

    async def open_intent(self, intent: PendingWrite, **kwargs: Any) -> Opened:
        clearing = kwargs.pop("clearing", None)
        if clearing in self._rows.entries:
            await self.discard(clearing)
        return await super().open_intent(intent, **kwargs)


class RetriedDiscardCountsAgain(MemoryJournal):
    """A held ``discard()`` of an intent discarded already counts another write."""

    def __init__(self) -> None:
        super().__init__()
        self.gone: dict[str, tuple[str, BackendIdentity]] = {}

    async def discard(self, intent_id: str, *, owner: Any = None, fence: int | None = None) -> None:
        entry = self._rows.entries.get(intent_id)
        if entry is None and intent_id in self.gone:
            await self.count_write(*self.gone[intent_id])
            return
        await super().discard(intent_id, owner=owner, fence=fence)
        if entry is not None:
            self.gone[intent_id] = (entry.intent.session_id, entry.intent.backend)


class CheckMigrates(VersionedJournal):
    """``check()`` creates the schema it finds missing."""

    async def check(self) -> str | None:
        problem = await super().check()
        if self.box.version is None:
            self.box.version = self.VERSION
        return problem


class MigratesOverANewerSchema(VersionedJournal):
    """``migrate()`` and writes take a newer schema for their own."""

    def refuse_newer(self) -> int | None:
        return None


class _BeginsEveryEffect(MemoryEffects):
    async def begin(self, effect: Any) -> tuple[Any, bool]:
        self._rows.effects[effect.key] = effect
        return effect, True


class BeginsEveryEffect(MemoryJournal):
    """``effects.begin()`` records over a known key."""

    def __init__(self) -> None:
        super().__init__()
        self.effects = _BeginsEveryEffect(self._rows)


class _RestartIgnoresTheOwner(MemoryEffects):
    async def restart(self, effect: Any, *, expect_owner: str) -> bool:
        stored = self._rows.effects.get(effect.key)
        return await super().restart(effect, expect_owner=stored.owner if stored else expect_owner)


class RestartIgnoresTheOwner(MemoryJournal):
    """``effects.restart()`` takes a started effect from any owner."""

    def __init__(self) -> None:
        super().__init__()
        self.effects = _RestartIgnoresTheOwner(self._rows)


class _FinishesAnything(MemoryEffects):
    async def finish(self, effect: Any) -> Any:
        self._rows.effects[effect.key] = effect
        return effect


class FinishesAnything(MemoryJournal):
    """``effects.finish()`` stores any receipt."""

    def __init__(self) -> None:
        super().__init__()
        self.effects = _FinishesAnything(self._rows)


class _ListsDoneEffectsAsStarted(MemoryEffects):
    async def started(self, session_id: str | None = None) -> list[Any]:
        return [e for e in self._rows.effects.values() if session_id in (None, e.session_id)]


class ListsDoneEffectsAsStarted(MemoryJournal):
    """``effects.started()`` lists done effects too."""

    def __init__(self) -> None:
        super().__init__()
        self.effects = _ListsDoneEffectsAsStarted(self._rows)


class _MovesChangedRows(MemoryAside):
    async def set_aside(self, raw: Any, aside: Any, decision: Decision) -> bool:
        now = await self.raw(raw.intent_id)
        if now is None:
            return False
        return await super().set_aside(now, aside, decision)


class SetsAsideChangedRows(MemoryJournal):
    """``aside.set_aside()`` moves the row whatever changed since it was read."""

    def __init__(self) -> None:
        super().__init__()
        self.aside = _MovesChangedRows(self._rows)


class _ListsPastTheLimit(MemoryAside):
    async def entries(self, *, limit: int = 100, **filters: Any) -> list[Any]:
        return await super().entries(**filters)


class AsideEntriesIgnoreLimit(MemoryJournal):
    """``aside.entries()`` ignores ``limit``."""

    def __init__(self) -> None:
        super().__init__()
        self.aside = _ListsPastTheLimit(self._rows)


class _MarkReplaced(MemorySealing):
    async def mark(self, key_ids: Sequence[str]) -> None:
        self._rows.sealing = set(key_ids)


class ForgetsEarlierMarks(MemoryJournal):
    """``sealing.mark()`` replaces the mark with the ids given instead of adding them."""

    def __init__(self) -> None:
        super().__init__()
        self.sealing = _MarkReplaced(self._rows)


class _PruneDropsTheMark(MemoryRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        self._rows.sealing.clear()
        return await super().prune(retention, **options)


class PruneDropsTheMark(MemoryJournal):
    """``retention.prune()`` removes the sealing mark with everything else it lets go."""

    def __init__(self) -> None:
        super().__init__()
        self.retention = _PruneDropsTheMark(self._rows)


class IntentsOnly:
    """An ``IntentJournal`` and nothing more (no effects, no components): the in-memory
    journal's intent methods, delegated."""

    METHODS = JOURNAL_METHODS
    effects = None
    aside = None
    pages = None
    retention = None
    sealing = None

    def __init__(self) -> None:
        inner = MemoryJournal()
        self.keyring = inner.keyring
        for name in self.METHODS:
            setattr(self, name, getattr(inner, name))


# -- broken stores -----------------------------------------------------------------------------


class WithoutFindWrite(MemoryRevisionedSession):
    find_write = None  # type: ignore[assignment]


class StartsAtRevisionOne(MemoryRevisionedSession):
    async def head(self) -> int:
        return await super().head() + 1


class WritesBeforeComparing(MemoryRevisionedSession):
    """``append_if()`` writes the items, then compares the head."""

    async def append_if(self, items: list[Any], **kwargs: Any) -> int:
        if len(self._data.writes) != kwargs["expected"]:
            self._data.items.extend(encode_item(found) for found in items)
        return await super().append_if(items, **kwargs)


class AcceptsAWriteIdTwice(MemoryRevisionedSession):
    async def append_if(self, items: list[Any], **kwargs: Any) -> int:
        self._data.by_id.pop(kwargs["write_id"], None)
        return await super().append_if(items, **kwargs)


class ForgetsTheWriter(MemoryRevisionedSession):
    async def append_if(self, items: list[Any], **kwargs: Any) -> int:
        kwargs["writer"] = "anonymous"
        return await super().append_if(items, **kwargs)


class PopsUnrecorded(MemoryRevisionedSession):
    async def pop_item(self) -> Any | None:
        return decode_item(self._data.items.pop()) if self._data.items else None


class EmptyAppendsWriteNothing(MemoryRevisionedSession):
    async def append_if(self, items: list[Any], **kwargs: Any) -> int:
        if not items:
            return len(self._data.writes)
        return await super().append_if(items, **kwargs)


class WritesAfterIgnoresLimit(MemoryRevisionedSession):
    async def writes_after(self, revision: int, *, limit: int = 100) -> list[Any]:
        return await super().writes_after(revision)


class OneRecordForEverySession(MemoryRevisionedSession):
    """Every session shares one head and record of writes."""

    def __init__(self, session_id: str, *, shared: dict[str, Any] | None = None) -> None:
        super().__init__(session_id, shared=shared)
        everyone = shared if shared is not None else {}
        self._data.writes = everyone.setdefault("all writes", [])
        self._data.by_id = everyone.setdefault("all write ids", {})


class RacyAppends(MemoryRevisionedSession):
    """``append_if()`` compares, lets other tasks run, then writes."""

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        actual = len(self._data.writes)
        if actual != expected:
            raise RevisionConflict("stale", expected=expected, actual=actual)
        await asyncio.sleep(0)
        self._data.items.extend(encode_item(found) for found in items)
        return self._record("append", len(items), write_id, writer)


class StoreCheckMigrates(VersionedStore):
    async def check(self) -> str | None:
        problem = await super().check()
        self.box.version = self.box.version or self.VERSION
        return problem


class StoreMigratesOverANewerSchema(VersionedStore):
    def refuse_newer(self) -> int | None:
        return None


# -- broken sessions ---------------------------------------------------------------------------


class NamedOtherwise(ListSession):
    def __init__(self, session_id: str, shared: dict[str, list[Any]]) -> None:
        super().__init__(session_id, shared)
        self.session_id = "default"


class StartsWithAGreeting(ListSession):
    def __init__(self, session_id: str, shared: dict[str, list[Any]]) -> None:
        super().__init__(session_id, shared)
        if not self.items:
            self.items.append({"role": "system", "content": "welcome"})


class PrependsBatches(ListSession):
    async def add_items(self, items: list[Any]) -> None:
        self.items[:0] = [dict(found) for found in items]


class AddsAField(ListSession):
    """Reads items back with a field the store added (as some servers do)."""

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return [{**found, "created_at": 1} for found in await super().get_items(limit)]


class GetItemsIgnoresLimit(ListSession):
    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await super().get_items()


class GetItemsNewestFirst(ListSession):
    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(reversed(await super().get_items(limit)))


class GetItemsTheOldest(ListSession):
    async def get_items(self, limit: int | None = None) -> list[Any]:
        every = await super().get_items()
        return every if limit is None else every[:limit]


class PopsTheOldest(ListSession):
    async def pop_item(self) -> Any | None:
        return self.items.pop(0) if self.items else None


class ClearKeepsItems(ListSession):
    async def clear_session(self) -> None:
        if self.items:
            del self.items[-1]


class OneListForEverySession(ListSession):
    def __init__(self, session_id: str, shared: dict[str, list[Any]]) -> None:
        super().__init__("everyone", shared)
        self.session_id = session_id


# -- worlds: where a check's objects come from ------------------------------------------------


class Journals:
    """Journals of one toy class, each new one empty."""

    def __init__(self, kind: Callable[[], Any]) -> None:
        self.kind = kind

    def make(self) -> Any:
        return self.kind()


class VersionedJournals:
    """Versioned journals of one toy class, each on a storage (a ``SchemaBox``) of its own."""

    def __init__(self, kind: type[VersionedJournal] = VersionedJournal) -> None:
        self.kind = kind

    def make(self) -> VersionedJournal:
        return self.kind(SchemaBox())

    def newer(self, journal: VersionedJournal) -> VersionedJournal:
        """Stamp a newer schema on ``journal``'s storage; another journal on it."""
        journal.box.version = 42
        return self.kind(journal.box)


class Stores:
    """Revisioned stores of one toy class sharing their data: objects of one session id are
    workers on the same data."""

    def __init__(self, kind: type[MemoryRevisionedSession] = MemoryRevisionedSession) -> None:
        self.kind = kind
        self.shared: dict[str, Any] = {}

    def make(self, session_id: str) -> MemoryRevisionedSession:
        return self.kind(session_id, shared=self.shared)


class VersionedStores:
    """Versioned stores of one toy class sharing their data and their schema."""

    def __init__(self, kind: type[VersionedStore] = VersionedStore) -> None:
        self.kind = kind
        self.shared: dict[str, Any] = {}
        self.box = SchemaBox()

    def make(self, session_id: str) -> VersionedStore:
        return self.kind(self.box, session_id, shared=self.shared)

    def newer(self, store: VersionedStore) -> VersionedStore:
        self.box.version = 42
        return self.make(store.session_id)


class Sessions:
    """List sessions of one toy class sharing their data."""

    def __init__(self, kind: type[ListSession] = ListSession) -> None:
        self.kind = kind
        self.shared: dict[str, list[Any]] = {}

    def make(self, session_id: str) -> ListSession:
        return self.kind(session_id, self.shared)


# -- the cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Toy:
    """A toy backend, how to check it, and (for a broken one) the contract it breaks."""

    name: str
    kind: str
    """``journal``, ``store`` or ``session``: what it is checked as."""
    world: Callable[[], Any]
    """A new world: its ``make`` makes the objects checked, its ``newer`` (where it has one)
    stamps a newer schema."""
    breaks: str = ""

    def subject(self) -> Subject:
        world = self.world()
        newer = getattr(world, "newer", None)
        if self.kind == "journal":
            return Subject(journal=world.make, newer_schema=newer)
        if self.kind == "store":
            return Subject(store=world.make, session=world.make, newer_schema=newer)
        return Subject(session=world.make)

    async def check(self, only: list[str] | None = None) -> Report:
        world = self.world()
        newer = getattr(world, "newer", None)
        if self.kind == "journal":
            return await check_journal(world.make, newer_schema=newer, only=only)
        if self.kind == "store":
            return await check_store(world.make, newer_schema=newer, only=only)
        return await check_session(world.make, only=only)


def _journal(name: str, kind: Callable[[], Any], breaks: str) -> Toy:
    return Toy(name, "journal", partial(Journals, kind), breaks)


def _versioned(name: str, kind: type[VersionedJournal], breaks: str) -> Toy:
    return Toy(name, "journal", partial(VersionedJournals, kind), breaks)


def _store(name: str, kind: type[MemoryRevisionedSession], breaks: str) -> Toy:
    return Toy(name, "store", partial(Stores, kind), breaks)


def _versioned_store(name: str, kind: type[VersionedStore], breaks: str) -> Toy:
    return Toy(name, "store", partial(VersionedStores, kind), breaks)


def _session(name: str, kind: type[ListSession], breaks: str) -> Toy:
    return Toy(name, "session", partial(Sessions, kind), breaks)


CORRECT = [
    _journal("the in-memory journal", MemoryJournal, ""),
    _versioned("a journal with a schema", VersionedJournal, ""),
    _journal("a journal of intents only", IntentsOnly, ""),
    _store("the in-memory revisioned store", MemoryRevisionedSession, ""),
    _versioned_store("a store with a schema", VersionedStore, ""),
    _session("a list session", ListSession, ""),
]
"""Toys that keep every contract that applies to them."""

BROKEN = [
    # journals
    _journal("a journal without note", WithoutNote, "implements_the_intent_journal_protocol"),
    _journal(
        "a journal that records every intent in flight",
        RecordsEverythingInFlight,
        "a_recorded_intent_reads_back_as_written",
    ),
    _journal(
        "a journal whose record overwrites a known id",
        RecordOverwrites,
        "record_is_idempotent_and_refuses_other_content",
    ),
    _journal(
        "a journal whose retried opening answers the count now",
        RetriedOpeningAnswersTheCountNow,
        "open_intent_is_idempotent_and_refuses_other_content",
    ),
    _journal(
        "a journal that opens a second intent for a session",
        OpensASecondIntent,
        "open_intent_allows_one_unresolved_intent_per_session_and_backend",
    ),
    _journal(
        "a journal that ignores the count an opening expects",
        IgnoresTheExpectedCount,
        "an_opening_expecting_another_count_writes_nothing",
    ),
    _journal("a journal whose claims count a write", ClaimsCountAWrite, "writes_are_counted"),
    _journal(
        "a journal whose transition ignores expect_owner",
        TransitionIgnoresTheExpectedOwner,
        "transition_is_a_compare_and_set",
    ),
    _journal(
        "a journal whose fence never grows",
        FenceNeverGrows,
        "fencing_tokens_grow_only_on_claims",
    ),
    _journal(
        "a journal whose discard ignores the owner",
        DiscardIgnoresTheOwner,
        "discard_with_an_owner_needs_its_hold",
    ),
    _journal(
        "a journal whose discard forgives a settlement",
        DiscardForgivesASettlement,
        "discard_by_an_owner_whose_intent_another_settled_is_refused",
    ),
    _journal(
        "a journal whose settle ignores the fence",
        SettleIgnoresTheFence,
        "settle_with_an_owner_needs_its_claim",
    ),
    _journal(
        "a journal that keeps dropped intents",
        DroppedIntentsStay,
        "settle_closes_the_intent_and_keeps_the_decision",
    ),
    _journal(
        "a journal whose settle is not idempotent",
        SettlesAgain,
        "settle_is_idempotent_for_the_same_decision",
    ),
    _journal(
        "a journal whose notes count a write", NotesCountAWrite, "note_keeps_the_intent_unresolved"
    ),
    _journal(
        "a journal that notes settling decisions",
        NotesAnything,
        "settle_and_note_take_only_their_kind_of_decision",
    ),
    _journal(
        "a journal listing pending intents in recording order",
        PendingInRecordingOrder,
        "pending_is_oldest_first",
    ),
    _journal(
        "a journal whose pending ignores the backend",
        PendingIgnoresTheBackend,
        "pending_filters_by_session_and_backend",
    ),
    _journal(
        "a journal returning decisions oldest first",
        DecisionsOldestFirst,
        "decisions_are_newest_first_and_filtered",
    ),
    _journal("a journal that ignores limit", DecisionsIgnoreLimit, "decisions_honour_limit"),
    _journal(
        "a journal giving each intent's oldest decision as its newest",
        NewestIsTheOldest,
        "newest_decisions_are_each_intents_newest",
    ),
    _journal(
        "a journal that counts any decision again",
        CountsAgainOverAnything,
        "note_again_counts_the_newest_decision_in_place",
    ),
    _journal(
        "a journal whose pages ignore the cursor",
        PagesIgnoreTheCursor,
        "pending_pages_list_every_intent_once_with_what_follows",
    ),
    _journal(
        "a journal whose pages carry no decisions",
        PagesWithoutDecisions,
        "pending_pages_carry_each_intents_newest_decision",
    ),
    _journal(
        "a journal whose pages count everything that follows",
        PagesCountEverything,
        "pending_pages_count_what_follows_up_to_a_bound",
    ),
    _journal(
        "a journal whose effect pages list finished effects",
        EffectPagesListFinishedEffects,
        "started_effect_pages_list_every_started_effect_once",
    ),
    _journal(
        "a journal whose pages know a session by the start of its name",
        PagesKnowByPrefix,
        "pages_know_a_session_by_its_counted_writes",
    ),
    _journal(
        "a journal that prunes denials of open intents",
        PrunesDenialsOfOpenIntents,
        "pruning_removes_old_decisions_and_keeps_those_of_unresolved_intents",
    ),
    _journal(
        "a journal whose pruned counts start again",
        PrunedCountsStartAgain,
        "pruned_write_counts_never_go_down",
    ),
    _journal(
        "a journal that prunes started effects",
        PrunesStartedEffects,
        "pruning_keeps_started_effects_and_young_receipts",
    ),
    _journal(
        "a journal that prunes receipts an unresolved intent needs",
        PrunesVouchingReceipts,
        "pruning_keeps_receipts_an_unresolved_intent_needs",
    ),
    _journal(
        "a journal that keeps set-aside entries",
        KeepsSetAsideEntries,
        "pruning_removes_old_set_aside_entries",
    ),
    _journal(
        "a journal whose prune ignores limit", PruneIgnoresLimit, "pruning_is_bounded_by_its_limit"
    ),
    _journal(
        "a journal that prunes busy sessions' counts",
        PrunesBusySessions,
        "pruning_beside_writers_loses_nothing_they_need",
    ),
    _journal(
        "a journal that clears anyone's intent",
        ClearsAnyIntent,
        "open_intent_clears_only_its_owners_acknowledged_intent",
    ),
    _journal("a journal whose openings race", RacyOpenings, "racing_openings_record_exactly_one"),
    _journal(
        "a journal whose retried discard counts again",
        RetriedDiscardCountsAgain,
        "retried_calls_after_a_lost_reply_are_no_ops",
    ),
    _versioned(
        "a journal whose check migrates",
        CheckMigrates,
        "schema_check_writes_nothing_and_migrate_is_idempotent",
    ),
    _versioned(
        "a journal that migrates over a newer schema",
        MigratesOverANewerSchema,
        "a_newer_schema_is_refused",
    ),
    _journal(
        "a journal that begins every effect", BeginsEveryEffect, "begin_effect_records_once_per_key"
    ),
    _journal(
        "a journal whose restart ignores the owner",
        RestartIgnoresTheOwner,
        "restart_effect_is_a_compare_and_set",
    ),
    _journal(
        "a journal that finishes any effect",
        FinishesAnything,
        "finish_effect_needs_the_owners_started_record",
    ),
    _journal(
        "a journal listing done effects as started",
        ListsDoneEffectsAsStarted,
        "started_effects_are_those_without_a_receipt",
    ),
    _journal(
        "a journal setting aside rows changed since read",
        SetsAsideChangedRows,
        "set_aside_moves_only_a_row_unchanged_since_read",
    ),
    _journal(
        "a journal whose set-aside entries ignore limit",
        AsideEntriesIgnoreLimit,
        "set_aside_entries_are_newest_first_and_limited",
    ),
    _journal(
        "a journal whose sealing mark forgets earlier ids",
        ForgetsEarlierMarks,
        "sealing_marks_only_add_up_and_read_back",
    ),
    _journal(
        "a journal whose prune drops the sealing mark",
        PruneDropsTheMark,
        "pruning_keeps_the_sealing_mark",
    ),
    # revisioned stores
    _store("a store without find_write", WithoutFindWrite, "is_a_session_and_revisioned"),
    _store(
        "a store starting at revision one",
        StartsAtRevisionOne,
        "a_new_session_is_at_revision_zero",
    ),
    _store(
        "a store that writes before comparing the head",
        WritesBeforeComparing,
        "append_if_on_a_stale_head_writes_nothing",
    ),
    _store(
        "a store accepting a write id twice", AcceptsAWriteIdTwice, "a_write_id_is_recorded_once"
    ),
    _store("a store forgetting the writer", ForgetsTheWriter, "a_write_is_found_by_its_id"),
    _store("a store whose pops go unrecorded", PopsUnrecorded, "every_write_moves_the_head_by_one"),
    _store(
        "a store whose empty appends write nothing",
        EmptyAppendsWriteNothing,
        "an_empty_append_if_still_moves_the_head",
    ),
    _store(
        "a store whose writes_after ignores limit",
        WritesAfterIgnoresLimit,
        "writes_after_is_oldest_first_and_limited",
    ),
    _store(
        "a store with one record for every session",
        OneRecordForEverySession,
        "sessions_keep_their_own_heads_and_records",
    ),
    _store("a store whose appends race", RacyAppends, "racing_appends_commit_exactly_one"),
    _versioned_store(
        "a store whose check migrates",
        StoreCheckMigrates,
        "store_schema_check_writes_nothing_and_migrate_is_idempotent",
    ),
    _versioned_store(
        "a store that migrates over a newer schema",
        StoreMigratesOverANewerSchema,
        "a_newer_store_schema_is_refused",
    ),
    # plain sessions
    _session("a session named otherwise", NamedOtherwise, "is_a_session"),
    _session("a session starting with a greeting", StartsWithAGreeting, "a_new_session_is_empty"),
    _session("a session prepending batches", PrependsBatches, "add_items_appends_in_order"),
    _session("a session adding a field", AddsAField, "items_read_back_as_written"),
    _session(
        "a session whose get_items ignores limit",
        GetItemsIgnoresLimit,
        "get_items_limit_returns_the_newest_oldest_first",
    ),
    _session(
        "a session reading the tail newest first",
        GetItemsNewestFirst,
        "get_items_limit_returns_the_newest_oldest_first",
    ),
    _session(
        "a session reading the oldest items as the tail",
        GetItemsTheOldest,
        "get_items_limit_returns_the_newest_oldest_first",
    ),
    _session(
        "a session popping the oldest", PopsTheOldest, "pop_item_removes_and_returns_the_newest"
    ),
    _session("a session whose clear keeps items", ClearKeepsItems, "clear_session_empties_it"),
    _session(
        "a session with one list for every id",
        OneListForEverySession,
        "sessions_keep_their_own_items",
    ),
]
"""Toys that each break the contract named."""
