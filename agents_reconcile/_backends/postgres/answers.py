"""What the PostgreSQL journal's rows say: an intent's row as a ``JournalEntry``, a decision's
row, a write count checked as one, and the answer ``open_intent``'s statements give
(``_Asked``), with the conflicts they raise. Every record is decoded, and so checked, with the
journal's keyring. Functions of the rows alone: they run no statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..._core.ownership import Owner
from ..._core.records import Decision, PendingWrite
from ..._core.sealing import Keyring
from ...errors import IntentConflict, JournalCorrupt
from ..journal import IntentState, JournalEntry, Opened
from ..rows import checked_decision, checked_entry, decoded

# open_intent's statements start each row with added, settled, write_count and the seven columns
# of the intent holding the id; an unresolved intent of the session follows, in seven columns
# (a fused append's statement adds its own after them).
_HEAD_COLUMNS: Final = 10
_INTENT_COLUMNS: Final = 7


def _already_settled(intent_id: str) -> IntentConflict:
    return IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)


def _compare(intent: PendingWrite, prior: object, keyring: Keyring) -> None:
    """The id is taken: a no-op when ``prior`` holds the same content, else a conflict."""
    if prior is not None:
        existing = decoded(intent.intent_id, lambda data: PendingWrite.decode(data, keyring), prior)
        if existing.same_content(intent):
            return
    raise IntentConflict(
        f"intent {intent.intent_id} is recorded with other content", intent_id=intent.intent_id
    )


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise JournalCorrupt(f"a session's write count is {value!r}, not a count")
    return value


def _other_content(intent: PendingWrite) -> IntentConflict:
    return IntentConflict(
        f"intent {intent.intent_id} is recorded with other content", intent_id=intent.intent_id
    )


@dataclass(frozen=True, slots=True)
class _Asked:
    """An ``open_intent`` call, to read its statements' answers against."""

    intent: PendingWrite
    state: IntentState
    owner: Owner
    expect_write_count: int | None
    keyring: Keyring

    def answer(self, head: Any, rows: Sequence[Any], write_count: int) -> Opened | None:
        """The answer ``head`` (a row's flags, count and the intent holding the id) and
        ``rows`` (the session's unresolved intents, after the head's columns) give, in the
        contract's order; None when they do not say why nothing was inserted (the fence
        fell, or the id was taken after the snapshot)."""
        if head["added"]:
            return Opened(recorded=True, write_count=write_count)
        held = self.holding(head, write_count)
        if held is not None:
            return held
        blocking = [
            _entry(tuple(found)[_HEAD_COLUMNS : _HEAD_COLUMNS + _INTENT_COLUMNS], self.keyring)
            for found in rows
            if found["intent_id"] is not None
        ]
        if blocking:
            return Opened(recorded=False, write_count=write_count, blocking=blocking)
        if head["settled"]:
            raise _already_settled(self.intent.intent_id)
        if self.expect_write_count is not None and write_count != self.expect_write_count:
            return Opened(recorded=False, write_count=write_count)
        return None

    def holding(self, head: Any, write_count: int) -> Opened | None:
        """The answer when ``head`` shows an intent holding the id (None when none does):
        other content conflicts; this call's own intent, as it left it, is recorded."""
        intent = self.intent
        if head["prior"] is None:
            return None
        held = _entry(
            (
                intent.intent_id,
                head["prior_session"],
                head["prior_backend"],
                head["prior_state"],
                head["prior_owner"],
                head["prior_updated"],
                head["prior"],
            ),
            self.keyring,
        )
        if not held.intent.same_content(intent):
            raise _other_content(intent)
        if held.state is self.state and held.owner == self.owner:
            # Opened already by this same call, whose reply was lost: answer as it was.
            return Opened(recorded=True, write_count=_count(head["prior_seq"]))
        return Opened(recorded=False, write_count=write_count, blocking=[held])


def _entry(row: Sequence[Any], keyring: Keyring) -> JournalEntry:
    """An intent's row: its seven columns, then its token and age where selected."""
    intent_id, session_id, backend, state, owner, updated_at, record, *held = tuple(row)
    fence, age = held if len(held) == 2 else (0, None)
    texts = (intent_id, session_id, backend, state, owner)
    if (
        not all(isinstance(value, str) for value in texts)
        or not isinstance(updated_at, float)
        or not isinstance(fence, int)
    ):
        raise JournalCorrupt(f"intent {intent_id!r}: the journal row has unexpected types")
    return checked_entry(
        intent_id,
        session_id,
        backend,
        state,
        owner,
        updated_at,
        record,
        keyring,
        fence=fence,
        age=age,
    )


def _decision(row: Sequence[Any]) -> Decision:
    intent_id, session_id, record = tuple(row)
    return checked_decision(intent_id, session_id, record)
