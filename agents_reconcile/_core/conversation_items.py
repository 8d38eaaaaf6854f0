"""How a Conversations item is seen when its digest is taken: what the service adds or
rewrites is left out, everything the writer sent is kept. Pure: no I/O.

An item written to an OpenAI conversation does not come back as it was sent: the service gives
it an id, a status and a type, and writes string content as a list of text parts. Its digest
is therefore taken over a view in which both forms are one (the fingerprint scheme
``CONVERSATION_SCHEME``). The rules follow the SDK's own matching of Conversations items (ids
ignored, ``provider_data`` stripped before a write, an assistant's string content read as one
``output_text`` part, a ``completed`` status dropped) and the Conversations item schemas:

===============================  ===============================  ==========================
what the service does            example                          in the view
===============================  ===============================  ==========================
gives every item an ``id``       ``"id": "msg_..."``              dropped
gives every item a ``status``    ``"status": "completed"``        dropped
adds ``type`` to a message       ``"type": "message"``            added where missing
writes string content as parts   ``"hi"`` (role user)             ``[{"type": "input_text",
                                                                  "text": "hi"}]``
  (assistant: ``output_text``)   ``"ok"`` (role assistant)        ``[{"type": "output_text",
                                                                  "text": "ok"}]``
adds empty lists to text parts   ``"annotations": []``,           dropped when empty
                                 ``"logprobs": []``
keeps provider metadata out      ``"provider_data": {...}``       dropped
===============================  ===============================  ==========================

Anything else the service would add or change (a field not listed here, content rewritten
otherwise) stays in the view, so an item read back with it does not match what was written:
the write is then judged ambiguous and refused, never taken for committed or missing on a
guess. ``ROLE_PART_TYPES`` and ``IGNORED_FIELDS`` are the lists the tests go through one by one.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["EMPTY_PART_FIELDS", "IGNORED_FIELDS", "ROLE_PART_TYPES", "conversation_view"]

IGNORED_FIELDS: Final = ("id", "status", "provider_data")
"""Top-level fields left out of every item's view."""
EMPTY_PART_FIELDS: Final = ("annotations", "logprobs")
"""Fields of a content part left out of the view when they hold an empty list."""
ROLE_PART_TYPES: Final = {
    "user": "input_text",
    "system": "input_text",
    "developer": "input_text",
    "assistant": "output_text",
}
"""The part type string content is written as, by the message's role."""


def conversation_view(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` (an item as JSON, the SDK's session-only keys already out) as its digest
    sees it. Returns ``payload`` itself when nothing in it needs changing."""
    role = payload.get("role")
    content = payload.get("content")
    needs = (
        any(name in payload for name in IGNORED_FIELDS)
        or (role is not None and "type" not in payload)
        or (isinstance(content, str) and role in ROLE_PART_TYPES)
        or (isinstance(content, list) and any(_part_needs(part) for part in content))
    )
    if not needs:
        return payload
    view = {key: value for key, value in payload.items() if key not in IGNORED_FIELDS}
    if role is not None and "type" not in view:
        view["type"] = "message"
    if isinstance(content, str) and role in ROLE_PART_TYPES:
        view["content"] = [{"type": ROLE_PART_TYPES[role], "text": content}]
    elif isinstance(content, list):
        view["content"] = [_part_view(part) for part in content]
    return view


def _part_needs(part: Any) -> bool:
    return isinstance(part, dict) and any(part.get(name) == [] for name in EMPTY_PART_FIELDS)


def _part_view(part: Any) -> Any:
    if not _part_needs(part):
        return part
    return {
        key: value for key, value in part.items() if not (key in EMPTY_PART_FIELDS and value == [])
    }
