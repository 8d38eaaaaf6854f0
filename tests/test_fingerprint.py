"""Canonical bytes and digests: stable across key order, item types and session-only metadata."""

from __future__ import annotations

import json
import re

import orjson
import pytest
from agents import SQLiteSession
from agents.run_internal.items import ensure_input_item_format
from agents.testing import assistant_message, function_call
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from agents_reconcile.errors import FingerprintError, ReconcileError
from agents_reconcile.fingerprint import (
    FINGERPRINT_SCHEME,
    canonical_bytes,
    canonical_item,
    digest_items,
    item_digest,
)

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
