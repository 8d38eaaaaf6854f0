"""Records: round trips, refusal of edited, foreign or malformed records, and the denial error."""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import json
import math

import orjson
import pytest
from agents.exceptions import AgentsException, UserError
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st

from agents_reconcile._core.fingerprint import FINGERPRINT_SCHEME, digest_items, journal_batch
from agents_reconcile._core.records import (
    RECORD_VERSION,
    Action,
    BackendIdentity,
    Decision,
    Outcome,
    PendingWrite,
    Reason,
)
from agents_reconcile.errors import (
    BindingMismatch,
    ContinuationDenied,
    ReconcileError,
    RecordError,
    RecordMalformed,
    RecordTampered,
    UnsupportedRecordVersion,
)

from ..support.strategies import surrogate_text

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


def test_a_fresh_pending_write_is_the_record_its_constructor_makes():
    """``PendingWrite.fresh`` (the append's cheaper way to make one) takes every field and
    makes the very record ``PendingWrite(...)`` makes: equal, with the same attributes and
    the same bytes."""
    record = make_pending(before_is_whole=False, persisted_count=None, chunk=2)
    fields = {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}
    assert set(inspect.signature(PendingWrite.fresh).parameters) == set(fields)
    fresh = PendingWrite.fresh(**fields)
    assert fresh == record
    assert vars(fresh) == vars(record)
    assert fresh.encode() == record.encode()
    assert str(fresh.backend) == str(record.backend)


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


@pytest.mark.parametrize(
    "scheme", ["blake3-orjson-sorted/1", "blake3-orjson-sorted/3", "sha256-json/1", ""]
)
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
    Action.REPAIRED: False,
    Action.RESOLVED: False,
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


# -- non-finite floats in the batch ---------------------------------------------------------

NAN = float("nan")
INF = float("inf")

NONFINITE_BATCH = (
    {"type": "function_call_output", "call_id": "c1", "output": "ok", "score": NAN},
    {"role": "user", "content": [{"type": "input_text", "text": "t", "range": [-INF, INF]}]},
    {"role": "assistant", "content": "no floats here", "status": None},
    INF,
)


def nan_equal(one, two) -> bool:
    """Equality as JSON values: NaN equals NaN, a tuple equals a list, bools and floats keep
    their type."""
    if isinstance(one, float) and isinstance(two, float) and math.isnan(one):
        return math.isnan(two)
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(nan_equal(one[k], two[k]) for k in one)
    if isinstance(one, list | tuple) and isinstance(two, list | tuple):
        return len(one) == len(two) and all(map(nan_equal, one, two))
    if type(one) in (bool, float) or type(two) in (bool, float):
        return type(one) is type(two) and one == two
    return bool(one == two)


def nonfinite_pending(**overrides) -> PendingWrite:
    """A PendingWrite whose batch holds NaN and both infinities, digested by journal_batch."""
    batch, digests = journal_batch(overrides.pop("batch", NONFINITE_BATCH))
    return make_pending(batch=batch, batch_digests=digests, **overrides)


def decoded_ways(record: PendingWrite) -> list[PendingWrite]:
    """The record decoded from its bytes, its text, its mapping, and the mapping after a
    JSON round trip (as a RunState context carries it)."""
    return [
        PendingWrite.decode(record.encode()),
        PendingWrite.decode(record.encode().decode()),
        PendingWrite.decode(record.to_mapping()),
        PendingWrite.decode(json.loads(json.dumps(record.to_mapping(), allow_nan=False))),
    ]


def test_nonfinite_floats_in_the_batch_round_trip():
    """NaN, inf and -inf in a batch come back as themselves, and the digests verify."""
    record = nonfinite_pending()
    for decoded in decoded_ways(record):
        assert math.isnan(decoded.batch[0]["score"])
        assert decoded.batch[1]["content"][0]["range"] == [-INF, INF]
        assert decoded.batch[2] == NONFINITE_BATCH[2]
        assert decoded.batch[3] == INF
        assert nan_equal(decoded.batch, record.batch)
        assert decoded.batch_digests == record.batch_digests
        assert digest_items(decoded.batch) == record.batch_digests
        assert decoded.same_content(record)


def test_a_nonfinite_record_is_json_shaped():
    """The mapping (what a RunState context holds) and the bytes contain no NaN token: the
    batch holds null there and ``nonfinite`` says what stood in each place."""
    record = nonfinite_pending()
    mapping = record.to_mapping()
    json.dumps(mapping, allow_nan=False)
    assert b"NaN" not in record.encode() and b"Infinity" not in record.encode()
    assert orjson.loads(record.encode()) == mapping
    assert mapping["batch"][0]["score"] is None
    assert mapping["batch"][3] is None
    assert mapping["nonfinite"] == [
        [0, ["score"], "nan"],
        [1, ["content", 0, "range", 0], "-inf"],
        [1, ["content", 0, "range", 1], "inf"],
        [3, [], "inf"],
    ]
    assert redigest(mapping) == mapping


def test_decoding_a_mapping_leaves_it_alone():
    """Putting NaN back works on copies: the mapping given to decode() keeps its nulls."""
    mapping = nonfinite_pending().to_mapping()
    before = copy.deepcopy(mapping)
    decoded = PendingWrite.decode(mapping)
    assert mapping == before
    assert math.isnan(decoded.batch[0]["score"])


def test_encoding_leaves_the_callers_items_alone():
    """Encoding a record with NaN does not write null into the caller's batch."""
    record = nonfinite_pending()
    record.encode()
    record.to_mapping()
    assert math.isnan(record.batch[0]["score"])
    assert record.batch[3] == INF


@pytest.mark.parametrize(
    "value",
    [
        {"nested": {"tuple": (1, (2.5, None)), "text": "é"}},
        {"flag": True, "one": 1, "real": 1.0, "neg": -0.0, "big": 2**64 - 1},
        {"mode": enum.StrEnum("Mode", {"FAST": "fast"}).FAST},
        ["list", NAN, [INF]],
    ],
    ids=["tuples", "numbers", "str-enum", "nonfinite-list"],
)
def test_a_journal_batch_reads_back_equal_from_its_record(value):
    """Whatever journal_batch accepts comes back from the record equal as a JSON value."""
    record = nonfinite_pending(batch=[value, {"x": NAN}])
    for decoded in decoded_ways(record):
        assert nan_equal(decoded.batch[0], value)


def test_a_record_without_nonfinite_floats_holds_only_its_fields():
    """Without NaN, infinities or lone surrogates the record holds neither ``nonfinite`` nor
    ``json_text``: its bytes are these fields, field for field."""
    record = make_pending(expected_revision=4)
    mapping = record.to_mapping()
    assert "nonfinite" not in mapping and "json_text" not in mapping
    expected = {
        "v": RECORD_VERSION,
        "type": "pending_write",
        "intent_id": record.intent_id,
        "session_id": record.session_id,
        "backend": str(record.backend),
        "scheme": FINGERPRINT_SCHEME,
        "batch": list(record.batch),
        "batch_digests": list(record.batch_digests),
        "before_digests": list(record.before_digests),
        "before_is_whole": record.before_is_whole,
        "persisted_count": record.persisted_count,
        "ignore_ids": record.ignore_ids,
        "created_at": record.created_at,
        "expected_revision": 4,
    }
    assert record.encode() == orjson.dumps(redigest(expected))


def retag(mapping: dict, edit) -> dict:
    """A deep copy of ``mapping`` with ``edit`` applied to it."""
    edited = copy.deepcopy(mapping)
    edit(edited)
    return edited


NONFINITE_EDITS = {
    "kind": lambda m: m["nonfinite"][0].__setitem__(2, "inf"),
    "place": lambda m: m["nonfinite"].__setitem__(0, [2, ["status"], "nan"]),
    "dropped-entry": lambda m: m["nonfinite"].pop(0),
    "dropped-field": lambda m: m.pop("nonfinite"),
}


@pytest.mark.parametrize("edit", NONFINITE_EDITS.values(), ids=NONFINITE_EDITS.keys())
@pytest.mark.parametrize("reseal", [False, True])
def test_edited_nonfinite_field_is_tampered(edit, reseal):
    """Editing ``nonfinite`` is caught by the record's digest, and once resealed, by the
    batch digests (a NaN put elsewhere, or not at all, digests differently)."""
    mapping = nonfinite_pending().to_mapping()
    assert mapping["batch"][2]["status"] is None
    edited = retag(mapping, edit)
    if reseal:
        edited = redigest(edited)
    with pytest.raises(RecordTampered):
        PendingWrite.decode(edited)


@pytest.mark.parametrize(
    "value",
    [
        "not a list",
        [],
        [[0, ["score"]]],
        [[9, ["score"], "nan"]],
        [[-1, ["score"], "nan"]],
        [[True, ["score"], "nan"]],
        [[0, ["score"], "NaN"]],
        [[0, "score", "nan"]],
        [[0, ["missing"], "nan"]],
        [[0, ["call_id"], "nan"]],
        [[1, ["content", 5], "nan"]],
        [[1, ["content", "0"], "nan"]],
        [[0, [], "nan"]],
        [[0, ["score"], "nan"], [0, ["score"], "nan"]],
    ],
    ids=[
        "not-a-list",
        "empty",
        "short-entry",
        "item-out-of-range",
        "negative-item",
        "bool-item",
        "unknown-kind",
        "path-not-a-list",
        "missing-key",
        "not-null",
        "index-out-of-range",
        "str-index",
        "whole-item-not-null",
        "twice",
    ],
)
def test_malformed_nonfinite_field_is_malformed(value):
    """A resealed ``nonfinite`` that does not name null places of the batch is refused."""
    mapping = copy.deepcopy(nonfinite_pending().to_mapping())
    mapping["nonfinite"] = value
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), inner, max_size=4),
    ),
    max_leaves=20,
)


@given(st.lists(json_values, max_size=4))
def test_any_journal_batch_reads_back_equal_from_its_record(items):
    """Any batch journal_batch accepts comes back from the record's bytes, mapping or JSON copy
    equal to the caller's items as JSON values, NaN and infinities included."""
    batch, digests = journal_batch(items)
    record = make_pending(batch=batch, batch_digests=digests)
    for decoded in decoded_ways(record):
        assert nan_equal(list(decoded.batch), items)
        assert decoded.batch_digests == digests


@pytest.mark.parametrize("size", [10, 600, 5000])
def test_nonfinite_floats_survive_in_batches_of_any_item_size(size):
    """Small and large items alike (found by searching the bytes or by walking) keep their NaN."""
    items = [{"role": "user", "content": "x" * size, "meta": {"score": NAN}} for _ in range(3)]
    record = nonfinite_pending(batch=items)
    for decoded in decoded_ways(record):
        assert all(math.isnan(item["meta"]["score"]) for item in decoded.batch)


# -- lone surrogates in the batch -----------------------------------------------------------

LONE = "bytes \udcff\udcfe from surrogateescape"

SURROGATE_BATCH = (
    {"type": "function_call_output", "call_id": "c1", "output": LONE, "score": NAN},
    {"role": "user", "content": "plain", "score": INF},
    {"role": "user", "content": [{"type": "input_text", "\ud800meta": {"k": [1, -INF]}}]},
    "[1, 2]",
)


def surrogate_pending(**overrides) -> PendingWrite:
    """A PendingWrite whose batch holds lone surrogates (a value, a key), NaN and infinities
    beside them and elsewhere, and a str that reads as JSON; digested by journal_batch."""
    batch, digests = journal_batch(overrides.pop("batch", SURROGATE_BATCH))
    return make_pending(batch=batch, batch_digests=digests, **overrides)


def test_lone_surrogates_in_the_batch_round_trip():
    """Items with lone surrogates in values and keys come back from the bytes, the text, the
    mapping and the mapping's stdlib JSON copy as themselves, NaN included, and verify."""
    record = surrogate_pending()
    for decoded in decoded_ways(record):
        assert decoded.batch[0]["output"] == LONE
        assert math.isnan(decoded.batch[0]["score"])
        assert decoded.batch[2]["content"][0]["\ud800meta"] == {"k": [1, -INF]}
        assert decoded.batch[3] == "[1, 2]"
        assert nan_equal(decoded.batch, SURROGATE_BATCH)
        assert decoded.batch_digests == record.batch_digests == digest_items(decoded.batch)
        assert decoded.same_content(record)


def test_a_surrogate_record_is_json_shaped():
    """The mapping and the bytes hold such an item as its ASCII JSON text, which
    ``json_text`` lists; stdlib json and orjson both write the mapping, and the bytes are
    orjson's writing of it."""
    record = surrogate_pending()
    mapping = record.to_mapping()
    assert mapping["json_text"] == [0, 2]
    assert mapping["nonfinite"] == [[1, ["score"], "inf"]]
    assert mapping["batch"][0] == (
        '{"type":"function_call_output","call_id":"c1",'
        '"output":"bytes \\udcff\\udcfe from surrogateescape","score":NaN}'
    )
    assert mapping["batch"][2].isascii() and mapping["batch"][3] == "[1, 2]"
    assert json.loads(json.dumps(mapping, allow_nan=False)) == mapping
    assert orjson.loads(orjson.dumps(mapping)) == mapping
    assert orjson.loads(record.encode()) == mapping
    assert redigest(mapping) == mapping
    assert record.batch[0]["output"] == LONE


SURROGATE_EDITS = {
    "dropped-field": lambda m: m.pop("json_text"),
    "dropped-entry": lambda m: m["json_text"].pop(),
    "other-item": lambda m: m["json_text"].__setitem__(1, 3),
    "added-item": lambda m: m["json_text"].append(3),
    "edited-text": lambda m: m["batch"].__setitem__(0, m["batch"][0].replace("dcff", "dcfd")),
}


@pytest.mark.parametrize("edit", SURROGATE_EDITS.values(), ids=SURROGATE_EDITS.keys())
@pytest.mark.parametrize("reseal", [False, True])
def test_edited_json_text_is_tampered(edit, reseal):
    """Editing ``json_text`` is caught by the record's digest, and once resealed, by the
    batch digests (a text left undecoded, or a str decoded, digests differently); so is an
    edited text."""
    edited = retag(surrogate_pending().to_mapping(), edit)
    if reseal:
        edited = redigest(edited)
    with pytest.raises(RecordTampered):
        PendingWrite.decode(edited)


@pytest.mark.parametrize(
    "value",
    ["not a list", [], [0, 9], [-1], [True], ["0"], [0, 2.0], [2, 0], [0, 0, 2], [0, 1]],
    ids=[
        "not-a-list",
        "empty",
        "item-out-of-range",
        "negative-item",
        "bool-item",
        "str-item",
        "float-item",
        "out-of-order",
        "twice",
        "not-a-text",
    ],
)
def test_malformed_json_text_field_is_malformed(value):
    """A resealed ``json_text`` that does not list, in order, batch places holding a str is
    refused as malformed."""
    mapping = copy.deepcopy(surrogate_pending().to_mapping())
    mapping["json_text"] = value
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(redigest(mapping))


@pytest.mark.parametrize(
    "text", ["not json", '{"a": 1', "[" * 100_000 + "]" * 100_000], ids=["words", "cut", "deep"]
)
def test_a_text_that_is_not_json_is_malformed(text):
    """A text ``json_text`` names that does not decode (broken, or nested beyond the
    interpreter's stack) is refused as malformed."""
    mapping = copy.deepcopy(surrogate_pending().to_mapping())
    mapping["batch"][0] = text
    with pytest.raises(RecordMalformed):
        PendingWrite.decode(mapping)


def test_encoding_a_surrogate_record_leaves_the_callers_items_alone():
    """Encoding puts texts into a copy of the batch list: the caller's items stay items."""
    items = list(SURROGATE_BATCH)
    record = surrogate_pending(batch=items)
    record.encode()
    record.to_mapping()
    assert record.batch[0] is items[0] and record.batch[0]["output"] == LONE
    assert nan_equal(items, SURROGATE_BATCH)


surrogate_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(), surrogate_text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(surrogate_text, inner, max_size=4),
    ),
    max_leaves=12,
)


@given(st.lists(surrogate_values, max_size=4))
def test_any_batch_with_lone_surrogates_reads_back_equal_from_its_record(items):
    """Any batch whose texts may hold lone (low) surrogates comes back from the record's
    bytes, mapping or JSON copy equal to the caller's items, with its digests."""
    batch, digests = journal_batch(items)
    record = make_pending(batch=batch, batch_digests=digests)
    for decoded in decoded_ways(record):
        assert nan_equal(list(decoded.batch), items)
        assert decoded.batch_digests == digests
