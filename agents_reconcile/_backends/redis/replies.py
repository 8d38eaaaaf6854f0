"""Reading the Redis journal's replies, and its driver's errors, as the journal's own.

A script's reply is checked for the shape its script promises; anything else is a journal
that is not what this release wrote (``JournalCorrupt``, naming only the reply's shape: a
reply may carry a batch's content). A driver error is translated once, here: the server
cannot serve now (``JournalUnavailable``) or answered something no journal would
(``JournalCorrupt``); passwords are scrubbed from every message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NoReturn, TypeVar

from redis import exceptions as redis_errors

from ..._core.effect_records import Effect
from ..._core.ownership import Owner
from ..._core.records import Decision, PendingWrite
from ..._core.sealing import Keyring
from ...errors import (
    IntentConflict,
    JournalCorrupt,
    JournalUnavailable,
    RecordError,
    RecordTampered,
)
from ..journal import IntentState, JournalEntry, Opened
from ..redaction import Redacted
from ..rows import checked_effect, checked_entry, each

__all__ = [
    "DRIVER_ERRORS",
    "SCHEMA_REFUSAL",
    "EffectRow",
    "Moved",
    "Row",
    "is_driver_error",
    "no_node_known",
    "torn_down",
    "translate",
]

SCHEMA_REFUSAL: Final = "AGENTS_RECONCILE_SCHEMA"
# Replies that say the server cannot serve now, not that the journal is damaged.
_TRANSIENT_REPLIES: Final = (
    "BUSY",
    "LOADING",
    "MASTERDOWN",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOREPLICAS",
)
_CLUSTER_REPLIES: Final = ("MOVED", "ASK", "CROSSSLOT")
_T = TypeVar("_T")

Row = tuple[str, str, str, str, str, bytes, str, str]
EffectRow = tuple[str, str, str, bytes, str]
"""An effect as the scripts answer it: key, state, owner, record, age (by the server's clock)."""


@dataclass(frozen=True, slots=True)
class Moved:
    """A script found the intent held by another session than the one it was given (None:
    by no session)."""

    holder: str | None


DRIVER_ERRORS: Final = (
    redis_errors.RedisError,
    redis_errors.RedisClusterException,
    OSError,
    AttributeError,
    IndexError,
)
"""What the driver raises: its own errors (a cluster client also raises
``RedisClusterException``, no ``RedisError``, when it cannot reach the cluster), the socket's,
the ``AttributeError`` of a connection torn down under the client (``torn_down``) and the
``IndexError`` of a cluster client whose map of the nodes is empty (``no_node_known``). Any
other ``AttributeError`` or ``IndexError`` is a bug, never translated."""


def _raised_in_driver(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc`` is the driver's (a module of ``redis``) or the
    standard library's ``random`` called by it."""
    frame = exc.__traceback__
    modules: list[str] = []
    while frame is not None:
        modules.append(str(frame.tb_frame.f_globals.get("__name__", "")))
        frame = frame.tb_next
    while modules and modules[-1] == "random":
        modules.pop()
    return bool(modules) and (modules[-1] == "redis" or modules[-1].startswith("redis."))


def torn_down(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's ``AttributeError`` on a connection closed under it: a
    cluster client whose node's connections were closed by another task (a failover, a slot
    map loaded again) meets its socket's reader or writer gone (None) in the middle of a
    command. Told from a bug by where it was raised (in the driver) and on what (None)."""
    if not isinstance(exc, AttributeError) or getattr(exc, "obj", None) is not None:
        return False
    return _raised_in_driver(exc)


def no_node_known(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's ``IndexError`` of a cluster client that knows no node
    (or no primary) to send to: its map of the nodes emptied while failovers changed the
    cluster, a random node chosen from none. Told from a bug by where it was raised."""
    return isinstance(exc, IndexError) and _raised_in_driver(exc)


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's, for ``translate`` (``DRIVER_ERRORS``)."""
    if isinstance(exc, AttributeError):
        return torn_down(exc)
    if isinstance(exc, IndexError):
        return no_node_known(exc)
    return isinstance(exc, DRIVER_ERRORS)


def translate(
    exc: Exception,
    operation: str,
    *,
    where: str,
    address: Redacted,
    refused: Callable[[bytes], Exception],
    cluster: bool = False,
) -> Exception:
    """The journal's error for a driver error met during ``operation``; ``refused`` makes
    the error for a schema version a writing script refused; ``cluster``: the journal is on
    a Redis Cluster (whose redirections its client follows: one left over is a slot moving
    again and again, not a server of the wrong kind)."""
    if isinstance(exc, OSError):
        detail = address.scrub(f"{type(exc).__name__}: {exc}")
        return JournalUnavailable(
            f"Redis journal {address} unreachable during {operation}: {detail}"
        )
    if isinstance(exc, AttributeError):
        # torn_down: the connection was closed by another task of the client (a failover).
        return JournalUnavailable(
            f"{where}: a connection was closed under the client during {operation} (the "
            f"cluster's nodes changing?): {address.scrub(str(exc))}"
        )
    if isinstance(exc, IndexError):
        # no_node_known: the client's map of the cluster's nodes is empty (a failover).
        return JournalUnavailable(
            f"{where}: the client knew no node of the cluster to send to during {operation} "
            f"(its map of the nodes emptied while they changed?): {address.scrub(str(exc))}"
        )
    text = address.scrub(str(exc))
    if isinstance(exc, redis_errors.ResponseError):
        if SCHEMA_REFUSAL in text:
            return refused(text.split(SCHEMA_REFUSAL, 1)[1].strip().encode())
        code = text.split(" ", 1)[0].upper()
        if isinstance(exc, redis_errors.AskError):
            # redis-py keeps only the slot and node of a redirection ("3827 host:port").
            code = "MOVED" if isinstance(exc, redis_errors.MovedError) else "ASK"
        if code in _CLUSTER_REPLIES or isinstance(exc, redis_errors.ClusterCrossSlotError):
            if cluster:
                return JournalUnavailable(f"{where} answered {code} during {operation}: {text}")
            return JournalUnavailable(
                f"{where} answered {code} during {operation}: a Redis Cluster takes a "
                "redis+cluster:// address"
            )
        if (
            isinstance(
                exc,
                redis_errors.ReadOnlyError
                | redis_errors.OutOfMemoryError
                | redis_errors.TryAgainError
                | redis_errors.ClusterDownError
                | redis_errors.NoPermissionError,
            )
            or code in _TRANSIENT_REPLIES
        ):
            return JournalUnavailable(f"{where} refused {operation}: {text}")
        return JournalCorrupt(f"{where} failed {operation}: {text}")
    if isinstance(exc, redis_errors.ConnectionError | redis_errors.TimeoutError):
        return JournalUnavailable(
            f"{where} could not be reached during {operation}: {type(exc).__name__}: {text}"
        )
    return JournalUnavailable(
        f"{where} cannot be used for {operation}: {type(exc).__name__}: {text}"
    )


def unexpected(operation: str, reply: object) -> JournalCorrupt:
    # The shape only: a reply may carry a batch's content.
    shape = type(reply).__name__
    if isinstance(reply, list | tuple):
        shape += f" of {len(reply)}"
    return JournalCorrupt(f"unexpected reply from the Redis journal to {operation}: {shape}")


def moved(reply: object, operation: str) -> Moved:
    """Reads a script's ``{'moved', holder}`` (``{'moved'}`` when no session holds the
    intent)."""
    parts = as_list(reply, operation)
    if not 1 <= len(parts) <= 2 or text(parts[0], operation) != "moved":
        raise unexpected(operation, reply)
    return Moved(text(parts[1], "an intent's session") if len(parts) == 2 else None)


def is_word(reply: object, word: str) -> bool:
    """Whether a script replied with the one-word list ``{word}``."""
    return isinstance(reply, list) and len(reply) == 1 and reply[0] in (word, word.encode())


def status(reply: object, operation: str) -> tuple[str, list[object]]:
    """A script's reply read as its status word and the whole list."""
    parts = as_list(reply, operation)
    return (text(parts[0], operation) if parts else ""), parts


def as_list(reply: object, operation: str) -> list[object]:
    if not isinstance(reply, list):
        raise unexpected(operation, reply)
    return reply


def text(value: object, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise JournalCorrupt(f"the Redis journal holds an unreadable value for {what}: {value!r:.80}")


def blob(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise JournalCorrupt(f"the Redis journal holds an unreadable value for {what}: {value!r:.80}")


def count(value: object, operation: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bytes | str):
        digits = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        if digits.isdigit():
            return int(digits)
    raise unexpected(operation, value)


def rows(reply: object, operation: str) -> list[Row]:
    found: list[Row] = []
    for row in as_list(reply, operation):
        fields = as_list(row, operation)
        if len(fields) != 8:
            raise unexpected(operation, row)
        intent_id, backend, state, owner, updated = (
            text(value, f"an intent's {name}")
            for value, name in zip(
                fields[:5], ("id", "backend", "state", "owner", "update time"), strict=True
            )
        )
        record = blob(fields[5], "a record")
        fence, age = text(fields[6], "an intent's token"), text(fields[7], "an intent's age")
        found.append((intent_id, backend, state, owner, updated, record, fence, age))
    return found


def pair(value: object) -> tuple[str, bytes]:
    fields = as_list(value, "decisions")
    if len(fields) != 2:
        raise unexpected("decisions", value)
    return text(fields[0], "a decision number"), blob(fields[1], "a decision")


def entry(session_id: str, row: Row, keyring: Keyring | None = None) -> JournalEntry:
    intent_id, backend, state, owner, updated, record, fence, age = row
    return checked_entry(
        intent_id, session_id, backend, state, owner, updated, record, keyring, fence=fence, age=age
    )


def decoded(name: str, ident: str, decode: Callable[[bytes], _T], record: bytes) -> _T:
    try:
        return decode(record)
    except RecordError as exc:
        if ident in str(exc):
            raise
        # Name the entry: a record that cannot be parsed at all cannot name itself.
        raise type(exc)(f"{name}: {exc}") from exc


def compare(intent: PendingWrite, stored: object, keyring: Keyring | None = None) -> None:
    """The same id again is a no-op when its content is the same, a conflict otherwise."""
    existing = decoded(
        f"intent {intent.intent_id}",
        intent.intent_id,
        lambda data: PendingWrite.decode(data, keyring),
        blob(stored, "a record"),
    )
    if not existing.same_content(intent):
        raise other_content(intent.intent_id)


def other_content(intent_id: str) -> IntentConflict:
    return IntentConflict(f"intent {intent_id} is recorded with other content", intent_id=intent_id)


def refuse(intent_id: str, word: str, reply: object, operation: str) -> NoReturn:
    if word == "settled":
        raise IntentConflict(f"intent {intent_id} was already settled", intent_id=intent_id)
    if word == "taken":
        # The id is held by another session; its record names that session, so it differs.
        raise other_content(intent_id)
    raise unexpected(operation, reply)


def opened(
    intent: PendingWrite,
    state: IntentState,
    owner: Owner,
    reply: object,
    keyring: Keyring | None = None,
) -> tuple[Opened, bool]:
    """What ``open_intent.lua`` answered, and whether the intent now lives in its session."""
    word, parts = status(reply, "open_intent")
    if word in ("settled", "taken") and len(parts) == 1:
        refuse(intent.intent_id, word, reply, "open_intent")
    if len(parts) < 2:
        raise unexpected("open_intent", reply)
    write_count = count(parts[1], "open_intent")
    if word == "recorded" and len(parts) == 2:
        return Opened(recorded=True, write_count=write_count), True
    if word == "stale" and len(parts) == 2:
        return Opened(recorded=False, write_count=write_count), False
    if word == "blocked" and len(parts) == 3:
        blocking = [entry(intent.session_id, row, keyring) for row in rows(parts[2], "open_intent")]
        return Opened(recorded=False, write_count=write_count, blocking=blocking), False
    if word == "held" and len(parts) == 4:
        [row] = rows([parts[3]], "open_intent")
        held = entry(intent.session_id, row, keyring)
        if not held.intent.same_content(intent):
            raise other_content(intent.intent_id)
        if held.state is state and held.owner == owner:
            # Opened already by this same call, whose reply was lost: answer as it was.
            # An intent stored by record() has no count: 0.
            seq = blob(parts[2], "an intent's write count")
            return Opened(recorded=True, write_count=count(seq, "open_intent") if seq else 0), True
        return Opened(recorded=False, write_count=write_count, blocking=[held]), True
    raise unexpected("open_intent", reply)


def decisions(
    reply: object, *, session_id: str | None, intent_id: str | None, limit: int
) -> list[Decision]:
    """What ``decisions.lua`` answered: (number, record) pairs, newest first, checked
    against the list each was found in."""

    def checked(found: object) -> Decision | None:
        seq, record = pair(found)
        decision = decoded(f"decision {seq}", f"decision {seq}", Decision.decode, record)
        # The list a number was found in is the row: a decision filed under another intent
        # or session than its record names must not pass as theirs.
        if intent_id is not None and decision.intent_id != intent_id:
            raise RecordTampered(
                f"decision {seq} is filed under intent {intent_id} but names "
                f"intent {decision.intent_id}"
            )
        if session_id is not None and decision.session_id != session_id:
            if intent_id is not None:
                return None
            raise RecordTampered(
                f"decision {seq} is filed under session {session_id!r} but names "
                f"session {decision.session_id!r}"
            )
        return decision

    found = each(
        as_list(reply, "decisions"),
        checked,
        lambda row: ("decision", intent_id or "?", session_id),
    )
    return [decision for decision in found if decision is not None][:limit]


def newest_decisions(reply: object) -> dict[str, Decision]:
    """What ``newest_decisions.lua`` answered: (intent id, number, record) triples, each record
    checked against the intent it was filed under."""

    def checked(found: object) -> Decision:
        fields = as_list(found, "newest_decisions")
        if len(fields) != 3:
            raise unexpected("newest_decisions", found)
        intent_id = text(fields[0], "an intent id")
        seq = text(fields[1], "a decision's number")
        record = blob(fields[2], "a decision's record")
        decision = decoded(f"decision {seq}", f"decision {seq}", Decision.decode, record)
        if decision.intent_id != intent_id:
            raise RecordTampered(
                f"decision {seq} is filed under intent {intent_id} but names "
                f"intent {decision.intent_id}"
            )
        return decision

    found = each(
        as_list(reply, "newest_decisions"),
        checked,
        lambda row: ("decision", "?", None),
    )
    return {decision.intent_id: decision for decision in found}


def effect_rows(reply: object, operation: str) -> list[EffectRow]:
    """Rows of ``effect_row`` (``prelude.lua``): key, state, owner, record, age."""
    return [effect_row(row, operation) for row in as_list(reply, operation)]


def effect_row(value: object, operation: str) -> EffectRow:
    fields = as_list(value, operation)
    if len(fields) != 5:
        raise unexpected(operation, value)
    key, state, owner, age = (
        text(field, f"an effect's {name}")
        for field, name in zip(
            (*fields[:3], fields[4]), ("key", "state", "owner", "age"), strict=True
        )
    )
    return key, state, owner, blob(fields[3], "an effect's record"), age


def effect(session_id: str, row: EffectRow, keyring: Keyring | None = None) -> Effect:
    """An effect's row, checked against the record it holds (``rows.checked_effect``), with
    its age by the server's clock."""
    key, state, owner, record, age = row
    return checked_effect(key, session_id, state, owner, record, keyring, age=age)
