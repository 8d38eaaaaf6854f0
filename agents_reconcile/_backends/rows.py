"""Turning a journal's stored rows back into records, checked: shared by every journal.

A record carries its own digest, so an edited one fails to decode; a row whose columns (or
keys) say another intent, session or backend than the record inside it was moved, and is
refused too. A record too damaged to name itself is named by its row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, TypeVar

from .._core.effect_records import Effect
from .._core.ownership import Owner
from .._core.records import Decision, PendingWrite
from ..errors import JournalCorrupt, RecordError, RecordMalformed, RecordTampered
from .journal import IntentState, JournalEntry

if TYPE_CHECKING:
    from .._core.sealing import Keyring

__all__ = [
    "DamagedRecord",
    "checked_decision",
    "checked_effect",
    "checked_entry",
    "collecting_damage",
    "decoded",
    "each",
]

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class DamagedRecord:
    """A stored row that failed its checks, as its row names it (unverified): what kind of
    record, its id, its session, and the problem, never its content."""

    kind: str
    ident: str
    session_id: str | None
    problem: str
    error: str = "RecordTampered"
    """The class of the error that refused it: ``PayloadKeyUnknown`` (sound, sealed under a
    key not given) and ``UnsupportedRecordVersion`` (a newer release's) are not damage."""


_DAMAGED: Final[ContextVar[list[DamagedRecord] | None]] = ContextVar(
    "agents_reconcile_damaged", default=None
)


@contextmanager
def collecting_damage() -> Iterator[list[DamagedRecord]]:
    """A context in which a journal's listing reads report damaged rows instead of failing.

    What it is: the operators' commands (``status``, ``check``, ``show``) read a journal inside
    ``with collecting_damage() as damaged:``, so that one edited row hides no other. The list
    it yields receives a ``DamagedRecord`` (kind, id, session, problem, error class; never the
    content) for every row left out. It is a context variable: it holds for the task that
    entered it and the calls it awaits, and is cleared on leaving.

    When a journal must honour it: in every read that lists records, that is ``pending``,
    ``decisions``, ``newest_decisions``, ``effects.started`` and the rows of ``pages``'
    pages. There, a row whose record raises a ``RecordError`` (tampered, unsigned, moved to
    another row, malformed, sealed under a key the keyring lacks, a newer release's) or a
    ``JournalCorrupt`` is reported and left out, and the read goes on; outside it the same
    row fails the whole read. ``each(rows, make, named)`` does exactly that: build every
    record through it. The other reads (``get``, ``effects.get``, ``effects.of_session``)
    and every write never collect: they raise, and reconciliation never runs inside it (it
    fails closed)."""
    found: list[DamagedRecord] = []
    token = _DAMAGED.set(found)
    try:
        yield found
    finally:
        _DAMAGED.reset(token)


def each(
    rows: Iterable[_R],
    make: Callable[[_R], _T],
    named: Callable[[_R], tuple[str, object, object]],
) -> list[_T]:
    """``make(row)`` for every row. Under ``collecting_damage`` a row whose record cannot be
    trusted is reported (``named(row)``: kind, id, session) and left out; otherwise its error
    propagates."""
    collected = _DAMAGED.get()
    if collected is None:
        return [make(row) for row in rows]
    made: list[_T] = []
    for row in rows:
        try:
            made.append(make(row))
        except (RecordError, JournalCorrupt) as exc:
            kind, ident, session = named(row)
            collected.append(
                DamagedRecord(
                    kind,
                    str(ident),
                    None if session is None else str(session),
                    str(exc),
                    type(exc).__name__,
                )
            )
    return made


def decoded(intent_id: object, decode: Callable[[bytes], _T], record: object) -> _T:
    """``decode(record)``; its record errors name the intent when the record cannot."""
    if not isinstance(record, bytes):
        raise RecordMalformed(f"intent {intent_id}: the stored record is not bytes")
    try:
        return decode(record)
    except RecordError as exc:
        # Named in place, so the error keeps its type and what it carries (a key id).
        if str(intent_id) not in str(exc):
            exc.args = (f"intent {intent_id}: {exc}", *exc.args[1:])
        exc.intent_id = str(intent_id)
        raise


def checked_entry(
    intent_id: str,
    session_id: str,
    backend: str,
    state: str,
    owner: str,
    updated_at: float | str,
    record: object,
    keyring: Keyring | None = None,
    *,
    fence: int | str | None = None,
    age: float | str | None = None,
) -> JournalEntry:
    """An unresolved intent's row, checked against the record it holds (a sealed batch
    opened with ``keyring``); ``fence`` and ``age`` as ``JournalEntry`` has them."""
    intent = decoded(intent_id, lambda data: PendingWrite.decode(data, keyring), record)
    # Reads select by these columns: a row edited to hide its intent from its session (or to
    # show it to another) must not pass as that session's record.
    if (intent.intent_id, intent.session_id, str(intent.backend)) != (
        intent_id,
        session_id,
        backend,
    ):
        moved = RecordTampered(
            f"intent {intent_id}: the journal row and its record name different intents, "
            "sessions or backends"
        )
        moved.intent_id = intent_id
        raise moved
    try:
        return JournalEntry(
            intent=intent,
            state=IntentState(state),
            owner=Owner.parse(owner),
            updated_at=float(updated_at),
            fence=int(fence) if fence not in (None, "") else 0,
            age=float(age) if age not in (None, "") else None,
        )
    except (TypeError, ValueError) as exc:
        raise JournalCorrupt(
            f"intent {intent_id}: unreadable state, owner, token or time ({exc})"
        ) from exc


def checked_decision(intent_id: object, session_id: object, record: object) -> Decision:
    """A decision's row, checked against the record it holds."""
    decision = decoded(intent_id, Decision.decode, record)
    if (decision.intent_id, decision.session_id) != (intent_id, session_id):
        raise RecordTampered(
            f"decision on intent {intent_id}: the journal row and its record disagree"
        )
    return decision


def checked_effect(
    key: str,
    session_id: str,
    state: str,
    owner: str,
    record: object,
    keyring: Keyring | None,
    *,
    age: float | str | bytes | None = None,
) -> Effect:
    """A tool effect's row, checked against the record it holds (a sealed output opened with
    ``keyring``, a signature verified where records are signed): a record filed under another
    key or session, or whose state or owner is not the row's, is refused. ``age``: seconds
    since the row was last stamped, by the journal's clock, read with it (``Effect.age``)."""
    found = decoded(key, lambda data: Effect.decode(data, keyring), record)
    if (found.key, found.session_id, found.state.value, found.owner) != (
        key,
        session_id,
        state,
        owner,
    ):
        moved = RecordTampered(
            f"effect {key}: the journal row and its record name different keys, sessions, "
            "states or owners"
        )
        moved.intent_id = key
        raise moved
    if age in (None, "", b""):
        return found
    try:
        seconds = float(age)
    except (TypeError, ValueError) as exc:
        raise JournalCorrupt(f"effect {key}: unreadable age ({exc})") from exc
    return replace(found, age=seconds)
