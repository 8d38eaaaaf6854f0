"""The records agents-reconcile keeps: pending writes, decisions, backend identities, and what
a journal answers about them (``IntentState``, ``JournalEntry``, ``Opened``).

Records are frozen dataclasses with a versioned encoding. Every encoded record carries a
blake3 digest over its other fields, so a record that was edited, truncated or written by a
newer release is refused with a typed error instead of being guessed at.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson
from blake3 import blake3

from ..errors import (
    FingerprintError,
    PayloadKeyUnknown,
    RecordMalformed,
    RecordTampered,
    UnsupportedRecordVersion,
)
from .explanations import EXPLANATIONS, evidence_text
from .fingerprint import (
    FINGERPRINT_SCHEME,
    SCHEMES,
    as_json_texts,
    digest_items,
    nonfinite_floats,
    restore_json_texts,
    restore_nonfinite,
)

if TYPE_CHECKING:
    from .ownership import Owner
    from .sealing import Keyring, PayloadKey
    from .signing import SigningKey

__all__ = [
    "ACTIVE_STATES",
    "RECORD_VERSION",
    "SESSION_WIDE",
    "UNREADABLE",
    "Action",
    "BackendIdentity",
    "Decision",
    "IntentState",
    "JournalEntry",
    "Opened",
    "Outcome",
    "PendingWrite",
    "Reason",
    "evidence_text",
    "new_write_id",
    "require_settling",
]

RECORD_VERSION: Final = 1
"""Format version of encoded records; a record with a higher version is refused."""

SESSION_WIDE: Final = "none"
"""The intent id of a decision about the session as a whole (busy, stale), not one intent."""
UNREADABLE: Final = "unknown"
"""The intent id of a decision about a record that could not be read."""

_SIGNED_RECORD: Final = "pending write record"
"""The domain of a record's MAC (``signing``): a signature of another kind never verifies."""


def new_write_id() -> str:
    """A fresh random id for an intent (and a revisioned store's write): 128 bits as 32 hex
    digits, the form of ``uuid4().hex`` at a quarter of its cost."""
    return os.urandom(16).hex()


class Outcome(enum.Enum):
    """What the authoritative history says about a pending write."""

    COMMITTED = "committed"
    """The batch is in the history: never replay it."""
    UNCHANGED = "unchanged"
    """The history is as it was before the write: the batch is missing and may be replayed."""
    AMBIGUOUS = "ambiguous"
    """Nobody can vouch for the history: stop, and show the evidence."""
    EXTENDED = "extended"
    """(Revisioned stores.) The batch is proven absent and other writers' batches present."""
    PARTIAL = "partial"
    """(Stores that write a batch in requests.) The batch's first requests are in the history,
    whole, and nothing after them: the rest is missing and may be appended once."""


class Reason(enum.Enum):
    """Why a decision came out as it did. ``explanation`` is a sentence for people
    (``explanations``)."""

    BATCH_PRESENT = "batch_present"
    BATCH_ABSENT = "batch_absent"
    INDISTINGUISHABLE = "indistinguishable"
    HISTORY_CHANGED = "history_changed"
    PARTIAL_COMMIT = "partial_commit"
    CHUNKS_LANDED = "chunks_landed"
    WRITE_REFUSED = "write_refused"
    OPERATOR_REQUIRED = "operator_required"
    IN_FLIGHT_ELSEWHERE = "in_flight_elsewhere"
    LEASE_EXPIRED = "lease_expired"
    SESSION_BUSY = "session_busy"
    BACKEND_MISMATCH = "backend_mismatch"
    UNSUPPORTED_RECORD = "unsupported_record"
    RECORD_UNTRUSTED = "record_untrusted"
    COPIES_DISAGREE = "copies_disagree"
    STALE_STATE = "stale_state"
    WRITE_FOUND = "write_found"
    WRITE_ABSENT = "write_absent"
    EXTENDED_BY_OTHERS = "extended_by_others"
    WRITE_RECORD_BROKEN = "write_record_broken"
    STATE_UNSIGNED = "state_unsigned"
    STATE_TOO_LARGE = "state_too_large"
    RUNSTATE_EXPIRED = "runstate_expired"
    RUN_FINISHED = "run_finished"
    OPERATOR_RESOLVED = "operator_resolved"
    ABANDONED = "abandoned"
    HISTORY_REPAIRED = "history_repaired"
    EFFECT_UNKNOWN = "effect_unknown"
    EFFECT_UNVOUCHED = "effect_unvouched"

    @property
    def explanation(self) -> str:
        return EXPLANATIONS[self.value]


class Action(enum.Enum):
    """What the session did after deciding."""

    SETTLED = "settled"
    """Nothing to write: the intent is closed."""
    REPLAYED = "replayed"
    """The missing batch was appended once, then the intent was closed."""
    DENIED = "denied"
    """Continuation refused; the intent stays pending for an operator."""
    LEFT_PENDING = "left_pending"
    """Nothing written, nothing refused permanently: the intent stays pending."""
    RESOLVED = "resolved"
    """An operator resolved an effect whose outcome was unknown (the evidence says how)."""
    REPAIRED = "repaired"
    """An operator's repair of a damaged history was written (the session as a whole)."""
    DROPPED = "dropped"
    """The intent was closed and nothing written: a stale RunState copy of an already settled
    intent was removed, an operator abandoned the intent, or the store refused the write
    outright (what it had not stored of the batch is never sent)."""


@dataclass(frozen=True, slots=True)
class BackendIdentity:
    """Which store an intent was written to: never credentials.

    ``kind`` names the store's type (module and qualified name); ``namespace`` says which
    instance (a resolved database file, a URL without credentials, table names). ``user``:
    the user name the store connects as, where its address names one (a PostgreSQL role, a
    Redis ACL user), so that an operator reopens it as the application does; never a
    password. It is how the store is reached, not which store it is: outside equality and
    ``str()`` (the journals' backend column), and kept in a pending write's record beside
    the identity (``backend_user``).
    """

    kind: str
    namespace: str = ""
    user: str | None = field(default=None, compare=False)
    _text: str | None = field(default=None, init=False, repr=False, compare=False)
    """``str()`` of it, made on first use: a journal writes it with every intent."""

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = f"{self.kind}|{self.namespace}" if self.namespace else self.kind
            object.__setattr__(self, "_text", text)
        return text

    @classmethod
    def parse(cls, text: str) -> BackendIdentity:
        """Inverse of ``str()``."""
        kind, _, namespace = text.partition("|")
        if not kind:
            raise RecordMalformed(f"empty backend identity: {text!r}")
        return cls(kind, namespace)


@dataclass(frozen=True)
class PendingWrite:
    """A write to a session whose outcome is not known yet, with what it needs to be judged.

    ``before_digests`` are the digests of the items that preceded the batch: the whole
    history when ``before_is_whole`` (as much as a wrapper remembers), else the newest
    ``len(batch) + 1``.

    With ``seal_key`` the encoded forms (journals, the RunState copy) hold the batch sealed
    (``sealing``): only ids, counts, times and digests stay readable. The digest is the same
    either way: it is taken over the readable form, and it is what the seal is bound to.
    """

    intent_id: str
    session_id: str
    backend: BackendIdentity
    batch: tuple[Any, ...]
    batch_digests: tuple[str, ...]
    before_digests: tuple[str, ...]
    before_is_whole: bool
    created_at: float
    persisted_count: int | None = None
    ignore_ids: bool = False
    scheme: str = FINGERPRINT_SCHEME
    version: int = RECORD_VERSION
    expected_revision: int | None = None
    """(Revisioned stores.) The head revision the write was made against; the intent id is
    the write id stamped with the items. None for writes judged by fingerprints."""
    chunk: int | None = None
    """(Stores that write a batch in requests, each all or nothing.) The most items one request
    holds: the batch is written as requests of this many from its first item, so a write that
    stopped part-way left whole requests of it. None: the batch is written all or nothing."""
    seal_key: PayloadKey | None = field(default=None, compare=False, repr=False)
    """The key the encoded forms seal the batch with (None: the batch is stored readable)."""
    sign_key: SigningKey | None = field(default=None, compare=False, repr=False)
    """The key the encoded forms are signed with (a ``mac`` over the digest; None: unsigned)."""

    @classmethod
    def fresh(
        cls,
        *,
        intent_id: str,
        session_id: str,
        backend: BackendIdentity,
        batch: tuple[Any, ...],
        batch_digests: tuple[str, ...],
        before_digests: tuple[str, ...],
        before_is_whole: bool,
        created_at: float,
        persisted_count: int | None = None,
        ignore_ids: bool = False,
        scheme: str = FINGERPRINT_SCHEME,
        version: int = RECORD_VERSION,
        expected_revision: int | None = None,
        chunk: int | None = None,
        seal_key: PayloadKey | None = None,
        sign_key: SigningKey | None = None,
    ) -> PendingWrite:
        """The record ``PendingWrite(...)`` makes from the same fields, made at a third of the
        cost (one per append): a frozen dataclass's ``__init__`` sets its sixteen fields one
        ``object.__setattr__`` call at a time, while here they go into the record at once."""
        record = object.__new__(cls)
        record.__dict__.update(
            intent_id=intent_id,
            session_id=session_id,
            backend=backend,
            batch=batch,
            batch_digests=batch_digests,
            before_digests=before_digests,
            before_is_whole=before_is_whole,
            created_at=created_at,
            persisted_count=persisted_count,
            ignore_ids=ignore_ids,
            scheme=scheme,
            version=version,
            expected_revision=expected_revision,
            chunk=chunk,
            seal_key=seal_key,
            sign_key=sign_key,
        )
        return record

    def to_mapping(self) -> dict[str, Any]:
        """JSON-shaped form with its digest, as stored in journals and RunState contexts."""
        data, batch, nonfinite, texts = self._batch_json()
        # JSON has no NaN: such a batch goes as decoded from orjson's bytes (null in those
        # places), and ``nonfinite`` says what stood there.
        return self._body(orjson.loads(data) if nonfinite else batch, nonfinite, texts)

    def encode(self) -> bytes:
        """``to_mapping()`` as orjson bytes, the form journals store."""
        data, _, nonfinite, texts = self._batch_json()
        # The batch is serialised once: the bytes made to look for non-finite floats go into
        # the record as they are.
        return orjson.dumps(self._body(orjson.Fragment(data), nonfinite, texts))

    def _batch_json(self) -> tuple[bytes, list[Any], list[list[Any]], list[int]]:
        batch = list(self.batch)
        texts: list[int] = []
        try:
            data = orjson.dumps(batch)
        except TypeError:
            # orjson cannot write a lone surrogate: an item holding one goes as its JSON
            # text (the stdlib's, all ASCII), and ``json_text`` says which.
            texts = as_json_texts(batch)
            data = orjson.dumps(batch)
        found = nonfinite_floats(batch, data, parts=len(batch))
        return data, batch, [[path[0], list(path[1:]), kind] for path, kind in found], texts

    def _body(self, batch: Any, nonfinite: list[list[Any]], texts: list[int]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "v": self.version,
            "type": "pending_write",
            "intent_id": self.intent_id,
            "session_id": self.session_id,
            "backend": str(self.backend),
            "scheme": self.scheme,
            "batch": batch,
            "batch_digests": list(self.batch_digests),
            "before_digests": list(self.before_digests),
            "before_is_whole": self.before_is_whole,
            "persisted_count": self.persisted_count,
            "ignore_ids": self.ignore_ids,
            "created_at": self.created_at,
        }
        if self.backend.user is not None:
            # How the store is reached (never a password): present only when the store's
            # address names a user, so a record without one reads as before.
            body["backend_user"] = self.backend.user
        if self.expected_revision is not None:
            body["expected_revision"] = self.expected_revision
        if self.chunk is not None:
            body["chunk"] = self.chunk
        # Present only when needed: a record without NaN, infinities or lone surrogates
        # holds neither field.
        if nonfinite:
            body["nonfinite"] = nonfinite
        if texts:
            body["json_text"] = texts
        # ``_body_digest(body)``: of what it leaves out, the body holds only the batch yet, so
        # a copy without it is the same payload, made without a look at every key.
        payload = body.copy()
        del payload["batch"]
        body["digest"] = _digest_of(payload)
        if self.seal_key is not None:
            body = self._with_sealed_batch(body)
        if self.sign_key is not None:
            body["mac"] = self.sign_key.signature(_SIGNED_RECORD, body["digest"].encode())
        return body

    def _with_sealed_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        # Sealed once per record: every encoding of it (the journal's, the RunState's) is
        # then the same bytes, and a record is sealed only when first encoded.
        sealed = self.__dict__.get("_seal_cache")
        if sealed is None:
            assert self.seal_key is not None
            hidden = {key: body[key] for key in _SEALED_FIELDS if key in body}
            sealed = self.seal_key.seal(orjson.dumps(hidden), body["digest"].encode())
            object.__setattr__(self, "_seal_cache", sealed)
        readable = {key: value for key, value in body.items() if key not in _SEALED_FIELDS}
        readable["sealed"] = sealed
        readable["digest"] = readable.pop("digest")
        return readable

    @property
    def sealed_under(self) -> str | None:
        """The id of the key the encoded forms seal the batch with, or None."""
        return self.seal_key.key_id if self.seal_key is not None else None

    @classmethod
    def decode(
        cls, data: bytes | str | Mapping[str, Any], keyring: Keyring | None = None
    ) -> PendingWrite:
        """Rebuild a record, refusing damaged, edited or future-version input. A sealed
        batch opens only with a key of ``keyring``."""
        body = _checked_body(data, "pending_write")
        signer = keyring.signer if keyring is not None else None
        if signer is not None:
            # Before the seal is opened or anything else is read: a journal row or a copy
            # this deployment did not sign is not used at all.
            signer.verify(
                _SIGNED_RECORD,
                str(body.get("digest")).encode("utf-8", "surrogatepass"),
                body.get("mac"),
                what=f"intent {str(body.get('intent_id'))[:64]!r}",
            )
        key: PayloadKey | None = None
        body_sealed = body.get("sealed")
        if body_sealed is not None:
            body, key = _opened(body, keyring)
        try:
            batch = tuple(_list(body, "batch"))
            # NaN first: its places are never inside a text, which stays a str until then.
            if "nonfinite" in body:
                batch = restore_nonfinite(batch, body["nonfinite"])
            if "json_text" in body:
                batch = restore_json_texts(batch, body["json_text"])
            record = cls(
                intent_id=_str(body, "intent_id"),
                session_id=_str(body, "session_id"),
                backend=_backend(body),
                batch=batch,
                batch_digests=tuple(_list(body, "batch_digests")),
                before_digests=tuple(_list(body, "before_digests")),
                before_is_whole=_bool(body, "before_is_whole"),
                created_at=float(body["created_at"]),
                persisted_count=_optional_int(body, "persisted_count"),
                ignore_ids=_bool(body, "ignore_ids"),
                scheme=_str(body, "scheme"),
                version=int(body["v"]),
                expected_revision=_optional_int(body, "expected_revision"),
                chunk=_optional_int(body, "chunk"),
                seal_key=key,
                sign_key=signer.current if signer is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordMalformed(f"pending write record is missing or mistypes {exc}") from exc
        if isinstance(body_sealed, Mapping) and key is not None:
            # Encoded again, the record is the very bytes it was read from.
            object.__setattr__(record, "_seal_cache", dict(body_sealed))
        if record.scheme not in SCHEMES:
            raise UnsupportedRecordVersion(
                f"intent {record.intent_id} uses fingerprint scheme {record.scheme!r}; "
                f"this release reads only {' and '.join(map(repr, SCHEMES))}"
            )
        if record.chunk is not None and record.chunk < 1:
            raise RecordMalformed(f"intent {record.intent_id}: chunk {record.chunk} is not >= 1")
        try:
            digests = digest_items(record.batch, ignore_ids=record.ignore_ids, scheme=record.scheme)
        except FingerprintError as exc:
            # No record is written with a batch its scheme cannot digest: this one was edited.
            raise RecordTampered(
                f"intent {record.intent_id}: the batch cannot be digested under its scheme "
                f"{record.scheme!r}: {exc}"
            ) from exc
        if digests != record.batch_digests:
            raise RecordTampered(f"intent {record.intent_id}: the batch does not match its digests")
        return record

    def same_content(self, other: PendingWrite) -> bool:
        """Whether two copies describe the same write (timestamps included)."""
        return bool(self.to_mapping()["digest"] == other.to_mapping()["digest"])


@dataclass(frozen=True)
class Decision:
    """What reconciliation concluded about one intent, and what it did. Payload-free."""

    intent_id: str
    session_id: str
    backend: BackendIdentity
    outcome: Outcome
    reason: Reason
    action: Action
    decided_at: float
    evidence: Mapping[str, Any] = field(default_factory=dict)
    repeats: int = 1
    """How often this decision was reached: a denial met again with nothing new is counted
    here, in the stored decision, not stored again. Outside the record's digest."""
    last_seen: float | None = None
    """When it was last reached (None: only once, at ``decided_at``)."""

    @property
    def settled(self) -> bool:
        """Whether this decision closed the intent."""
        return self.action in (Action.SETTLED, Action.REPLAYED, Action.DROPPED)

    @property
    def names_intent(self) -> bool:
        """Whether the decision is about one intent (not the session as a whole, nor a
        record that could not be read)."""
        return self.intent_id not in (SESSION_WIDE, UNREADABLE)

    def evidence_text(self) -> str:
        """The evidence on one line, digests shortened for people."""
        return evidence_text(self.evidence)

    def to_mapping(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "v": RECORD_VERSION,
            "type": "decision",
            "intent_id": self.intent_id,
            "session_id": self.session_id,
            "backend": str(self.backend),
            "outcome": self.outcome.value,
            "reason": self.reason.value,
            "action": self.action.value,
            "decided_at": self.decided_at,
            "evidence": dict(self.evidence),
        }
        body["digest"] = _body_digest(body)
        if self.repeats > 1:
            # Counted after the decision was stored, so outside what its digest covers.
            body["repeats"] = self.repeats
            body["last_seen"] = self.last_seen
        return body

    def encode(self) -> bytes:
        return orjson.dumps(self.to_mapping())

    @classmethod
    def decode(cls, data: bytes | str | Mapping[str, Any]) -> Decision:
        body = _checked_body(data, "decision")
        try:
            return cls(
                intent_id=_str(body, "intent_id"),
                session_id=_str(body, "session_id"),
                backend=BackendIdentity.parse(_str(body, "backend")),
                outcome=Outcome(body["outcome"]),
                reason=Reason(body["reason"]),
                action=Action(body["action"]),
                decided_at=float(body["decided_at"]),
                evidence=dict(body["evidence"]),
                repeats=_repeats(body),
                last_seen=None if body.get("last_seen") is None else float(body["last_seen"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordMalformed(f"decision record is missing or mistypes {exc}") from exc


def _backend(body: Mapping[str, Any]) -> BackendIdentity:
    """A pending write's backend identity, with the user its store is reached as when the
    record names one."""
    found = BackendIdentity.parse(_str(body, "backend"))
    if "backend_user" not in body:
        return found
    return dataclasses.replace(found, user=_str(body, "backend_user"))


def _repeats(body: Mapping[str, Any]) -> int:
    count = body.get("repeats", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"repeats {count!r}")
    return count


_SEALED_FIELDS: Final = ("batch", "nonfinite", "json_text")
"""What a sealed record holds only inside its seal: the items, and where they needed help."""


def _opened(body: Mapping[str, Any], keyring: Keyring | None) -> tuple[dict[str, Any], PayloadKey]:
    """A sealed pending write's body as if it had never been sealed, checked, and its key."""
    what = f"intent {body.get('intent_id')!r}"
    sealed = body["sealed"]
    if any(name in body for name in _SEALED_FIELDS):
        raise RecordMalformed(f"{what}: a sealed record also holds its batch readable")
    digest = body.get("digest")
    if not isinstance(digest, str):
        raise RecordMalformed(f"{what}: the sealed record has no digest")
    if keyring is None:
        kid = sealed.get("kid") if isinstance(sealed, Mapping) else None
        raise PayloadKeyUnknown(
            f"{what}: the batch is sealed (key {kid}) and no key was given to open it",
            key_id=str(kid),
        )
    plaintext, key = keyring.open(sealed, digest.encode(), what=what)
    try:
        hidden = orjson.loads(plaintext)
    except orjson.JSONDecodeError as exc:
        raise RecordTampered(f"{what}: the sealed payload is not JSON") from exc
    if not isinstance(hidden, dict) or set(hidden) - set(_SEALED_FIELDS) or "batch" not in hidden:
        raise RecordTampered(f"{what}: the sealed payload is not a batch")
    plain = {name: value for name, value in body.items() if name != "sealed"}
    plain.update(hidden)
    if _body_digest(plain) != digest:
        raise RecordTampered(f"{what}: content does not match its digest")
    return plain, key


# The digest itself, the batch (covered by batch_digests) and an effect's output (covered by
# its output_digest), a signature over the digest, and a decision's repeat count (kept up to
# date after the decision was stored).
_UNDIGESTED: Final = frozenset({"digest", "batch", "mac", "repeats", "last_seen", "output"})


def _body_digest(body: Mapping[str, Any]) -> str:
    # The batch itself is covered through batch_digests, which decode() checks against it:
    # digesting it again here would serialise every item twice more per record.
    payload = {key: value for key, value in body.items() if key not in _UNDIGESTED}
    return _digest_of(payload)


def _digest_of(payload: Mapping[str, Any]) -> str:
    # ``digest().hex()``: the same text as ``hexdigest()``, made for less.
    return blake3(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).digest().hex()


def _checked_body(data: bytes | str | Mapping[str, Any], expected_type: str) -> Mapping[str, Any]:
    if isinstance(data, Mapping):
        body = data
    else:
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise RecordMalformed(f"{expected_type} record is not valid JSON: {exc}") from exc
    if not isinstance(body, Mapping):
        raise RecordMalformed(f"{expected_type} record is {type(body).__name__}, not an object")
    version = body.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordMalformed(f"{expected_type} record has no format version")
    if version != RECORD_VERSION:
        raise UnsupportedRecordVersion(
            f"{expected_type} record has format version {version}; this release reads "
            f"version {RECORD_VERSION} only"
        )
    if body.get("type") != expected_type:
        raise RecordMalformed(f"expected a {expected_type} record, found {body.get('type')!r}")
    # A sealed record's digest is the one it had readable: checked once it is opened.
    opened_later = expected_type == "pending_write" and "sealed" in body
    if not opened_later and body.get("digest") != _body_digest(body):
        raise RecordTampered(
            f"{expected_type} record {body.get('intent_id')!r}: content does not match its digest"
        )
    return body


def _str(body: Mapping[str, Any], key: str) -> str:
    value = body[key]
    if not isinstance(value, str):
        raise TypeError(f"{key!r}")
    return value


def _bool(body: Mapping[str, Any], key: str) -> bool:
    value = body[key]
    if not isinstance(value, bool):
        raise TypeError(f"{key!r}")
    return value


def _optional_int(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"{key!r}")
    return value


def _list(body: Mapping[str, Any], key: str) -> Sequence[Any]:
    value = body[key]
    if not isinstance(value, list):
        raise TypeError(f"{key!r}")
    return value


class IntentState(enum.Enum):
    """Where an unresolved intent stands."""

    IN_FLIGHT = "in_flight"
    """The owner's append has started and not returned."""
    FAILED = "failed"
    """The append raised; the outcome is unknown."""
    CANCELLED = "cancelled"
    """The append was cancelled; the outcome is unknown."""
    RECONCILING = "reconciling"
    """An owner is classifying (and perhaps replaying) it now."""


ACTIVE_STATES: Final = (IntentState.IN_FLIGHT, IntentState.RECONCILING)
"""The states in which an intent is held by its owner (appending, or settling it)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """What a journal's ``open_intent`` did (``IntentJournal.open_intent``).

    ``recorded``: the intent is in the journal (now, or already from an earlier attempt of the
    same call whose reply was lost). ``write_count``: the session's write count just before this
    intent was counted when recorded, else the count as found. ``blocking``: the unresolved
    intents of the session and backend that kept it from being recorded (empty when it was,
    and when it was refused because the count was not the one expected).
    """

    recorded: bool
    write_count: int
    blocking: list[JournalEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """An unresolved intent with its state, its owner, and when either last changed.

    ``fence``: the intent's fencing token, a number only the journal hands out and that only
    grows: taken when the intent is opened (the session's write count before it) and again
    by every claim (``transition`` to reconciling: one more than the last, and never below
    the session's write count then). A holder presents it with every write it makes under
    its claim; a stale one is refused. ``age``: seconds since
    ``updated_at`` by the journal's own clock, read in the same step (the server's time on
    Redis and PostgreSQL, so that writers' clocks never shorten a lease); None when the
    journal cannot say, and the reader's clock is used.
    """

    intent: PendingWrite
    state: IntentState
    owner: Owner
    updated_at: float
    fence: int = 0
    age: float | None = field(default=None, compare=False)

    def held_for(self, now: float) -> float:
        """Seconds since the state or owner last changed (or the lease was renewed)."""
        return self.age if self.age is not None else now - self.updated_at


def require_settling(decision: Decision, *, settling: bool) -> None:
    """``settle()`` takes only decisions that close an intent, ``note()`` only others."""
    if decision.settled != settling:
        verb = "settle" if settling else "note"
        raise ValueError(f"{verb}() cannot take a decision whose action is {decision.action.value}")
