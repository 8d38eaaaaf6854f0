"""Records: round trips, refusal of edited, foreign or malformed records, and the denial error."""

from __future__ import annotations

import copy

import orjson
import pytest
from agents.exceptions import AgentsException, UserError
from blake3 import blake3

from agents_reconcile.errors import (
    BindingMismatch,
    ContinuationDenied,
    ReconcileError,
    RecordError,
    RecordMalformed,
    RecordTampered,
    UnsupportedRecordVersion,
)
from agents_reconcile.fingerprint import FINGERPRINT_SCHEME, digest_items
from agents_reconcile.records import (
    RECORD_VERSION,
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
)

BACKEND = BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/data/chat.db")


def make_pending(**overrides) -> PendingWrite:
    """A well-formed PendingWrite whose digests match its batch; fields may be overridden."""
    batch = overrides.pop(
        "batch",
        (
            {"role": "user", "content": "charge my card", "type": "message"},
            {"type": "function_call", "name": "charge", "arguments": "{}", "call_id": "c1"},
        ),
    )
    ignore_ids = overrides.get("ignore_ids", False)
    fields = {
        "intent_id": "0f3c9a",
        "session_id": "user-42",
        "backend": BACKEND,
        "batch": tuple(batch),
        "batch_digests": digest_items(batch, ignore_ids=ignore_ids),
        "before_digests": digest_items([{"role": "user", "content": "hi"}]),
        "before_is_whole": True,
        "created_at": 1_700_000_000.25,
        "persisted_count": 1,
    }
    fields.update(overrides)
    return PendingWrite(**fields)


def make_decision(**overrides) -> Decision:
    """A well-formed Decision with list-valued evidence; fields may be overridden."""
    fields = {
        "intent_id": "0f3c9a",
        "session_id": "user-42",
        "backend": BACKEND,
        "outcome": Outcome.AMBIGUOUS,
        "reason": Reason.HISTORY_CHANGED,
        "action": Action.DENIED,
        "decided_at": 1_700_000_100.5,
        "evidence": {"before": ["a" * 64], "batch": ["b" * 64], "count": 3},
    }
    fields.update(overrides)
    return Decision(**fields)


def redigest(mapping: dict) -> dict:
    """Recompute a mapping's digest the way records are sealed: blake3 of sorted-key JSON over
    every field but the batch (which batch_digests cover)."""
    body = {key: value for key, value in mapping.items() if key != "digest"}
    sealed = {key: value for key, value in body.items() if key != "batch"}
    digest = blake3(orjson.dumps(sealed, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return {**body, "digest": digest}


# -- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"before_is_whole": False, "persisted_count": None},
        {"before_digests": (), "persisted_count": 0},
        {"ignore_ids": True, "batch": ({"id": "m1", "role": "user", "content": "x"},)},
        {"backend": BackendIdentity("tests.CustomSession")},
    ],
    ids=["whole", "partial-before", "empty-history", "ignore-ids", "no-namespace"],
)
def test_pending_write_round_trips(overrides):
    """A PendingWrite decoded from its bytes, str or mapping equals the original."""
    record = make_pending(**overrides)
    assert PendingWrite.decode(record.encode()) == record
    assert PendingWrite.decode(record.encode().decode()) == record
    assert PendingWrite.decode(record.to_mapping()) == record


def test_pending_write_defaults_bind_the_current_scheme_and_version():
    """A new record carries this release's fingerprint scheme and format version."""
    mapping = make_pending().to_mapping()
    assert mapping["scheme"] == FINGERPRINT_SCHEME
    assert mapping["v"] == RECORD_VERSION
    assert mapping["type"] == "pending_write"


def test_redigest_reproduces_the_record_digest():
    """The test helper seals a record exactly as the package does (so re-sealed edits are real)."""
    mapping = make_pending().to_mapping()
    assert redigest(mapping) == mapping
    decision_mapping = make_decision().to_mapping()
    assert redigest(decision_mapping) == decision_mapping


@pytest.mark.parametrize("outcome", list(Outcome))
@pytest.mark.parametrize("action", list(Action))
def test_decision_round_trips(outcome, action):
    """A Decision with any outcome and action decodes from its bytes and mapping unchanged."""
    decision = make_decision(outcome=outcome, action=action)
    assert Decision.decode(decision.encode()) == decision
    assert Decision.decode(decision.to_mapping()) == decision


@pytest.mark.parametrize("reason", list(Reason))
def test_decision_round_trips_every_reason(reason):
    """Every reason survives encoding."""
    decision = make_decision(reason=reason, evidence={})
    assert Decision.decode(decision.encode()) == decision


def test_same_content_tells_copies_apart():
    """Two copies of one write are the same content; a changed field makes them differ."""
    record = make_pending()
    assert record.same_content(PendingWrite.decode(record.encode()))
    assert not record.same_content(make_pending(created_at=1.0))
    assert not record.same_content(make_pending(before_is_whole=False))


# -- tampering ----------------------------------------------------------------------------


def tamper_batch(mapping: dict) -> None:
    mapping["batch"][0]["content"] = "charge my card twice"


def tamper_batch_digest(mapping: dict) -> None:
    mapping["batch_digests"][0] = "0" * 64


def tamper_before_digest(mapping: dict) -> None:
    mapping["before_digests"][0] = "0" * 64


def tamper_session(mapping: dict) -> None:
    mapping["session_id"] = "user-43"


def tamper_whole(mapping: dict) -> None:
    mapping["before_is_whole"] = False


def tamper_backend(mapping: dict) -> None:
    mapping["backend"] = "agents.memory.sqlite_session.SQLiteSession|/data/other.db"


def tamper_count(mapping: dict) -> None:
    mapping["persisted_count"] = 2


TAMPERINGS = [
    tamper_batch,
    tamper_batch_digest,
    tamper_before_digest,
    tamper_session,
    tamper_whole,
    tamper_backend,
    tamper_count,
]


@pytest.mark.parametrize("edit", TAMPERINGS, ids=lambda f: f.__name__)
def test_edited_pending_write_is_tampered(edit):
    """Editing any field of a sealed PendingWrite without resealing raises RecordTampered."""
    mapping = copy.deepcopy(make_pending().to_mapping())
    edit(mapping)
    with pytest.raises(RecordTampered):
        PendingWrite.decode(mapping)
    with pytest.raises(RecordTampered):
        PendingWrite.decode(orjson.dumps(mapping))


def test_edited_encoded_bytes_are_tampered():
    """A byte-level edit of the encoded record is refused."""
    data = make_pending().encode()
    assert b"user-42" in data
    with pytest.raises(RecordTampered):
        PendingWrite.decode(data.replace(b"user-42", b"user-99"))


def test_forged_digest_is_tampered():
    """A record whose digest field was replaced is refused."""
    mapping = make_pending().to_mapping()
    mapping["digest"] = "f" * 64
    with pytest.raises(RecordTampered):
        PendingWrite.decode(mapping)


def test_missing_digest_is_refused():
    """A record without a digest is not trusted."""
    mapping = make_pending().to_mapping()
    del mapping["digest"]
    with pytest.raises(RecordError):
        PendingWrite.decode(mapping)


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["evidence"].update(count=4),
        lambda m: m.update(outcome="committed"),
        lambda m: m.update(action="settled"),
        lambda m: m.update(intent_id="other"),
    ],
    ids=["evidence", "outcome", "action", "intent_id"],
)
def test_edited_decision_is_tampered(edit):
    """Editing a sealed Decision without resealing raises RecordTampered."""
    mapping = copy.deepcopy(make_decision().to_mapping())
    edit(mapping)
    with pytest.raises(RecordTampered):
        Decision.decode(mapping)


def test_resealed_batch_that_misses_its_digests_is_tampered():
    """A batch edited and resealed, but with stale batch digests, raises RecordTampered."""
    mapping = copy.deepcopy(make_pending().to_mapping())
    tamper_batch(mapping)
    with pytest.raises(RecordTampered, match="batch"):
        PendingWrite.decode(redigest(mapping))


def test_resealed_batch_digests_that_miss_the_batch_are_tampered():
    """Batch digests edited and resealed, with the batch unchanged, raise RecordTampered."""
    mapping = copy.deepcopy(make_pending().to_mapping())
    tamper_batch_digest(mapping)
    with pytest.raises(RecordTampered):
        PendingWrite.decode(redigest(mapping))


def test_resealed_ignore_ids_flip_is_tampered():
    """Flipping ``ignore_ids`` changes how the batch digests, so the digests no longer match."""
    record = make_pending(ignore_ids=True, batch=({"id": "m1", "role": "user", "content": "x"},))
    mapping = record.to_mapping()
    mapping["ignore_ids"] = False
    with pytest.raises(RecordTampered):
        PendingWrite.decode(redigest(mapping))


def test_resealed_consistent_edit_is_accepted():
    """A batch edited together with its digests and resealed is a valid (different) record."""
    mapping = copy.deepcopy(make_pending().to_mapping())
    tamper_batch(mapping)
    mapping["batch_digests"] = list(digest_items(mapping["batch"]))
    decoded = PendingWrite.decode(redigest(mapping))
    assert decoded.batch[0]["content"] == "charge my card twice"
    assert decoded != make_pending()


# -- versions and schemes -----------------------------------------------------------------


@pytest.mark.parametrize("version", [RECORD_VERSION + 1, 99, 0])
@pytest.mark.parametrize("reseal", [False, True])
def test_other_record_version_is_unsupported(version, reseal):
    """A record of another format version is refused as unsupported, sealed or not."""
    mapping = make_pending().to_mapping()
    mapping["v"] = version
    if reseal:
        mapping = redigest(mapping)
    with pytest.raises(UnsupportedRecordVersion):
        PendingWrite.decode(mapping)


def test_future_decision_version_is_unsupported():
    """A Decision from a newer format version is refused as unsupported."""
    mapping = redigest({**make_decision().to_mapping(), "v": RECORD_VERSION + 1})
    with pytest.raises(UnsupportedRecordVersion):
        Decision.decode(mapping)


def test_pending_write_built_with_a_future_version_is_unsupported():
    """A record written by a newer release (its own ``version``) does not decode here."""
    record = make_pending(version=RECORD_VERSION + 1)
    with pytest.raises(UnsupportedRecordVersion):
        PendingWrite.decode(record.encode())


@pytest.mark.parametrize("scheme", ["blake3-orjson-sorted/2", "sha256-json/1", ""])
def test_other_fingerprint_scheme_is_unsupported(scheme):
    """A correctly sealed record made under another fingerprint scheme is never compared."""
    mapping = make_pending().to_mapping()
    mapping["scheme"] = scheme
    with pytest.raises(UnsupportedRecordVersion, match="scheme"):
        PendingWrite.decode(redigest(mapping))


def test_other_scheme_is_refused_even_via_the_constructor():
    """A record built with another scheme encodes, but does not decode."""
    record = make_pending(scheme="other-scheme/1")
    with pytest.raises(UnsupportedRecordVersion):
        PendingWrite.decode(record.encode())


# -- malformed input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"not json", b"", b'{"v": 1, "type": "pending_write"', "{'v': 1}", b"\xff\xfe"],
    ids=["text", "empty", "truncated", "python-repr", "binary"],
)
def test_non_json_is_malformed(data):
    """Bytes that are not JSON raise RecordMalformed."""
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(data)
    with pytest.raises(RecordMalformed):
        Decision.decode(data)


@pytest.mark.parametrize("data", [b"[1, 2]", b'"pending_write"', b"42", b"null", b"true"])
def test_non_object_json_is_malformed(data):
    """JSON that is not an object raises RecordMalformed."""
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(data)


@pytest.mark.parametrize("version", [None, "1", 1.0, True])
def test_missing_or_mistyped_version_is_malformed(version):
    """A record without an integer ``v`` is not a record."""
    mapping = make_pending().to_mapping()
    if version is None:
        del mapping["v"]
    else:
        mapping["v"] = version
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


@pytest.mark.parametrize("record_type", ["decision", "pending", None, 7])
def test_wrong_type_is_malformed(record_type):
    """A sealed record of another (or no) ``type`` is refused as malformed."""
    mapping = make_pending().to_mapping()
    mapping["type"] = record_type
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


def test_records_are_not_interchangeable():
    """A Decision does not decode as a PendingWrite, nor the other way round."""
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(make_decision().encode())
    with pytest.raises(RecordMalformed):
        Decision.decode(make_pending().encode())


PENDING_FIELDS = [
    "intent_id",
    "session_id",
    "backend",
    "scheme",
    "batch",
    "batch_digests",
    "before_digests",
    "before_is_whole",
    "created_at",
]


@pytest.mark.parametrize("field", PENDING_FIELDS)
def test_pending_write_missing_field_is_malformed(field):
    """A sealed PendingWrite without a required field raises RecordMalformed."""
    mapping = make_pending().to_mapping()
    del mapping[field]
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


DECISION_FIELDS = [
    "intent_id",
    "session_id",
    "backend",
    "outcome",
    "reason",
    "action",
    "decided_at",
    "evidence",
]


@pytest.mark.parametrize("field", DECISION_FIELDS)
def test_decision_missing_field_is_malformed(field):
    """A sealed Decision without a required field raises RecordMalformed."""
    mapping = make_decision().to_mapping()
    del mapping[field]
    with pytest.raises(RecordMalformed):
        Decision.decode(redigest(mapping))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("intent_id", 7),
        ("session_id", None),
        ("backend", ""),
        ("backend", ["kind"]),
        ("batch", "not a list"),
        ("batch_digests", {"a": 1}),
        ("before_digests", None),
        ("created_at", "yesterday"),
        ("created_at", None),
        ("scheme", 1),
    ],
)
def test_pending_write_mistyped_field_is_malformed(field, value):
    """A sealed PendingWrite with a field of the wrong type raises RecordMalformed."""
    mapping = make_pending().to_mapping()
    mapping[field] = value
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("outcome", "maybe"),
        ("reason", "because"),
        ("action", "shrugged"),
        ("decided_at", "noon"),
        ("evidence", 5),
        ("backend", ""),
    ],
)
def test_decision_mistyped_field_is_malformed(field, value):
    """A sealed Decision with an unknown enum value or a mistyped field raises RecordMalformed."""
    mapping = make_decision().to_mapping()
    mapping[field] = value
    with pytest.raises(RecordMalformed):
        Decision.decode(redigest(mapping))


def test_pending_write_non_bool_before_is_whole_is_malformed():
    """A sealed record whose ``before_is_whole`` is not a boolean is refused, not coerced."""
    mapping = make_pending(before_is_whole=False, persisted_count=None).to_mapping()
    mapping["before_is_whole"] = "false"
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


def test_pending_write_non_int_persisted_count_is_malformed():
    """A sealed record whose ``persisted_count`` is not an integer (or null) is refused."""
    mapping = make_pending().to_mapping()
    mapping["persisted_count"] = "1"
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


def test_record_errors_share_one_base():
    """Every refusal is a RecordError and a ReconcileError, so callers can catch one type."""
    for error in (RecordTampered, UnsupportedRecordVersion, RecordMalformed):
        assert issubclass(error, RecordError)
        assert issubclass(error, ReconcileError)


# -- backend identity ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "identity",
    [
        BackendIdentity("agents.memory.sqlite_session.SQLiteSession", "/data/chat.db"),
        BackendIdentity("myapp.sessions.CustomSession"),
        BackendIdentity(
            "agents.extensions.memory.redis_session.RedisSession", "redis://h:6379/0|k"
        ),
    ],
    ids=["with-namespace", "kind-only", "namespace-with-separator"],
)
def test_backend_identity_round_trips_through_str(identity):
    """``BackendIdentity.parse(str(identity))`` gives back the same identity."""
    assert BackendIdentity.parse(str(identity)) == identity


def test_backend_identity_str_shows_kind_and_namespace():
    """The string form is ``kind|namespace``, or the kind alone without a namespace."""
    assert str(BackendIdentity("k.Store", "ns")) == "k.Store|ns"
    assert str(BackendIdentity("k.Store")) == "k.Store"
    assert BackendIdentity("k.Store") != BackendIdentity("k.Store", "ns")


@pytest.mark.parametrize("text", ["", "|namespace"])
def test_backend_identity_without_kind_is_malformed(text):
    """An identity string with no kind raises RecordMalformed."""
    with pytest.raises(RecordMalformed):
        BackendIdentity.parse(text)


# -- Decision.settled ---------------------------------------------------------------------

SETTLED_BY_ACTION = {
    Action.SETTLED: True,
    Action.REPLAYED: True,
    Action.DROPPED: True,
    Action.DENIED: False,
    Action.LEFT_PENDING: False,
}


def test_settled_table_covers_every_action():
    """The table below names every Action, so a new one cannot slip through untested."""
    assert set(SETTLED_BY_ACTION) == set(Action)


@pytest.mark.parametrize(("action", "settled"), list(SETTLED_BY_ACTION.items()))
def test_decision_settled_per_action(action, settled):
    """A decision closes its intent exactly when it settled, replayed or dropped it."""
    assert make_decision(action=action).settled is settled


# -- ContinuationDenied -------------------------------------------------------------------


def test_continuation_denied_is_the_sdk_user_error():
    """ContinuationDenied is a UserError and an AgentsException, so SDK handlers catch it."""
    denied = ContinuationDenied(make_decision())
    assert isinstance(denied, UserError)
    assert isinstance(denied, AgentsException)
    assert isinstance(denied, ReconcileError)
    with pytest.raises(UserError):
        raise denied


def test_continuation_denied_carries_the_decision():
    """The error exposes the decision, its intent id and its session id."""
    decision = make_decision(intent_id="intent-7", session_id="sess-9")
    denied = ContinuationDenied(decision)
    assert denied.decision is decision
    assert denied.intent_id == "intent-7"
    assert denied.session_id == "sess-9"


@pytest.mark.parametrize(
    "reason", [Reason.HISTORY_CHANGED, Reason.PARTIAL_COMMIT, Reason.OPERATOR_REQUIRED]
)
def test_continuation_denied_message_names_the_reason(reason):
    """The message names the reason, the outcome, the intent and the session."""
    decision = make_decision(reason=reason, intent_id="intent-7", session_id="sess-9")
    message = str(ContinuationDenied(decision))
    assert reason.value in message
    assert decision.outcome.value in message
    assert "intent-7" in message
    assert "sess-9" in message
    assert reason.explanation in message


def test_binding_mismatch_is_a_continuation_denied():
    """BindingMismatch subclasses ContinuationDenied and so is a UserError too."""
    assert issubclass(BindingMismatch, ContinuationDenied)
    decision = make_decision(reason=Reason.BACKEND_MISMATCH)
    mismatch = BindingMismatch(decision)
    assert isinstance(mismatch, ContinuationDenied)
    assert isinstance(mismatch, UserError)
    assert mismatch.decision is decision
    assert "backend_mismatch" in str(mismatch)
    with pytest.raises(ContinuationDenied):
        raise mismatch


def test_every_reason_has_an_explanation():
    """Every reason carries a non-empty sentence for people."""
    for reason in Reason:
        assert reason.explanation.strip()
