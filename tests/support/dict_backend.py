"""A backend as someone outside this package would write one: a journal and a revisioned store
over plain dicts, records kept as the bytes a database would hold. Several journal objects (or
store objects) on one ``DictStorage`` are workers on the same data.

It imports only public names: the types a journal or store deals in come from
``agents_reconcile.backend_kit``, the errors it raises from ``agents_reconcile``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents_reconcile import IntentConflict, LeaseLost, RevisionConflict
from agents_reconcile.backend_kit import (
    BackendIdentity,
    Decision,
    Effect,
    EffectState,
    IntentState,
    JournalEntry,
    Keyring,
    Opened,
    Owner,
    PendingWrite,
    Pruned,
    RawIntent,
    Retention,
    SetAside,
    WriteRecord,
)

__all__ = [
    "DictAside",
    "DictEffects",
    "DictJournal",
    "DictRetention",
    "DictStorage",
    "DictStore",
]


@dataclass
class DictStorage:
    """What a database would hold: rows as dicts, records as bytes."""

    intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)
    decisions: list[bytes] = field(default_factory=list)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    counted_at: dict[tuple[str, str], float] = field(default_factory=dict)
    floor: int = 0
    aside: list[tuple[bytes, bytes]] = field(default_factory=list)
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)


def _limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")


class DictJournal:
    """An intent journal over a ``DictStorage``, with effects, aside and retention components."""

    pages = None
    sealing = None

    def __init__(self, storage: DictStorage | None = None) -> None:
        self.storage = DictStorage() if storage is None else storage
        self.keyring = Keyring()
        self.effects = DictEffects(self)
        self.aside = DictAside(self)
        self.retention = DictRetention(self)

    # -- rows ---------------------------------------------------------------------------

    def clock(self) -> float:
        return time.time()

    def rows(self) -> dict[str, dict[str, Any]]:
        return self.storage.intents

    def entry(self, row: dict[str, Any]) -> JournalEntry:
        return JournalEntry(
            intent=PendingWrite.decode(row["record"], self.keyring),
            state=IntentState(row["state"]),
            owner=Owner.parse(row["owner"]),
            updated_at=row["updated_at"],
            fence=row["fence"],
        )

    def add_write(self, session_id: str, backend: Any) -> int:
        key = (session_id, str(backend))
        self.storage.counts[key] = self.storage.counts.get(key, self.storage.floor) + 1
        self.storage.counted_at[key] = self.clock()
        return self.storage.counts[key]

    def new_row(self, intent: PendingWrite, state: IntentState, owner: Owner, fence: int) -> None:
        self.rows()[intent.intent_id] = {
            "session_id": intent.session_id,
            "backend": str(intent.backend),
            "created_at": intent.created_at,
            "state": state.value,
            "owner": str(owner),
            "updated_at": self.clock(),
            "fence": fence,
            "opened_at": fence,
            "record": intent.encode(),
        }

    def stored_decision(self, decision: Decision) -> None:
        self.storage.decisions.append(decision.encode())

    def every_decision(self) -> list[Decision]:
        return [Decision.decode(record) for record in self.storage.decisions]

    # -- IntentJournal --------------------------------------------------------------------

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        if intent.intent_id in self.storage.settled:
            raise IntentConflict(f"{intent.intent_id} is settled", intent_id=intent.intent_id)
        row = self.rows().get(intent.intent_id)
        if row is not None:
            if not self.entry(row).intent.same_content(intent):
                raise IntentConflict(f"{intent.intent_id} differs", intent_id=intent.intent_id)
            return
        self.new_row(intent, state, owner, 0)
        self.add_write(intent.session_id, intent.backend)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        cleared = self.rows().get(clearing) if clearing is not None else None
        if cleared is not None and (
            cleared["state"],
            cleared["owner"],
            cleared["session_id"],
            cleared["backend"],
        ) == (IntentState.IN_FLIGHT.value, str(owner), intent.session_id, str(intent.backend)):
            await self.discard(str(clearing))
        count = await self.write_count(intent.session_id, intent.backend)
        row = self.rows().get(intent.intent_id)
        if row is not None:
            held = self.entry(row)
            if not held.intent.same_content(intent):
                raise IntentConflict(f"{intent.intent_id} differs", intent_id=intent.intent_id)
            if (held.state, held.owner) == (state, owner):
                return Opened(recorded=True, write_count=row["opened_at"])
            return Opened(recorded=False, write_count=count, blocking=[held])
        if intent.intent_id in self.storage.settled:
            raise IntentConflict(f"{intent.intent_id} is settled", intent_id=intent.intent_id)
        blocking = await self.pending(intent.session_id, intent.backend)
        if blocking:
            return Opened(recorded=False, write_count=count, blocking=blocking)
        if expect_write_count is not None and count != expect_write_count:
            return Opened(recorded=False, write_count=count)
        self.new_row(intent, state, owner, count)
        self.add_write(intent.session_id, intent.backend)
        return Opened(recorded=True, write_count=count)

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        return self.storage.counts.get((session_id, str(backend)), self.storage.floor)

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        return self.add_write(session_id, backend)

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
        expect_fence: int | None = None,
        expect_updated_at: float | None = None,
    ) -> bool:
        row = self.rows().get(intent_id)
        if row is None:
            return False
        expected = (
            (expect_state, row["state"], lambda e: e.value),
            (expect_owner, row["owner"], str),
            (expect_fence, row["fence"], lambda e: e),
            (expect_updated_at, row["updated_at"], lambda e: e),
        )
        if any(want is not None and show(want) != have for want, have, show in expected):
            return False
        if state is IntentState.RECONCILING and expect_fence is None:
            count = self.storage.counts.get((row["session_id"], row["backend"]), self.storage.floor)
            row["fence"] = max(row["fence"] + 1, count)
        row.update(state=state.value, owner=str(owner), updated_at=self.clock())
        return True

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        if owner is not None and intent_id in self.storage.settled:
            raise LeaseLost(
                f"{intent_id} was settled; {owner} no longer holds it", intent_id=intent_id
            )
        row = self.rows().get(intent_id)
        if row is None:
            return
        if owner is not None and (
            (row["state"], row["owner"]) != (IntentState.IN_FLIGHT.value, str(owner))
            or (fence is not None and row["fence"] != fence)
        ):
            raise LeaseLost(f"{intent_id} is not held by {owner}", intent_id=intent_id)
        del self.rows()[intent_id]
        self.add_write(row["session_id"], row["backend"])

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        chosen = [
            row
            for row in self.rows().values()
            if session_id in (None, row["session_id"])
            and (backend is None or row["backend"] == str(backend))
        ]
        chosen.sort(key=lambda row: row["created_at"])
        return [self.entry(row) for row in chosen]

    async def get(self, intent_id: str) -> JournalEntry | None:
        row = self.rows().get(intent_id)
        return None if row is None else self.entry(row)

    async def is_settled(self, intent_id: str) -> bool:
        return intent_id in self.storage.settled

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        if not decision.settled:
            raise ValueError(f"settle() takes a settling decision, not {decision.action.value}")
        name = decision.intent_id
        if name in self.storage.settled:
            if decision.encode() in self.storage.decisions:
                return
            raise IntentConflict(f"{name} is settled already", intent_id=name)
        row = self.rows().get(name)
        if owner is not None and row is not None:
            held = (row["state"], row["owner"]) == (IntentState.RECONCILING.value, str(owner))
            if not held or (fence is not None and row["fence"] != fence):
                raise LeaseLost(f"{name} is not claimed by {owner}", intent_id=name)
        self.rows().pop(name, None)
        self.storage.settled.add(name)
        self.add_write(decision.session_id, decision.backend)
        self.stored_decision(decision)

    async def note(self, decision: Decision) -> None:
        if decision.settled:
            raise ValueError("note() takes a decision that settles nothing")
        self.stored_decision(decision)

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        if again.settled:
            raise ValueError("note_again() takes a decision that settles nothing")
        records = self.storage.decisions
        for index in range(len(records) - 1, -1, -1):
            if Decision.decode(records[index]).intent_id == previous.intent_id:
                if records[index] != previous.encode():
                    return False
                records[index] = again.encode()
                return True
        return False

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        _limit(limit)
        chosen = [
            decision
            for decision in reversed(self.every_decision())
            if session_id in (None, decision.session_id) and intent_id in (None, decision.intent_id)
        ]
        return chosen[:limit]

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        found: dict[str, Decision] = {}
        for decision in reversed(self.every_decision()):
            if decision.intent_id in intent_ids and decision.intent_id not in found:
                found[decision.intent_id] = decision
        return found

    async def close(self) -> None:
        pass

    async def schema_version(self) -> int | None:
        return None

    async def check(self) -> str | None:
        return None

    async def migrate(self) -> list[str]:
        return []


class DictAside:
    """Setting damaged intents aside, in the journal's ``DictStorage``."""

    def __init__(self, journal: DictJournal) -> None:
        self.journal = journal

    def keeping(self, record: bytes) -> bytes:
        return record

    async def raw(self, intent_id: str) -> RawIntent | None:
        row = self.journal.rows().get(intent_id)
        if row is None:
            return None
        columns = ("session_id", "backend", "state", "owner", "updated_at", "record")
        return RawIntent.of_row((intent_id, *(row[name] for name in columns)))

    async def set_aside(self, raw: RawIntent, aside: SetAside, decision: Decision) -> bool:
        now = await self.raw(raw.intent_id)
        if now is None or now.stored != raw.stored:
            return False
        storage = self.journal.storage
        del storage.intents[raw.intent_id]
        storage.settled.add(raw.intent_id)
        self.journal.add_write(raw.session_id, raw.backend)
        self.journal.stored_decision(decision)
        storage.aside.append((aside.encode(), self.keeping(raw.record)))
        return True

    async def entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        _limit(limit)
        chosen = [
            aside
            for aside in (SetAside.decode(meta) for meta, _ in reversed(self.journal.storage.aside))
            if session_id in (None, aside.session_id) and intent_id in (None, aside.intent_id)
        ]
        return chosen[:limit]

    async def kept(self, intent_id: str) -> bytes | None:
        for meta, record in reversed(self.journal.storage.aside):
            if SetAside.decode(meta).intent_id == intent_id:
                return record
        return None


class DictEffects:
    """Tools' effects in the journal's ``DictStorage``: a row per key, the record as bytes,
    read with the journal's keyring."""

    def __init__(self, journal: DictJournal) -> None:
        self.journal = journal

    def rows(self) -> dict[str, dict[str, Any]]:
        return self.journal.storage.effects

    def read(self, row: dict[str, Any]) -> Effect:
        return Effect.decode(row["record"], self.journal.keyring)

    def store(self, effect: Effect) -> Effect:
        self.rows()[effect.key] = {
            "session_id": effect.session_id,
            "state": effect.state.value,
            "owner": effect.owner,
            "stored_at": self.journal.clock(),
            "record": effect.encode(),
        }
        return self.read(self.rows()[effect.key])

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
        row = self.rows().get(effect.key)
        if row is not None:
            return self.read(row), False
        return self.store(effect), True

    async def restart(self, effect: Effect, *, expect_owner: str) -> bool:
        row = self.rows().get(effect.key)
        if row is None or (row["state"], row["owner"]) != (EffectState.STARTED.value, expect_owner):
            return False
        self.store(effect)
        return True

    async def finish(self, effect: Effect) -> Effect:
        row = self.rows().get(effect.key)
        if row is not None and row["owner"] == effect.owner:
            if row["state"] == EffectState.STARTED.value:
                return self.store(effect)
            held = self.read(row)
            if held.output_digest == effect.output_digest:
                return held
        raise IntentConflict(
            f"no started effect {effect.key} of {effect.owner}", intent_id=effect.key
        )

    async def get(self, key: str) -> Effect | None:
        row = self.rows().get(key)
        return None if row is None else self.read(row)

    async def of_session(self, session_id: str) -> list[Effect]:
        return [self.read(row) for row in self.rows().values() if row["session_id"] == session_id]

    async def started(self, session_id: str | None = None) -> list[Effect]:
        return [
            self.read(row)
            for row in self.rows().values()
            if row["state"] == EffectState.STARTED.value and session_id in (None, row["session_id"])
        ]


class DictRetention:
    """Pruning the journal's ``DictStorage`` by the protocol: old decisions, set-aside entries,
    receipts and idle counts go, never what a session with an unresolved intent needs."""

    def __init__(self, journal: DictJournal) -> None:
        self.journal = journal

    def busy(self) -> set[str]:
        return {row["session_id"] for row in self.journal.storage.intents.values()}

    def due(self, retention: Retention, kind: Any) -> float | None:
        seconds = retention.seconds(kind)
        return None if seconds is None else self.journal.clock() - seconds

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        storage = self.journal.storage
        busy = self.busy()
        most = limit if limit is not None else 10**12
        done = True

        def first(found: list[Any]) -> list[Any]:
            nonlocal done
            done = done and len(found) <= most
            return found[:most]

        before = self.due(retention, "decisions")
        decisions = []
        asides = []
        if before is not None:
            decisions = first(
                sorted(
                    (
                        (Decision.decode(record).decided_at, index)
                        for index, record in enumerate(storage.decisions)
                        if Decision.decode(record).decided_at < before
                        and Decision.decode(record).intent_id not in storage.intents
                    )
                )
            )
            asides = first(
                sorted(
                    (SetAside.decode(meta).set_aside_at, index)
                    for index, (meta, _) in enumerate(storage.aside)
                    if SetAside.decode(meta).set_aside_at < before
                )
            )
        before = self.due(retention, "receipts")
        receipts = []
        if before is not None:
            receipts = first(
                sorted(
                    (row["stored_at"], key)
                    for key, row in storage.effects.items()
                    if row["state"] == EffectState.DONE.value
                    and row["stored_at"] < before
                    and row["session_id"] not in busy
                )
            )
        before = self.due(retention, "idle_sessions")
        counts = []
        if before is not None:
            counts = first(
                sorted(
                    (at, key)
                    for key, at in storage.counted_at.items()
                    if at < before and key[0] not in busy
                )
            )
        size = sum(len(storage.decisions[index]) for _, index in decisions)
        size += sum(
            len(storage.aside[index][0]) + len(storage.aside[index][1]) for _, index in asides
        )
        size += sum(len(storage.effects[key]["record"]) for _, key in receipts)
        if not dry_run:
            gone = {index for _, index in decisions}
            storage.decisions[:] = [r for n, r in enumerate(storage.decisions) if n not in gone]
            gone = {index for _, index in asides}
            storage.aside[:] = [entry for n, entry in enumerate(storage.aside) if n not in gone]
            for _, key in receipts:
                del storage.effects[key]
            for _, key in counts:
                storage.floor = max(storage.floor, storage.counts.pop(key))
                del storage.counted_at[key]
        return Pruned(len(decisions), len(asides), len(receipts), len(counts), size, done)


class DictStore:
    """A revisioned session over a ``DictStorage``: items as JSON text, a record of writes."""

    def __init__(self, session_id: str, storage: DictStorage) -> None:
        self.session_id = session_id
        self.session_settings = None
        self.data = storage.sessions.setdefault(session_id, {"items": [], "writes": []})

    def encode(self, item: Any) -> str:
        return json.dumps(item)

    def decode(self, text: str) -> Any:
        return json.loads(text)

    def write(self, kind: str, count: int, write_id: str, writer: str) -> int:
        revision = len(self.data["writes"]) + 1
        record = WriteRecord(revision, write_id, writer, kind, count, time.time())
        self.data["writes"].append(record)
        return revision

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items = self.data["items"]
        chosen = items if limit is None else items[-limit:] if limit > 0 else []
        return [self.decode(text) for text in chosen]

    async def add_items(self, items: list[Any]) -> None:
        if items:
            self.data["items"].extend(self.encode(item) for item in items)
            self.write("append", len(items), f"w{time.time_ns()}", "anonymous")

    async def pop_item(self) -> Any | None:
        if not self.data["items"]:
            return None
        text = self.data["items"].pop()
        self.write("pop", 1, f"w{time.time_ns()}", "anonymous")
        return self.decode(text)

    async def clear_session(self) -> None:
        count = len(self.data["items"])
        self.data["items"].clear()
        self.write("clear", count, f"w{time.time_ns()}", "anonymous")

    async def head(self) -> int:
        return len(self.data["writes"])

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        actual = len(self.data["writes"])
        taken = any(record.write_id == write_id for record in self.data["writes"])
        if actual != expected or taken:
            raise RevisionConflict(f"at {actual}, not {expected}", expected=expected, actual=actual)
        self.data["items"].extend(self.encode(item) for item in items)
        return self.write("append", len(items), write_id, writer)

    async def find_write(self, write_id: str) -> WriteRecord | None:
        found = [record for record in self.data["writes"] if record.write_id == write_id]
        return found[0] if found else None

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        return self.data["writes"][revision : revision + limit]
