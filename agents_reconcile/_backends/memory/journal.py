"""An in-memory journal for tests, held to the same contracts as every other journal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from ..._core.ownership import Owner
from ..._core.records import BackendIdentity, Decision, PendingWrite
from ..._core.sealing import Keyring
from ...errors import IntentConflict, LeaseLost
from ..journal import (
    Capabilities,
    IntentState,
    JournalEntry,
    Opened,
    require_limit,
    require_settling,
)
from ..rows import decoded, each
from ..schema import Unversioned
from .aside import MemoryAside
from .effects import MemoryEffects
from .pages import MemoryPages
from .retention import MemoryRetention
from .rows import MemoryRows
from .sealing import MemorySealing

__all__ = ["MemoryJournal"]


class MemoryJournal(Unversioned):
    """``IntentJournal`` in a dict, answering as a stored journal does: a transition of an
    unknown or settled intent answers False, another decision for a settled intent raises
    ``IntentConflict``, a decision of the wrong kind ``ValueError``; and its reads open and
    check each record with its keyring, as a stored journal's reads do.

    A new journal is empty; ``another_worker`` gives a second object on its data (another
    worker of this process)."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        folds_clearing=True,
        starts_eagerly=True,
    )
    # Set by ``_on``, which the constructor and ``another_worker`` share: said here.
    keyring: Keyring
    """The keys lent to it: its reads open sealed batches with them and, where it holds a
    signer, refuse a record this deployment did not sign."""
    effects: MemoryEffects
    """Tools' external effects (``JournalEffects``)."""
    aside: MemoryAside
    """Damaged intents set aside (``JournalAside``)."""
    pages: MemoryPages
    """Its listings a page at a time (``JournalPages``)."""
    retention: MemoryRetention
    """Pruning what the retention lets go (``JournalRetention``)."""
    sealing: MemorySealing
    """The mark of a sealed journal (``JournalSealing``)."""

    @classmethod
    def from_address(cls, address: str, *, namespace: str | None = None) -> MemoryJournal:
        """A new, empty journal for ``memory:`` addresses (nothing outlives it)."""
        return cls()

    def __init__(self) -> None:
        self._on(MemoryRows())

    def _on(self, rows: MemoryRows) -> None:
        """Build the journal on ``rows``: new ones, or another journal's (``another_worker``)."""
        self.keyring = Keyring()
        self._rows = rows
        self.effects = MemoryEffects(rows, self.keyring)
        self.aside = MemoryAside(rows)
        self.pages = MemoryPages(rows)
        self.retention = MemoryRetention(rows)
        self.sealing = MemorySealing(rows)
        self.closed = False

    def another_worker(self) -> MemoryJournal:
        """Another journal object on this one's data, with a keyring of its own (a second
        worker of this process)."""
        twin = type(self).__new__(type(self))
        twin._on(self._rows)
        return twin

    def _as_read(self, entry: JournalEntry) -> JournalEntry:
        """``entry`` as a stored journal reads it back: its record opened and checked with
        this journal's keyring. Records are kept as objects here, so the check is made by
        encoding the record and decoding it with the keyring, where anything is sealed or
        signed (a keyring with a signer refuses an unsigned record)."""
        intent = entry.intent
        if intent.seal_key is None and intent.sign_key is None and self.keyring.signer is None:
            return entry
        keyring = self.keyring
        opened = decoded(
            intent.intent_id, lambda data: PendingWrite.decode(data, keyring), intent.encode()
        )
        return replace(entry, intent=opened)

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        if intent.intent_id in self._rows.settled:
            raise IntentConflict(
                f"intent {intent.intent_id} was already settled", intent_id=intent.intent_id
            )
        existing = self._rows.entries.get(intent.intent_id)
        if existing is not None:
            if not existing.intent.same_content(intent):
                raise IntentConflict(
                    f"intent {intent.intent_id} is recorded with other content",
                    intent_id=intent.intent_id,
                )
            return
        await self._enter(intent, state, owner)

    async def _enter(
        self, intent: PendingWrite, state: IntentState, owner: Owner, fence: int = 0
    ) -> None:
        """Store ``intent`` (checked: neither settled nor held) and count the write."""
        self._rows.entries[intent.intent_id] = JournalEntry(
            intent, state, owner, time.time(), fence
        )
        await self.count_write(intent.session_id, intent.backend)

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        cleared = self._rows.entries.get(clearing) if clearing is not None else None
        if (
            cleared is not None
            and cleared.state is IntentState.IN_FLIGHT
            and cleared.owner == owner
            and (cleared.intent.session_id, cleared.intent.backend)
            == (intent.session_id, intent.backend)
        ):
            await self.discard(cleared.intent.intent_id)
        write_count = await self.write_count(intent.session_id, intent.backend)
        held = self._rows.entries.get(intent.intent_id)
        if held is not None:
            if not held.intent.same_content(intent):
                raise IntentConflict(
                    f"intent {intent.intent_id} is recorded with other content",
                    intent_id=intent.intent_id,
                )
            if held.state is state and held.owner == owner:
                return Opened(
                    recorded=True, write_count=self._rows.opened_at.get(intent.intent_id, 0)
                )
            return Opened(recorded=False, write_count=write_count, blocking=[held])
        found = await self.pending(intent.session_id, intent.backend)
        if found:
            return Opened(recorded=False, write_count=write_count, blocking=found)
        if intent.intent_id in self._rows.settled:
            raise IntentConflict(
                f"intent {intent.intent_id} was already settled", intent_id=intent.intent_id
            )
        if expect_write_count is not None and write_count != expect_write_count:
            return Opened(recorded=False, write_count=write_count)
        await self._enter(intent, state, owner, fence=write_count)
        self._rows.opened_at[intent.intent_id] = write_count
        return Opened(recorded=True, write_count=write_count)

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        return self._rows.write_counts.get((session_id, backend), self._rows.floor)

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        return self._rows.count(session_id, backend)

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
        entry = self._rows.entries.get(intent_id)
        if entry is None:
            # Unknown or settled: nothing to move (a settled intent is never revived).
            return False
        if expect_updated_at is not None and entry.updated_at != expect_updated_at:
            return False
        if expect_state is not None and entry.state is not expect_state:
            return False
        if expect_owner is not None and entry.owner != expect_owner:
            return False
        if expect_fence is not None and entry.fence != expect_fence:
            return False
        fence = entry.fence
        if state is IntentState.RECONCILING and expect_fence is None:
            # A claim: a new token (see ``IntentJournal.transition``).
            write_count = await self.write_count(entry.intent.session_id, entry.intent.backend)
            fence = max(entry.fence + 1, write_count)
        self._rows.entries[intent_id] = JournalEntry(entry.intent, state, owner, time.time(), fence)
        return True

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        if owner is not None:
            if intent_id in self._rows.settled:
                # Taken over and settled by another meanwhile: never this owner's to clear.
                raise LeaseLost(
                    f"intent {intent_id} was settled; {owner} no longer holds it",
                    intent_id=intent_id,
                )
            held = self._rows.entries.get(intent_id)
            if held is None:
                return
            if (held.state, held.owner) != (IntentState.IN_FLIGHT, owner) or (
                fence is not None and held.fence != fence
            ):
                raise LeaseLost(
                    f"intent {intent_id} is no longer held in flight by {owner}",
                    intent_id=intent_id,
                )
        entry = self._rows.entries.get(intent_id)
        if entry is None:
            # Unknown, settled or discarded already (a retry): nothing changes.
            return
        del self._rows.entries[intent_id]
        self._rows.opened_at.pop(intent_id, None)
        await self.count_write(entry.intent.session_id, entry.intent.backend)

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        chosen = sorted(
            (
                entry
                for entry in self._rows.entries.values()
                if (session_id is None or entry.intent.session_id == session_id)
                and (backend is None or entry.intent.backend == backend)
            ),
            key=lambda entry: entry.intent.created_at,
        )
        return each(
            chosen,
            self._as_read,
            lambda entry: ("intent", entry.intent.intent_id, entry.intent.session_id),
        )

    async def get(self, intent_id: str) -> JournalEntry | None:
        entry = self._rows.entries.get(intent_id)
        return None if entry is None else self._as_read(entry)

    async def is_settled(self, intent_id: str) -> bool:
        return intent_id in self._rows.settled

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        require_settling(decision, settling=True)
        if decision.intent_id in self._rows.settled:
            if self._settled_by(decision):
                # The same call again, its first reply lost: already done.
                return
            raise IntentConflict(
                f"intent {decision.intent_id} was already settled", intent_id=decision.intent_id
            )
        entry = self._rows.entries.get(decision.intent_id)
        claimed = entry is None or (
            entry.state is IntentState.RECONCILING
            and entry.owner == owner
            and (fence is None or entry.fence == fence)
        )
        if owner is not None and not claimed:
            raise LeaseLost(
                f"intent {decision.intent_id} is not claimed by {owner}",
                intent_id=decision.intent_id,
            )
        self._rows.entries.pop(decision.intent_id, None)
        self._rows.opened_at.pop(decision.intent_id, None)
        self._rows.settled.add(decision.intent_id)
        await self.count_write(decision.session_id, decision.backend)
        self._rows.decisions.append(decision)

    def _settled_by(self, decision: Decision) -> bool:
        """Whether ``decision`` itself, byte for byte, is what settled its intent."""
        record = decision.encode()
        return any(
            stored.settled and stored.intent_id == decision.intent_id and stored.encode() == record
            for stored in self._rows.decisions
        )

    async def note(self, decision: Decision) -> None:
        require_settling(decision, settling=False)
        self._rows.decisions.append(decision)

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again``, only while
        it is still ``previous``; whether it was."""
        require_settling(again, settling=False)
        for index in range(len(self._rows.decisions) - 1, -1, -1):
            if self._rows.decisions[index].intent_id == previous.intent_id:
                if self._rows.decisions[index] != previous:
                    return False
                self._rows.decisions[index] = again
                return True
        return False

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        require_limit(limit)
        chosen = [
            d
            for d in reversed(self._rows.decisions)
            if (session_id is None or d.session_id == session_id)
            and (intent_id is None or d.intent_id == intent_id)
        ]
        return chosen[:limit]

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        return self._rows.newest(intent_ids)

    async def close(self) -> None:
        self.closed = True
