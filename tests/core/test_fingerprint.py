"""Canonical bytes and digests: stable across key order, item types and session-only metadata."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import math
import re
import uuid

import orjson
import pytest
from agents import SQLiteSession
from agents.run_internal.items import ensure_input_item_format
from agents.testing import assistant_message, function_call
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from agents_reconcile._core.fingerprint import (
    FINGERPRINT_SCHEME,
    canonical_bytes,
    canonical_item,
    digest_items,
    item_digest,
    journal_batch,
)
from agents_reconcile.errors import FingerprintError, ReconcileError, UnsupportedRecordVersion

from ..support.strategies import surrogate_text

HEX64 = re.compile(r"[0-9a-f]{64}")


def user_message(text: str = "hello") -> dict:
    """A plain input item, as a user's input is stored."""
    return {"role": "user", "content": text, "type": "message"}


# -- canonical bytes ----------------------------------------------------------------------


def test_canonical_bytes_ignore_key_order():
    """Two dicts with the same content in a different key order serialise to the same bytes."""
    one = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    two = {"content": [{"text": "hi", "type": "input_text"}], "role": "user", "type": "message"}
    assert list(one) != list(two)
    assert canonical_bytes(one) == canonical_bytes(two)
    assert item_digest(one) == item_digest(two)


def test_canonical_bytes_are_sorted_compact_json():
    """Canonical bytes are JSON with keys sorted at every depth."""
    item = {"b": 1, "a": {"d": [2, {"z": None, "y": True}], "c": "x"}}
    assert canonical_bytes(item) == b'{"a":{"c":"x","d":[2,{"y":true,"z":null}]},"b":1}'
    assert orjson.loads(canonical_bytes(item)) == item


def test_different_content_gives_a_different_digest():
    """A change in any value, nested or not, changes the digest."""
    base = user_message("hello")
    assert item_digest(base) != item_digest(user_message("hello!"))
    assert item_digest(base) != item_digest({**base, "role": "assistant"})
    assert item_digest([1, 2]) != item_digest([2, 1])


def test_list_order_matters():
    """Only mapping keys are sorted: the order of list elements is content."""
    first = {"content": [{"text": "a"}, {"text": "b"}]}
    second = {"content": [{"text": "b"}, {"text": "a"}]}
    assert canonical_bytes(first) != canonical_bytes(second)


def test_digests_are_64_hex_characters():
    """Every digest is a lowercase 64-character hex string."""
    digests = [item_digest(user_message()), *digest_items([{}, [], "text", 0, None])]
    for digest in digests:
        assert HEX64.fullmatch(digest), digest


def test_digest_items_keeps_order_and_matches_item_digest():
    """``digest_items`` returns one digest per item, in order, equal to ``item_digest``."""
    items = [user_message("a"), user_message("b"), user_message("a")]
    digests = digest_items(items)
    assert digests == tuple(item_digest(item) for item in items)
    assert digests[0] == digests[2] != digests[1]
    assert digest_items([]) == ()


def test_fingerprint_scheme_is_a_versioned_name():
    """The scheme is a non-empty name that ends in a version number."""
    assert isinstance(FINGERPRINT_SCHEME, str)
    assert FINGERPRINT_SCHEME.strip() == FINGERPRINT_SCHEME != ""
    assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*/\d+", FINGERPRINT_SCHEME), FINGERPRINT_SCHEME


# -- pydantic items as the SDK persists them ----------------------------------------------


def test_pydantic_item_digest_equals_the_sdk_normalised_dict():
    """A pydantic output item has the digest of the dict the SDK turns it into."""
    message = assistant_message("the answer", item_id="msg_1")
    normalised = ensure_input_item_format(message)
    assert isinstance(normalised, dict)
    assert item_digest(message) == item_digest(normalised)
    assert item_digest(message) == item_digest(message.model_dump(exclude_unset=True))


def test_pydantic_item_digest_equals_its_json_round_trip():
    """The digest survives the JSON round trip a store makes of the normalised item."""
    call = function_call("lookup", {"q": 1}, call_id="call_1", item_id="fc_1")
    stored = json.loads(json.dumps(ensure_input_item_format(call)))
    assert item_digest(call) == item_digest(stored)


def test_hand_built_pydantic_item_equals_hand_written_dict():
    """A ResponseOutputMessage and the dict with the same fields give the same digest."""
    message = ResponseOutputMessage(
        id="msg_2",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="hi", annotations=[])],
    )
    as_dict = {
        "status": "completed",
        "role": "assistant",
        "type": "message",
        "id": "msg_2",
        "content": [{"annotations": [], "text": "hi", "type": "output_text"}],
    }
    assert item_digest(message) == item_digest(as_dict)
    assert item_digest(message) != item_digest({**as_dict, "status": "incomplete"})


async def test_pydantic_item_digest_equals_what_a_session_gives_back():
    """An item digested before a write has the digest of the same item read back from SQLite."""
    message = assistant_message("persisted", item_id="msg_3")
    session = SQLiteSession("fingerprint-test")
    try:
        await session.add_items([ensure_input_item_format(message)])
        stored = await session.get_items()
    finally:
        session.close()
    assert len(stored) == 1
    assert item_digest(stored[0]) == item_digest(message)


def test_canonical_item_of_a_pydantic_item_is_plain_json():
    """A pydantic item's canonical form is a dict of JSON types without unset fields."""
    message = assistant_message("x", item_id="msg_4")
    canonical = canonical_item(message)
    assert isinstance(canonical, dict)
    assert "phase" not in canonical
    assert orjson.loads(orjson.dumps(canonical)) == canonical


# -- session-only metadata and ids --------------------------------------------------------


@pytest.mark.parametrize("key", ["_agents_tool_description", "_agents_tool_title", "created_by"])
def test_session_only_keys_do_not_change_the_digest(key):
    """Metadata the SDK adds to stored items is left out of the digest."""
    call = ensure_input_item_format(function_call("f", "{}", call_id="c", item_id="fc"))
    assert item_digest({**call, key: "metadata"}) == item_digest(call)


def test_all_session_only_keys_together_do_not_change_the_digest():
    """An item carrying every session-only key digests like the bare item."""
    bare = user_message()
    decorated = {
        **bare,
        "_agents_tool_description": "d",
        "_agents_tool_title": "t",
        "created_by": 1,
    }
    assert item_digest(decorated) == item_digest(bare)
    assert canonical_item(decorated) == bare


def test_stripping_metadata_leaves_the_input_alone():
    """Computing a digest does not remove keys from the caller's item."""
    item = {**user_message(), "created_by": "sdk", "id": "x"}
    snapshot = dict(item)
    item_digest(item, ignore_ids=True)
    assert item == snapshot


def test_other_underscore_keys_still_count():
    """Only the named session-only keys are dropped; any other key is content."""
    bare = user_message()
    assert item_digest({**bare, "_agents_other": "x"}) != item_digest(bare)


def test_ignore_ids_drops_the_id():
    """With ``ignore_ids=True`` two items differing only in ``id`` share a digest."""
    one = {**user_message(), "id": "item_1"}
    two = {**user_message(), "id": "item_2"}
    assert item_digest(one) != item_digest(two)
    assert item_digest(one, ignore_ids=True) == item_digest(two, ignore_ids=True)
    assert item_digest(one, ignore_ids=True) == item_digest(user_message())
    assert digest_items([one, two], ignore_ids=True) == (item_digest(user_message()),) * 2


def test_ignore_ids_applies_to_pydantic_items():
    """A pydantic item's ``id`` is dropped too when ids are ignored."""
    first = assistant_message("same", item_id="msg_a")
    second = assistant_message("same", item_id="msg_b")
    assert item_digest(first) != item_digest(second)
    assert item_digest(first, ignore_ids=True) == item_digest(second, ignore_ids=True)


def test_ignore_ids_keeps_other_id_fields():
    """Ignoring ids drops only the ``id`` key, not ``call_id`` (which pairs call and output)."""
    one = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    two = {**one, "call_id": "c2"}
    assert item_digest(one, ignore_ids=True) != item_digest(two, ignore_ids=True)


# -- unserialisable items -----------------------------------------------------------------


class Opaque:
    """An object with no JSON form."""


UNSERIALISABLE = [
    pytest.param({1, 2}, id="set"),
    pytest.param(Opaque(), id="object"),
    pytest.param({1: "a"}, id="non-str-key"),
    pytest.param(2**64, id="int-above-64-bits"),
    pytest.param({"type": "message", "content": {"tags": {"a"}}}, id="nested-set"),
    pytest.param({"type": "message", "n": -(2**64)}, id="nested-huge-int"),
    pytest.param({"role": "user", "content": [{("a", "b"): 1}]}, id="nested-tuple-key"),
]


@pytest.mark.parametrize("bad", UNSERIALISABLE)
@pytest.mark.parametrize("position", [0, 2])
def test_unserialisable_item_names_its_position(bad, position):
    """An item with no canonical JSON form raises FingerprintError whose index is its position."""
    items = [user_message("a"), user_message("b"), user_message("c")]
    items.insert(position, bad)
    with pytest.raises(FingerprintError) as caught:
        digest_items(items)
    assert caught.value.index == position
    assert f"item {position}" in str(caught.value)


def test_the_first_unserialisable_item_is_named():
    """With several bad items the error names the first one."""
    with pytest.raises(FingerprintError) as caught:
        digest_items([user_message(), {3}, Opaque()])
    assert caught.value.index == 1


@pytest.mark.parametrize("bad", UNSERIALISABLE)
def test_item_digest_passes_the_given_index(bad):
    """``item_digest`` and ``canonical_bytes`` report the index they were given."""
    with pytest.raises(FingerprintError) as from_digest:
        item_digest(bad, index=7)
    with pytest.raises(FingerprintError) as from_bytes:
        canonical_bytes(bad, index=4)
    assert from_digest.value.index == 7
    assert from_bytes.value.index == 4


def test_fingerprint_error_is_a_reconcile_type_error():
    """FingerprintError is catchable as the package's base error and as a TypeError."""
    with pytest.raises(FingerprintError) as caught:
        item_digest({"x": {1, 2}})
    assert isinstance(caught.value, ReconcileError)
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value.__cause__, TypeError)


def test_64_bit_integers_are_fine():
    """Integers within 64 bits (signed and unsigned) are serialisable."""
    for value in (2**63 - 1, -(2**63), 2**64 - 1):
        assert HEX64.fullmatch(item_digest({"n": value}))


# -- scheme /2: non-finite floats ---------------------------------------------------------

NAN = float("nan")
INF = float("inf")


def plain_digest(item, *, ignore_ids: bool = False) -> str:
    """The digest written out for an item without non-finite floats or lone surrogates:
    blake3 over its sorted-key orjson bytes."""
    canonical = canonical_item(item, ignore_ids=ignore_ids)
    return blake3(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()


def at(position: str, value):
    """An SDK-like item with ``value`` at a top-level key, a nested key, a list slot, or as
    the whole item."""
    if position == "top-level key":
        return {"type": "function_call_output", "call_id": "c1", "score": value}
    if position == "nested key":
        return {"role": "user", "content": [{"type": "input_text", "meta": {"score": value}}]}
    if position == "list slot":
        return {"role": "user", "content": [1.5, value, "x"]}
    return value


POSITIONS = ["top-level key", "nested key", "list slot", "whole item"]


def test_the_scheme_is_v2():
    """Digests are made under /2, the one scheme this release reads."""
    assert FINGERPRINT_SCHEME == "blake3-orjson-sorted/2"


@pytest.mark.parametrize("position", POSITIONS)
def test_nan_inf_minus_inf_and_null_digest_apart(position):
    """NaN, inf, -inf and null in the same place give four different /2 digests."""
    digests = {item_digest(at(position, value)) for value in (NAN, INF, -INF, None)}
    assert len(digests) == 4
    assert len({digest_items([at(position, v)])[0] for v in (NAN, INF, -INF, None)}) == 4


def test_which_place_holds_the_nonfinite_float_counts():
    """Swapping a NaN with a null, or with an infinity, in another place changes the digest."""
    assert item_digest({"a": NAN, "b": None}) != item_digest({"a": None, "b": NAN})
    assert item_digest({"a": NAN, "b": INF}) != item_digest({"a": INF, "b": NAN})
    assert item_digest([NAN, None]) != item_digest([None, NAN])
    assert item_digest({"a": [NAN]}) != item_digest({"a": {"0": NAN}}) != item_digest([NAN])


def test_nonfinite_digest_ignores_key_order():
    """An item with non-finite floats digests alike whatever its keys' order."""
    one = {"b": {"y": INF, "x": NAN}, "a": -INF}
    two = {"a": -INF, "b": {"x": NAN, "y": INF}}
    assert canonical_bytes(one) == canonical_bytes(two)


def test_nonfinite_bytes_are_the_orjson_bytes_then_0xff_and_where():
    """The bytes of an item with NaN are orjson's (null in its places), 0xff, and a JSON list
    of places."""
    item = {"b": [1, INF], "a": {"s": NAN}, "c": -INF}
    plain = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    data = canonical_bytes(item)
    assert plain == b'{"a":{"s":null},"b":[1,null],"c":null}'
    assert data.startswith(plain + b"\xff")
    assert orjson.loads(data[len(plain) + 1 :]) == [
        [["a", "s"], "nan"],
        [["b", 1], "inf"],
        [["c"], "-inf"],
    ]


WITHOUT_NONFINITE = [
    {},
    [],
    "text",
    0,
    None,
    {"role": "user", "content": "null and NaN and Infinity, as text"},
    {"type": "message", "status": None, "content": [None, {"z": None}], "n": 1.5, "m": -0.0},
    {"role": "user", "content": "x" * 5000, "score": None},
    {"deep": [[[{"a": [1.0, 2e300, -1e-300, None]}]]]},
    {"tuple": (1, "a", None)},
]


@pytest.mark.parametrize("item", WITHOUT_NONFINITE)
def test_items_without_nonfinite_floats_have_their_orjson_bytes(item):
    """Without NaN or infinities an item's bytes are its sorted-key orjson bytes, and its
    digest blake3 over them."""
    assert canonical_bytes(item) == orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    assert item_digest(item) == plain_digest(item)
    assert digest_items([item]) == (plain_digest(item),)


def test_sdk_items_digest_as_their_sorted_orjson_bytes():
    """The SDK's own items (pydantic and normalised) digest as blake3 over their canonical
    form's sorted-key orjson bytes."""
    items = [
        assistant_message("hi", item_id="msg_1"),
        ensure_input_item_format(function_call("f", "{}", call_id="c", item_id="fc")),
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
    ]
    assert digest_items(items) == tuple(plain_digest(item) for item in items)
    assert digest_items(items, ignore_ids=True) == tuple(
        plain_digest(item, ignore_ids=True) for item in items
    )


@pytest.mark.parametrize(
    "scheme", ["blake3-orjson-sorted/1", "blake3-orjson-sorted/3", "sha256-json/1", ""]
)
def test_an_unknown_scheme_is_refused_by_name(scheme):
    """Asking for a scheme this release cannot compute raises UnsupportedRecordVersion naming it."""
    for compute in (
        lambda: canonical_bytes({}, scheme=scheme),
        lambda: item_digest({}, scheme=scheme),
        lambda: digest_items([{}], scheme=scheme),
    ):
        with pytest.raises(UnsupportedRecordVersion, match=re.escape(repr(scheme))):
            compute()


def test_large_items_find_their_nonfinite_floats_too():
    """An item larger than the byte-search threshold still has its NaN told from null."""
    big = {"content": "x" * 4000, "meta": {"score": NAN}}
    assert item_digest(big) != item_digest({**big, "meta": {"score": None}})
    assert item_digest({"content": "x" * 4000}) == plain_digest({"content": "x" * 4000})


# -- journal_batch --------------------------------------------------------------------------


class Color(enum.Enum):
    """An enum that is neither a str nor an int: orjson writes its value, which reads back
    as a plain value."""

    RED = "red"


class Mode(enum.StrEnum):
    """A str-valued enum: it is a str, and reads back equal."""

    FAST = "fast"


class Level(enum.IntEnum):
    """An int-valued enum: it is an int, and reads back equal."""

    HIGH = 3


@dataclasses.dataclass
class Point:
    """A dataclass: orjson writes it as an object, which reads back as a dict."""

    x: int


class Real(float):
    """A float subclass: orjson refuses it."""


Pair = collections.namedtuple("Pair", "a b")

REFUSED = [
    pytest.param(datetime.datetime(2024, 5, 1, 12, 0), "datetime.datetime", id="datetime"),
    pytest.param(datetime.date(2024, 5, 1), "datetime.date", id="date"),
    pytest.param(datetime.time(12, 0), "datetime.time", id="time"),
    pytest.param(uuid.UUID(int=7), "uuid.UUID", id="uuid"),
    pytest.param(decimal.Decimal("1.5"), "decimal.Decimal", id="decimal"),
    pytest.param(b"raw", "bytes", id="bytes"),
    pytest.param({1, 2}, "set", id="set"),
    pytest.param(Color.RED, "Color", id="plain-enum"),
    pytest.param(Point(1), "Point", id="dataclass"),
    pytest.param(Real(1.5), "Real", id="float-subclass"),
    pytest.param(Pair(1, 2), "Pair", id="namedtuple"),
    pytest.param(2**64, "int", id="int-above-64-bits"),
    pytest.param(-(2**63) - 1, "int", id="int-below-64-bits"),
    pytest.param({1: "a"}, "int", id="non-str-key"),
    pytest.param({Mode.FAST: "a"}, "Mode", id="str-enum-key"),
    pytest.param("\ud83d\ude00", "surrogate pair as two code points", id="split-surrogate-pair"),
]


@pytest.mark.parametrize(("bad", "named"), REFUSED)
def test_journal_batch_refuses_what_the_journal_cannot_hold_exactly(bad, named):
    """A value that would not read back equal raises FingerprintError naming the item's index,
    the path inside it and the type, and saying a replay would write something else."""
    items = [
        {"role": "user", "content": "fine"},
        {"role": "user", "content": [{"type": "input_text", "ts": bad}]},
    ]
    with pytest.raises(FingerprintError) as caught:
        journal_batch(items)
    message = str(caught.value)
    assert caught.value.index == 1
    assert message.startswith("item 1 ")
    assert '["content"][0]["ts"]' in message
    assert named in message
    assert "journal could not hold it exactly" in message
    assert "replay would write something" in message


@pytest.mark.parametrize(("bad", "named"), REFUSED)
def test_journal_batch_refuses_a_whole_item_that_is_not_exact(bad, named):
    """An item that is itself such a value is refused, with its index and type."""
    with pytest.raises(FingerprintError) as caught:
        journal_batch([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, bad])
    assert caught.value.index == 2
    assert str(caught.value).startswith("item 2 ")
    assert named in str(caught.value)
    assert "journal could not hold it exactly" in str(caught.value)


def test_journal_batch_checks_the_id_and_metadata_the_digest_leaves_out():
    """With ``ignore_ids`` the digest omits ``id`` (and session-only keys), yet the journal
    keeps them, so an inexact value there is refused too."""
    when = datetime.datetime(2024, 5, 1)
    for key in ("id", "created_by", "_agents_tool_title"):
        with pytest.raises(FingerprintError) as caught:
            journal_batch([{"role": "user", "content": "x", key: when}], ignore_ids=True)
        assert f'["{key}"]' in str(caught.value)
        assert caught.value.index == 0


def test_journal_batch_names_the_first_bad_item():
    """With several bad items the error names the first one in the batch."""
    with pytest.raises(FingerprintError) as caught:
        journal_batch([{"a": 1}, {"b": {1, 2}}, {"c": uuid.uuid4()}])
    assert caught.value.index == 1
    assert str(caught.value).startswith('item 1 holds a value of type set at ["b"]')


def test_journal_batch_reports_a_cyclic_item_instead_of_recursing():
    """A self-containing item is refused as nested too deep, with a shortened path."""
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(FingerprintError) as caught:
        journal_batch([cyclic])
    assert "nested deeper" in str(caught.value)
    assert len(str(caught.value)) < 400


ACCEPTED = [
    {"role": "user", "content": "hello"},
    {"type": "function_call", "call_id": "c", "arguments": "{}", "args": (1, (2, 3))},
    {"score": NAN, "hi": INF, "lo": -INF, "list": [NAN, None, (INF,)]},
    {"mode": Mode.FAST, "level": Level.HIGH, "flag": True, "n": 2**64 - 1, "m": -(2**63)},
    {"nested": collections.OrderedDict(a=1), "sub": type("S", (str,), {})("text")},
    (1, 2, "three"),
    NAN,
    "plain text",
    None,
]


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


@pytest.mark.parametrize("item", ACCEPTED)
def test_journal_batch_accepts_what_reads_back_equal(item):
    """Tuples, NaN and infinities, str/int enums and subclasses of JSON's types are accepted,
    with the digests ``digest_items`` gives."""
    batch, digests = journal_batch([item])
    assert nan_equal(batch[0], item)
    assert digests == digest_items([item])


def test_journal_batch_keeps_the_callers_dicts_and_canonicalises_the_rest():
    """A dict is the caller's own object; a pydantic item becomes its canonical dict."""
    mine = {"role": "user", "content": "hi", "created_by": "sdk", "id": "m1"}
    message = assistant_message("answer", item_id="msg_9")
    batch, digests = journal_batch([mine, message, "text"], ignore_ids=True)
    assert batch[0] is mine
    assert batch[1] == canonical_item(message)
    assert batch[2] == "text"
    assert digests == digest_items([mine, message, "text"], ignore_ids=True)
    assert digests == digest_items(batch, ignore_ids=True)
    assert mine == {"role": "user", "content": "hi", "created_by": "sdk", "id": "m1"}


def test_journal_batch_of_nothing_is_empty():
    """An empty batch gives two empty tuples."""
    assert journal_batch([]) == ((), ())


def test_journal_batch_digests_tell_nan_from_null():
    """The digests journal_batch returns are /2 digests: NaN and null differ."""
    _, digests = journal_batch([{"score": NAN}, {"score": None}, {"score": INF}])
    assert len(set(digests)) == 3


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


def has_nonfinite(value) -> bool:
    """Whether a JSON-shaped value holds NaN or an infinity anywhere."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_nonfinite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_nonfinite(v) for v in value)
    return False


@given(json_values)
def test_journal_batch_and_digest_items_agree_on_any_json_value(value):
    """For any JSON value, journal_batch digests like digest_items, and the digest is blake3
    over the sorted-key orjson bytes exactly when the value holds no non-finite float."""
    batch, digests = journal_batch([value])
    assert batch[0] is value
    assert digests == digest_items([value])
    same = digests[0] == plain_digest(value)
    assert same is not has_nonfinite(value)


# -- scheme /2: lone surrogates -------------------------------------------------------------

LONE = "bytes \udcff\udcfe from surrogateescape"


def with_text(text: str) -> dict:
    """A tool output item carrying ``text``."""
    return {"type": "function_call_output", "call_id": "c1", "output": text}


def escaped_bytes(item) -> bytes:
    """The /2 bytes the module docstring defines for an item holding a lone surrogate."""
    text = json.dumps(
        canonical_item(item), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return b"\xfe" + text.encode("ascii")


def test_a_lone_surrogate_digests_deterministically_and_apart():
    """An item with a lone surrogate has one digest, whatever its key order, and another
    surrogate, the replacement character or the character left out each give another."""
    item = with_text(LONE)
    reordered = {"output": LONE, "call_id": "c1", "type": "function_call_output"}
    assert item_digest(item) == item_digest(item) == item_digest(reordered)
    assert digest_items([item]) == (item_digest(item),)
    others = [
        with_text(LONE.replace("\udcff", "\udcfd")),
        with_text(LONE.replace("\udcff", "\ud8ff")),
        with_text(LONE.replace("\udcff", "\ufffd")),
        with_text(LONE.replace("\udcff", "")),
        with_text(LONE.replace("\udcff", "\\udcff")),
        with_text(LONE.encode("utf-8", "surrogateescape").decode("latin-1")),
    ]
    digests = {item_digest(item), *(item_digest(other) for other in others)}
    assert len(digests) == len(others) + 1


def test_a_dict_key_with_a_lone_surrogate_digests_apart():
    """A lone surrogate in a dict key, at any depth, digests deterministically and apart
    from another surrogate or the replacement character in the same key."""
    for key in ("\ud800", "a\udc80", "\udbff"):
        item = {"role": "user", "content": [{"meta": {key: 1, "b": 2}}]}
        same = {"content": [{"meta": {"b": 2, key: 1}}], "role": "user"}
        assert item_digest(item) == item_digest(same)
    keys = ["\ud800", "\ud801", "\udc00", "\ufffd", "\\ud800", "ud800"]
    assert len({item_digest({key: 1}) for key in keys}) == len(keys)
    assert len({item_digest({"meta": {key: [None]}}) for key in keys}) == len(keys)


@pytest.mark.parametrize("position", POSITIONS[:3])
def test_nan_inside_a_surrogate_item_is_told_from_null(position):
    """In an item that also holds a lone surrogate, NaN, inf, -inf and null in the same
    place give four different digests."""
    digests = {
        item_digest({**at(position, value), "note": LONE}) for value in (NAN, INF, -INF, None)
    }
    assert len(digests) == 4


def test_surrogate_bytes_are_0xfe_and_the_stdlib_text():
    """/2 bytes of an item with a lone surrogate are 0xfe, then the stdlib's sorted, compact,
    ASCII JSON text (NaN as its token, no trailer)."""
    item = {"z": [1.5, NAN, None], "a": {"\ud800": LONE}, "m": (True, -INF)}
    data = canonical_bytes(item)
    assert data == escaped_bytes(item)
    assert data == (
        b'\xfe{"a":{"\\ud800":"bytes \\udcff\\udcfe from surrogateescape"},'
        b'"m":[true,-Infinity],"z":[1.5,NaN,null]}'
    )
    assert b"\xff" not in data


def test_a_split_surrogate_pair_digests_apart_from_its_character():
    """A high and a low surrogate as two code points digest, and not like the one character
    their escapes encode."""
    split, joined = "\ud83d\ude00", "\U0001f600"
    assert split.encode("utf-16", "surrogatepass").decode("utf-16") == joined
    assert canonical_bytes(split) == b'\xfe"\\ud83d\\ude00"'
    assert item_digest(split) != item_digest(joined)


def test_a_surrogate_item_with_a_type_json_has_not_is_refused():
    """The fallback writes only JSON's own types: an item holding a lone surrogate digests,
    but once it also holds a datetime it raises FingerprintError naming the item."""
    assert HEX64.fullmatch(item_digest({"a": LONE}))
    item = {"a": LONE, "when": datetime.datetime(2024, 5, 1)}
    with pytest.raises(FingerprintError) as refused:
        digest_items([{"role": "user"}, item])
    assert refused.value.index == 1
    assert "surrogates not allowed" in str(refused.value)


SURROGATE_ITEMS = [
    pytest.param(with_text(LONE), id="value"),
    pytest.param({"role": "user", "content": [{"\udc80key": "v"}]}, id="nested-key"),
    pytest.param({"\ud800": NAN, "list": [LONE, (INF, None)]}, id="key-and-nan"),
    pytest.param({"mode": Mode.FAST, "level": Level.HIGH, "text": LONE}, id="enums"),
    pytest.param(LONE, id="whole-item"),
    pytest.param([LONE, "\udbff"], id="list"),
]


@pytest.mark.parametrize("item", SURROGATE_ITEMS)
def test_journal_batch_accepts_lone_surrogates(item):
    """journal_batch accepts a lone surrogate in a value or a key, keeps the caller's item,
    and gives the digests digest_items gives it and its JSON round trip."""
    batch, digests = journal_batch([{"role": "user", "content": "x"}, item])
    assert batch[1] is item or batch[1] == item
    assert digests == digest_items([{"role": "user", "content": "x"}, item])
    assert digests[1] == item_digest(json.loads(json.dumps(item)))
    assert canonical_bytes(item).startswith(b"\xfe")


def test_journal_batch_checks_surrogates_in_the_id_the_digest_leaves_out():
    """With ``ignore_ids`` a lone surrogate in ``id`` is accepted, and a split pair there is
    refused, though the digest never sees it."""
    batch, digests = journal_batch([{"role": "user", "id": LONE}], ignore_ids=True)
    assert batch[0]["id"] == LONE
    assert digests == digest_items([{"role": "user"}])
    with pytest.raises(FingerprintError) as refused:
        journal_batch([{"role": "user", "id": "\ud83d\ude00"}], ignore_ids=True)
    assert '["id"]' in str(refused.value)


surrogate_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(), surrogate_text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(surrogate_text, inner, max_size=4),
    ),
    max_leaves=12,
)


@given(surrogate_values)
def test_journal_batch_and_digest_items_agree_with_lone_surrogates(value):
    """For any JSON value whose texts may hold lone (low) surrogates, journal_batch digests
    like digest_items, and like the value read back from the stdlib's JSON text."""
    batch, digests = journal_batch([value])
    assert batch[0] is value
    assert digests == digest_items([value])
    assert digests == digest_items([json.loads(json.dumps(value))])
