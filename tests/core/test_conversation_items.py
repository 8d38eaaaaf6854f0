"""The view a Conversations item is digested through: each thing the service adds, rewrites or
gives back only when asked is left out, one test per rule, and nothing else is; records made
under the earlier view are still read and digested through it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agents_reconcile._core.conversation_items import (
    EMPTY_PART_FIELDS,
    IGNORED_FIELDS,
    PART_DEFAULTS,
    ROLE_PART_TYPES,
    VIEW_VERSIONS,
    WITHHELD,
    conversation_view,
)
from agents_reconcile._core.fingerprint import (
    CONVERSATION_SCHEME,
    FINGERPRINT_SCHEME,
    SCHEMES,
    digest_items,
    journal_batch,
)
from agents_reconcile._core.records import BackendIdentity, PendingWrite
from agents_reconcile.errors import RecordMalformed, UnsupportedRecordVersion

SERVER_VALUES: dict[str, Any] = {
    "id": "msg_0123456789abcdef",
    "status": "completed",
    "provider_data": {"model": "gpt-x", "response_id": "resp_1"},
}


def same(sent: Any, stored: Any) -> bool:
    """Whether ``stored`` (as read back) digests as ``sent`` under the Conversations scheme."""
    return digest_items([sent], scheme=CONVERSATION_SCHEME) == digest_items(
        [stored], scheme=CONVERSATION_SCHEME
    )


@pytest.mark.parametrize("field", IGNORED_FIELDS)
def test_each_field_the_service_adds_is_left_out(field: str) -> None:
    sent = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    stored = {**sent, field: SERVER_VALUES[field]}
    assert same(sent, stored)
    assert digest_items([sent]) != digest_items([stored])  # it does count elsewhere


@pytest.mark.parametrize("role", sorted(ROLE_PART_TYPES))
def test_string_content_reads_as_the_one_text_part_the_service_writes(role: str) -> None:
    sent = {"role": role, "content": "hello"}
    stored = {
        "id": "msg_1",
        "type": "message",
        "role": role,
        "status": "completed",
        "content": [{"type": ROLE_PART_TYPES[role], "text": "hello"}],
    }
    assert same(sent, stored)


def test_a_message_without_a_type_is_a_message() -> None:
    sent = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert same(sent, {**sent, "type": "message"})


@pytest.mark.parametrize("field", EMPTY_PART_FIELDS)
def test_an_empty_list_the_service_adds_to_a_text_part_is_left_out(field: str) -> None:
    part = {"type": "output_text", "text": "ok"}
    sent = {"type": "message", "role": "assistant", "content": [part]}
    stored = {**sent, "content": [{**part, field: []}]}
    assert same(sent, stored)
    # One that says something is kept.
    assert not same(sent, {**sent, "content": [{**part, field: [{"type": "x"}]}]})


def holding(name: str, value: Any = None, *, present: bool = True) -> dict[str, Any]:
    """An item of the type ``WITHHELD[name]`` names, with ``value`` at the field's place (or
    without the field, unless ``present``)."""
    item_type, part_type, path = WITHHELD[name]
    field: Any = {path[-1]: value} if present else {}
    for step in reversed(path[:-1]):
        field = {step: {"type": "search", **field}}
    if part_type is None:
        return {"type": item_type, "call_id": "c1", **field}
    part = {"type": part_type, "text": "hi", "detail": "low", **field}
    return {"type": item_type, "role": "user", "content": [part]}


@pytest.mark.parametrize("name", sorted(WITHHELD))
@pytest.mark.parametrize("given_back", [None, [], "absent"])
def test_each_field_the_service_returns_only_when_asked_is_left_out(
    name: str, given_back: Any
) -> None:
    """An item written with the field and read without ``include=`` (the field null, empty or
    not there) is the same item, whatever the field held."""
    sent = holding(name, [{"written": "value"}])
    stored = holding(name, present=False) if given_back == "absent" else holding(name, given_back)
    assert same(sent, stored)
    assert same(sent, holding(name, [{"another": "value"}]))
    assert digest_items([sent]) != digest_items([holding(name, None)])  # it counts elsewhere


def test_a_withheld_field_anywhere_else_is_kept() -> None:
    """A withheld field's name anywhere but its place (a tool output's image, a text part, a
    message) still tells items apart."""
    output = {"type": "function_call_output", "call_id": "c1", "output": []}
    image = {"type": "input_image", "image_url": "data:a", "detail": "low"}
    assert not same(
        {**output, "output": [image]}, {**output, "output": [{**image, "image_url": "data:b"}]}
    )
    text = {"type": "input_text", "text": "hi", "image_url": "data:a"}
    message = {"type": "message", "role": "user", "content": [text]}
    assert not same(message, {**message, "content": [{**text, "image_url": "data:b"}]})
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "x"}
    assert not same(
        {**reasoning, "type": "message"}, {**reasoning, "type": "message", "encrypted_content": "y"}
    )


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        (
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "f",
                "arguments": "{}",
                "namespace": None,
            },
        ),
        (
            {"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]},
            {
                "role": "user",
                "content": [
                    {"type": "input_file", "file_id": "file-1", "filename": None, "file_url": None}
                ],
            },
        ),
        (
            {"type": "web_search_call", "action": {"type": "search", "query": "q"}},
            {
                "type": "web_search_call",
                "action": {"type": "search", "query": "q", "sources": None, "queries": None},
            },
        ),
        (
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_file", "file_id": "f"}],
            },
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_file", "file_id": "f", "file_url": None}],
            },
        ),
    ],
    ids=["item", "part", "nested", "tool_output"],
)
def test_a_field_given_back_null_is_the_field_left_out(sent: Any, stored: Any) -> None:
    """An optional field the service writes out as ``null`` is as good as absent at any depth
    of the item, and one that holds a value still counts."""
    assert same(sent, stored)
    assert not same(sent, {**stored, "namespace": "tools"})


@pytest.mark.parametrize("part_type", sorted(PART_DEFAULTS))
def test_a_part_without_a_field_the_service_fills_in_has_its_default(part_type: str) -> None:
    """A part sent without a field the service fills in is the same as the part read back
    with the documented default, and not with another value."""
    defaults = PART_DEFAULTS[part_type]
    part = {"type": part_type, "file_id": "file-1"}
    sent = {"role": "user", "content": [part]}
    assert same(sent, {**sent, "content": [{**part, **defaults}]})
    other = {key: f"not {value}" for key, value in defaults.items()}
    assert not same(sent, {**sent, "content": [{**part, **other}]})


def test_the_current_scheme_digests_through_the_last_view_and_the_earlier_one_is_read() -> None:
    """An item read back with its log probabilities emptied matches under the current view
    and not under the first, which is still computed for the records made under it."""
    assert CONVERSATION_SCHEME.endswith(f"/{VIEW_VERSIONS[-1]}")
    earlier = CONVERSATION_SCHEME[: -len(str(VIEW_VERSIONS[-1]))] + "1"
    assert earlier in SCHEMES
    part = {"type": "output_text", "text": "ok", "annotations": [], "logprobs": [{"t": 1}]}
    sent = {"type": "message", "role": "assistant", "content": [part]}
    stored = {**sent, "id": "msg_1", "content": [{**part, "logprobs": []}]}
    assert same(sent, stored)
    assert digest_items([sent], scheme=earlier) != digest_items([stored], scheme=earlier)
    assert digest_items([sent], scheme=earlier) == digest_items(
        [{**sent, "status": "completed"}], scheme=earlier
    )
    written = record(earlier, 20)
    assert PendingWrite.decode(written.encode()) == written


@pytest.mark.parametrize(
    "changed",
    [
        {"role": "user", "content": "hello", "created_at": 1700000000},
        {"role": "user", "content": "hello!"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "input_text", "text": "hello", "extra": 1}]},
        {"role": "user", "content": [{"type": "output_text", "text": "hello"}]},
        {"type": "message", "role": "user", "content": [], "phase": "final"},
    ],
    ids=["unknown_field", "text", "role", "part_field", "part_type", "other_field"],
)
def test_anything_else_the_service_would_change_does_not_match(changed: Any) -> None:
    """A rewrite the view does not know is seen: the write is then not vouched for."""
    assert not same({"role": "user", "content": "hello"}, changed)


def test_the_view_returns_an_item_needing_nothing_as_it_is() -> None:
    item = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    assert conversation_view(item) is item


def test_the_journal_keeps_the_items_as_given_and_digests_their_view() -> None:
    sent = {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    batch, digests = journal_batch([sent], ignore_ids=True, scheme=CONVERSATION_SCHEME)
    assert batch == (sent,)
    assert digests == digest_items([{**sent, "status": "completed"}], scheme=CONVERSATION_SCHEME)


def record(scheme: str, chunk: int | None) -> PendingWrite:
    items = [{"role": "user", "content": f"m{n}"} for n in range(3)]
    batch, digests = journal_batch(items, ignore_ids=True, scheme=scheme)
    return PendingWrite(
        intent_id="i1",
        session_id="conv_1",
        backend=BackendIdentity("k", "n"),
        batch=batch,
        batch_digests=digests,
        before_digests=(),
        before_is_whole=True,
        created_at=1.0,
        ignore_ids=True,
        scheme=scheme,
        chunk=chunk,
    )


@pytest.mark.parametrize("chunk", [None, 20])
def test_a_record_keeps_its_scheme_and_its_request_size(chunk: int | None) -> None:
    written = record(CONVERSATION_SCHEME, chunk)
    read = PendingWrite.decode(written.encode())
    assert (read.scheme, read.chunk) == (CONVERSATION_SCHEME, chunk)
    assert read == written
    assert ("chunk" in written.to_mapping()) is (chunk is not None)


def test_a_record_of_an_unknown_view_is_refused() -> None:
    written = record(FINGERPRINT_SCHEME, None)
    future = dataclasses.replace(written, scheme="blake3-orjson-sorted/2+conversation-items/9")
    with pytest.raises(UnsupportedRecordVersion, match="conversation-items/9"):
        PendingWrite.decode(future.encode())


def test_a_record_whose_request_size_is_not_a_count_is_refused() -> None:
    with pytest.raises(RecordMalformed, match="chunk"):
        PendingWrite.decode(record(CONVERSATION_SCHEME, 0).encode())
