"""Mutants of the dict backend (``dict_backend``): each the kind of mistake a newcomer makes, and
the contracts of ``agents_reconcile.conformance`` that kill it; those the suite lets through
say why they cannot break a guarantee."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agents_reconcile import Decision, IntentState, JournalEntry, PendingWrite, RevisionConflict
from agents_reconcile.backend_kit import Effect, Keyring, Owner, Pruned, RawIntent, Retention

from .dict_backend import DictEffects, DictJournal, DictRetention, DictStore

# -- journals ----------------------------------------------------------------------------------


class IgnoresTheKeyring(DictJournal):
    """Reads records without the keyring a session lent it."""

    def entry(self, row: dict[str, Any]) -> JournalEntry:
        return JournalEntry(
            intent=PendingWrite.decode(row["record"]),
            state=IntentState(row["state"]),
            owner=Owner.parse(row["owner"]),
            updated_at=row["updated_at"],
            fence=row["fence"],
        )


class AFreshKeyringEachTime(DictJournal):
    """Its ``keyring`` is a property making a new one: what is lent to it is lost."""

    @property  # type: ignore[override]
    def keyring(self) -> Keyring:
        return Keyring()

    @keyring.setter
    def keyring(self, value: Keyring) -> None:
        pass


class WithoutAKeyring(IgnoresTheKeyring):
    """Has no ``keyring``."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        del self.__dict__["keyring"]


class CachedReads(DictJournal):
    """Keeps what ``get()`` and ``pending()`` read, forgetting it only when it writes itself."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        self.cache: dict[Any, Any] = {}

    async def get(self, intent_id: str) -> JournalEntry | None:
        if ("get", intent_id) not in self.cache:
            self.cache["get", intent_id] = await super().get(intent_id)
        found: JournalEntry | None = self.cache["get", intent_id]
        return found

    async def pending(self, session_id: str | None, backend: Any = None) -> list[JournalEntry]:
        if ("pending", session_id, backend) not in self.cache:
            self.cache["pending", session_id, backend] = await super().pending(session_id, backend)
        found: list[JournalEntry] = self.cache["pending", session_id, backend]
        return found

    def add_write(self, session_id: str, backend: Any) -> int:
        self.cache.clear()
        return super().add_write(session_id, backend)

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        self.cache.clear()
        return await super().transition(intent_id, **kwargs)


class ReadsAReplica(DictJournal):
    """Reads intents from a copy of the rows brought up to date only when it writes itself
    (a replica that lags behind the other workers' writes)."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        self.replica = copy.deepcopy(self.storage.intents)
        self.reading = False

    def rows(self) -> dict[str, dict[str, Any]]:
        return self.replica if self.reading else super().rows()

    def add_write(self, session_id: str, backend: Any) -> int:
        count = super().add_write(session_id, backend)
        self.replica = copy.deepcopy(self.storage.intents)
        return count

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        changed = await super().transition(intent_id, **kwargs)
        self.replica = copy.deepcopy(self.storage.intents)
        return changed

    async def get(self, intent_id: str) -> JournalEntry | None:
        self.reading = True
        try:
            return await super().get(intent_id)
        finally:
            self.reading = False

    async def pending(self, session_id: str | None, backend: Any = None) -> list[JournalEntry]:
        self.reading = True
        try:
            return await super().pending(session_id, backend)
        finally:
            self.reading = False


class AgeFromCreatedAt(DictJournal):
    """Stamps a new row with the client's ``created_at``."""

    def new_row(self, intent: PendingWrite, *args: Any) -> None:
        super().new_row(intent, *args)
        self.rows()[intent.intent_id]["updated_at"] = intent.created_at


class AgeInMilliseconds(DictJournal):
    """Gives each intent's age in milliseconds."""

    def entry(self, row: dict[str, Any]) -> JournalEntry:
        found = super().entry(row)
        return replace(found, age=(time.time() - row["updated_at"]) * 1000)


class AgeInMinutes(DictJournal):
    """Gives each intent's age in minutes."""

    def entry(self, row: dict[str, Any]) -> JournalEntry:
        found = super().entry(row)
        return replace(found, age=(time.time() - row["updated_at"]) / 60)


class RenewalKeepsTheAge(DictJournal):
    """A transition changes state and owner but leaves ``updated_at``."""

    def clock(self) -> float:
        return time.time() if not hasattr(self, "renewing") else self.renewing

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        row = self.rows().get(intent_id)
        self.renewing = row["updated_at"] if row is not None else time.time()
        try:
            return await super().transition(intent_id, **kwargs)
        finally:
            del self.renewing


class TransitionAnswersTrueForAnyId(DictJournal):
    """``transition()`` of an unknown or settled id answers True (an update's success, not
    whether it matched a row)."""

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        changed = await super().transition(intent_id, **kwargs)
        return changed or intent_id not in self.rows()


class TransitionRevivesASettledId(DictJournal):
    """``transition()`` of a settled id makes its row again (an upsert)."""

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        if intent_id in self.storage.settled and intent_id not in self.rows():
            self.storage.settled.discard(intent_id)
            last = [d for d in self.every_decision() if d.intent_id == intent_id]
            if last:
                self.rows()[intent_id] = {
                    "session_id": last[0].session_id,
                    "backend": str(last[0].backend),
                    "created_at": 0.0,
                    "state": kwargs["state"].value,
                    "owner": str(kwargs["owner"]),
                    "updated_at": time.time(),
                    "fence": 0,
                    "opened_at": 0,
                    "record": b"{}",
                }
                return True
        return await super().transition(intent_id, **kwargs)


class PendingNewestFirst(DictJournal):
    """Lists pending intents newest first."""

    async def pending(self, session_id: str | None, backend: Any = None) -> list[JournalEntry]:
        return list(reversed(await super().pending(session_id, backend)))


class PendingInRowOrder(DictJournal):
    """Lists pending intents in the order their rows were made."""

    async def pending(self, session_id: str | None, backend: Any = None) -> list[JournalEntry]:
        found = await super().pending(session_id, backend)
        order = list(self.rows())
        return sorted(found, key=lambda entry: order.index(entry.intent.intent_id))


class NewestDecisionIsTheFirst(DictJournal):
    """Gives each intent's first decision as its newest."""

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        found: dict[str, Decision] = {}
        for decision in self.every_decision():
            if decision.intent_id in intent_ids:
                found.setdefault(decision.intent_id, decision)
        return found


class DecisionsIgnoreLimit(DictJournal):
    """``decisions()`` returns every one, whatever ``limit``."""

    async def decisions(self, *, limit: int = 100, **filters: Any) -> list[Decision]:
        return await super().decisions(limit=10**9, **filters)


class SettleIgnoresTheFence(DictJournal):
    """``settle()`` checks the owner of the claim and not its token."""

    async def settle(self, decision: Decision, *, owner: Any = None, fence: Any = None) -> None:
        await super().settle(decision, owner=owner)


class ClaimsKeepTheirToken(DictJournal):
    """A claim keeps the intent's fencing token."""

    async def transition(self, intent_id: str, **kwargs: Any) -> bool:
        row = self.rows().get(intent_id)
        fence = None if row is None else row["fence"]
        changed = await super().transition(intent_id, **kwargs)
        if changed and row is not None:
            row["fence"] = fence
        return changed


class DiscardCountsNothing(DictJournal):
    """``discard()`` forgets the intent without counting a write."""

    async def discard(self, intent_id: str, **kwargs: Any) -> None:
        before = dict(self.storage.counts)
        await super().discard(intent_id, **kwargs)
        self.storage.counts = before


class OpensBesideAnother(DictJournal):
    """``open_intent()`` records whatever else its session has unresolved."""

    async def pending(self, session_id: str | None, backend: Any = None) -> list[JournalEntry]:
        if backend is not None:
            return []
        return await super().pending(session_id, backend)


class RecordOverwrites(DictJournal):
    """``record()`` of a known id writes over it."""

    async def record(self, intent: PendingWrite, **kwargs: Any) -> None:
        self.rows().pop(intent.intent_id, None)
        await super().record(intent, **kwargs)


class AsideReadsATruncatedRecord(DictJournal):
    """``aside.raw()`` gives the record's bytes less the last one."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        raw = self.aside.raw

        async def truncated(intent_id: str) -> RawIntent | None:
            found = await raw(intent_id)
            return None if found is None else replace(found, record=found.record[:-1])

        self.aside.raw = truncated  # type: ignore[method-assign]


class AsideKeepsNoBytes(DictJournal):
    """``aside.set_aside()`` keeps the description and not the bytes."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        self.aside.keeping = lambda record: b""  # type: ignore[method-assign]


class _EffectsWithoutTheKeyring(DictEffects):
    def read(self, row: dict[str, Any]) -> Effect:
        return Effect.decode(row["record"])


class EffectsIgnoreTheKeyring(DictJournal):
    """Its effects read receipts without the keyring a session lent the journal."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        self.effects = _EffectsWithoutTheKeyring(self)


class _PrunesOldIntents(DictRetention):
    async def prune(self, retention: Retention, **options: Any) -> Pruned:
        pruned = await super().prune(retention, **options)
        before = self.due(retention, "decisions")
        if before is not None and not options.get("dry_run"):
            intents = self.journal.storage.intents
            for name in [name for name, row in intents.items() if row["created_at"] < before]:
                del intents[name]
        return pruned


class PruneRemovesUnresolvedIntents(DictJournal):
    """``retention.prune()`` also removes intents created before the decisions' retention
    (taken for abandoned)."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        self.retention = _PrunesOldIntents(self)


class _PrunesEveryOldReceipt(DictRetention):
    def busy(self) -> set[str]:
        return set()


class PruneRemovesReceiptsOfBusySessions(DictJournal):
    """``retention.prune()`` removes old receipts and counts whatever their session has
    unresolved."""

    def __init__(self, storage: Any = None) -> None:
        super().__init__(storage)
        self.retention = _PrunesEveryOldReceipt(self)


class PendingTiesByIntentId(DictJournal):
    """Lists intents created at the same time in the order of their ids (the protocol leaves
    their order open)."""

    async def pending(self, session_id: str | None, backend: Any = None) -> list[JournalEntry]:
        found = await super().pending(session_id, backend)
        return sorted(found, key=lambda entry: (entry.intent.created_at, entry.intent.intent_id))


class SaysNoAge(DictJournal):
    """Gives no ``age``: readers take the time since ``updated_at`` by their own clock."""

    def entry(self, row: dict[str, Any]) -> JournalEntry:
        return replace(super().entry(row), age=None)


# -- stores ------------------------------------------------------------------------------------


def _walked(value: Any, leaf: Callable[[Any], Any], *, nulls: bool = True) -> Any:
    """``value`` with ``leaf`` applied to every scalar inside it; without null fields when
    ``nulls`` is false."""
    if isinstance(value, dict):
        return {
            key: _walked(found, leaf, nulls=nulls)
            for key, found in value.items()
            if nulls or found is not None
        }
    if isinstance(value, list):
        return [_walked(found, leaf, nulls=nulls) for found in value]
    return leaf(value)


def _same(value: Any) -> Any:
    return value


def _as_number(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _six_digits(value: Any) -> Any:
    return float(f"{value:.6g}") if isinstance(value, float) else value


class LosesNulls(DictStore):
    """Drops the null fields of an item (a document store that stores no nulls)."""

    def encode(self, item: Any) -> str:
        return super().encode(_walked(item, _same, nulls=False))


class BooleansAsNumbers(DictStore):
    """Stores booleans as 0 and 1 (a database without a boolean)."""

    def encode(self, item: Any) -> str:
        return super().encode(_walked(item, _as_number))


class FloatsRounded(DictStore):
    """Keeps six significant digits of a float."""

    def encode(self, item: Any) -> str:
        return super().encode(_walked(item, _six_digits))


class TailFromTheStart(DictStore):
    """``get_items(limit=N)`` gives the first N items."""

    async def get_items(self, limit: int | None = None) -> list[Any]:
        every = await super().get_items()
        return every if limit is None else every[:limit]


class WriteIdsTakenTwice(DictStore):
    """``append_if()`` does not look for its write id among those recorded."""

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        actual = len(self.data["writes"])
        if actual != expected:
            raise RevisionConflict(f"at {actual}", expected=expected, actual=actual)
        self.data["items"].extend(self.encode(item) for item in items)
        return self.write("append", len(items), write_id, writer)


# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    """A mutant, what it is checked as, and the contracts that kill it (or, for one the suite
    lets through, why it cannot break a guarantee)."""

    name: str
    kind: str
    """``journal`` or ``store``."""
    made: type[Any]
    killed_by: frozenset[str] = frozenset()
    survives_because: str = ""


def _journal(name: str, made: type[DictJournal], *killed_by: str) -> Mutant:
    return Mutant(name, "journal", made, frozenset(killed_by))


def _store(name: str, made: type[DictStore], *killed_by: str) -> Mutant:
    return Mutant(name, "store", made, frozenset(killed_by))


SEALED = "records_sealed_with_the_lent_keys_open_with_them"
SIGNED = "records_the_deployment_did_not_sign_are_refused"
ACROSS = "a_write_through_one_journal_object_is_read_at_once_through_another"
CLOCK = "an_intents_age_is_seconds_by_the_journals_clock"
ROUND_TRIP = "items_with_nulls_numbers_booleans_and_nested_lists_read_back_exactly"

MUTANTS = [
    _journal("ignores the lent keyring", IgnoresTheKeyring, SEALED, SIGNED),
    _journal("a new keyring on every access", AFreshKeyringEachTime, SEALED, SIGNED),
    _journal("no keyring", WithoutAKeyring, SEALED, SIGNED),
    _journal("reads kept in a cache", CachedReads, ACROSS),
    _journal("reads from a lagging replica", ReadsAReplica, ACROSS),
    _journal("age from the client's created_at", AgeFromCreatedAt, CLOCK),
    _journal("age in milliseconds", AgeInMilliseconds, CLOCK),
    _journal("age in minutes", AgeInMinutes, CLOCK),
    _journal("a renewal keeps the age", RenewalKeepsTheAge, CLOCK),
    _journal(
        "transition answers True for any id",
        TransitionAnswersTrueForAnyId,
        "transition_of_an_unknown_or_settled_id_changes_nothing",
    ),
    _journal(
        "transition revives a settled id",
        TransitionRevivesASettledId,
        "transition_of_an_unknown_or_settled_id_changes_nothing",
    ),
    _journal("pending newest first", PendingNewestFirst, "pending_is_oldest_first"),
    _journal("pending in row order", PendingInRowOrder, "pending_is_oldest_first"),
    _journal(
        "each intent's first decision as its newest",
        NewestDecisionIsTheFirst,
        "newest_decisions_are_each_intents_newest",
    ),
    _journal("decisions ignore limit", DecisionsIgnoreLimit, "decisions_honour_limit"),
    _journal(
        "settle ignores the fence", SettleIgnoresTheFence, "settle_with_an_owner_needs_its_claim"
    ),
    _journal("claims keep their token", ClaimsKeepTheirToken, "fencing_tokens_grow_only_on_claims"),
    _journal("discard counts nothing", DiscardCountsNothing, "writes_are_counted"),
    _journal(
        "opens beside another intent",
        OpensBesideAnother,
        "open_intent_allows_one_unresolved_intent_per_session_and_backend",
    ),
    _journal(
        "record writes over a known id",
        RecordOverwrites,
        "record_is_idempotent_and_refuses_other_content",
    ),
    _journal(
        "aside reads a truncated record",
        AsideReadsATruncatedRecord,
        "aside_reads_an_intents_record_as_stored",
    ),
    _store("loses nulls", LosesNulls, ROUND_TRIP),
    _store("booleans as numbers", BooleansAsNumbers, ROUND_TRIP),
    _store("floats rounded", FloatsRounded, ROUND_TRIP),
    _store(
        "the tail from the start",
        TailFromTheStart,
        "get_items_limit_returns_the_newest_oldest_first",
    ),
    _store("write ids taken twice", WriteIdsTakenTwice, "a_write_id_is_recorded_once"),
    _journal("aside keeps no bytes", AsideKeepsNoBytes, "set_aside_bytes_read_back_exactly"),
    _journal(
        "effects ignore the lent keyring",
        EffectsIgnoreTheKeyring,
        "receipts_sealed_with_the_lent_keys_open_with_them",
        "effect_records_the_deployment_did_not_sign_are_refused",
    ),
    _journal(
        "prune removes an unresolved intent",
        PruneRemovesUnresolvedIntents,
        "pruning_removes_old_decisions_and_keeps_those_of_unresolved_intents",
    ),
    _journal(
        "prune removes a receipt of a session with an unresolved intent",
        PruneRemovesReceiptsOfBusySessions,
        "pruning_keeps_receipts_an_unresolved_intent_needs",
    ),
    Mutant(
        "pending ties in id order",
        "journal",
        PendingTiesByIntentId,
        survives_because=(
            "an equivalent mutant: one session holds one unresolved intent per backend, and "
            "the protocol leaves the order of intents created at the same time open"
        ),
    ),
    Mutant(
        "no age given",
        "journal",
        SaysNoAge,
        survives_because=(
            "an equivalent mutant here: without an age a reader takes the time since "
            "updated_at by its own clock, which is the journal's clock in this process"
        ),
    ),
]
"""Every mutant of the dict backend."""
