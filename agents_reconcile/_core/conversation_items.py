"""How a Conversations item is seen when its digest is taken: what the service adds, rewrites
or gives back only when asked is left out, everything else the writer sent is kept. Pure: no
I/O.

An item written to an OpenAI conversation does not come back as it was sent: the service gives
it an id, a status and a type, writes string content as a list of text parts, writes the
optional fields nobody set as ``null``, and leaves out what it returns only when a read asks
for it with ``include=`` (the SDK's reads never do). Its digest is therefore taken over a view
in which every such form of one item is one (the fingerprint scheme ``CONVERSATION_SCHEME``).
The rules follow the SDK's own matching of Conversations items (ids ignored, ``provider_data``
stripped before a write, an assistant's string content read as one ``output_text`` part, a
``completed`` status dropped) and the Conversations item schemas and ``include`` values of the
``openai`` client:

=================================  ===============================  ========================
what the service does              example                          in the view
=================================  ===============================  ========================
gives every item an ``id``         ``"id": "msg_..."``              dropped
gives every item a ``status``      ``"status": "completed"``        dropped
adds ``type`` to a message         ``"type": "message"``            added where missing
writes string content as parts     ``"hi"`` (role user)             ``[{"type":
                                                                    "input_text", "text":
                                                                    "hi"}]``
  (assistant: ``output_text``)     ``"ok"`` (role assistant)        ``[{"type":
                                                                    "output_text", "text":
                                                                    "ok"}]``
adds empty lists to text parts     ``"annotations": []``            dropped when empty
keeps provider metadata out        ``"provider_data": {...}``       dropped
returns a field only when a read   an input image's                 dropped, whatever it
asks for it (``include=``;         ``image_url``, an output         holds (``WITHHELD``)
otherwise ``null`` or empty)       text's ``logprobs``, a
                                   reasoning item's
                                   ``encrypted_content``
writes an optional field nobody    ``"file_id": null``,             a field holding
set as ``null``                    ``"phase": null``                ``null`` is dropped,
                                                                    at any depth
fills in a documented default      an input image without           ``"detail": "auto"``
                                   ``detail``                       added where missing
=================================  ===============================  ========================

What the view leaves out cannot tell two items apart: an item that differs from the one
written only in a withheld field (another image under the same text and detail, other log
probabilities, other encrypted reasoning) is taken for it. Every other difference, and anything
else the service would add or change (a field not listed here, content rewritten otherwise),
stays in the view, so an item read back with it does not match what was written: the write is
then judged ambiguous and refused, never taken for committed or missing on a guess.
``IGNORED_FIELDS``, ``EMPTY_PART_FIELDS``, ``ROLE_PART_TYPES``, ``WITHHELD`` and
``PART_DEFAULTS`` are the lists the tests go through one by one.

Scheme ``conversation-items/1`` (records made before the last three rows) is still computed,
by ``conversation_view(payload, version=1)``: a record is judged under the scheme it was made
with.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "EMPTY_PART_FIELDS",
    "IGNORED_FIELDS",
    "PART_DEFAULTS",
    "ROLE_PART_TYPES",
    "VIEW_VERSIONS",
    "WITHHELD",
    "conversation_view",
]

IGNORED_FIELDS: Final = ("id", "status", "provider_data")
"""Top-level fields left out of every item's view."""
EMPTY_PART_FIELDS: Final = ("annotations",)
"""Fields of a content part left out of the view when they hold an empty list."""
ROLE_PART_TYPES: Final = {
    "user": "input_text",
    "system": "input_text",
    "developer": "input_text",
    "assistant": "output_text",
}
"""The part type string content is written as, by the message's role."""
WITHHELD: Final[dict[str, tuple[str, str | None, tuple[str, ...]]]] = {
    "message.input_image.image_url": ("message", "input_image", ("image_url",)),
    "message.output_text.logprobs": ("message", "output_text", ("logprobs",)),
    "reasoning.encrypted_content": ("reasoning", None, ("encrypted_content",)),
    "computer_call_output.output.image_url": (
        "computer_call_output",
        None,
        ("output", "image_url"),
    ),
    "file_search_call.results": ("file_search_call", None, ("results",)),
    "web_search_call.action.sources": ("web_search_call", None, ("action", "sources")),
    "code_interpreter_call.outputs": ("code_interpreter_call", None, ("outputs",)),
}
"""What the service returns only when a read names it in ``include=``: by that name, the item
type, the type of the message's content part holding it (None: the item itself) and the
field's path there."""
PART_DEFAULTS: Final[dict[str, dict[str, Any]]] = {"input_image": {"detail": "auto"}}
"""By content part type: the documented defaults the service fills in where a field is
missing."""
VIEW_VERSIONS: Final = (1, 2)
"""The versions of the view this release computes; the last is the current one."""

_V1_EMPTY_PART_FIELDS: Final = ("annotations", "logprobs")
_ITEM_WITHHELD: Final = {
    item_type: path for item_type, part_type, path in WITHHELD.values() if part_type is None
}
_PART_WITHHELD: Final = {
    part_type: path for item_type, part_type, path in WITHHELD.values() if part_type is not None
}


def conversation_view(payload: dict[str, Any], *, version: int = 2) -> dict[str, Any]:
    """``payload`` (an item as JSON, the SDK's session-only keys already out) as its digest
    sees it under view ``version``. Returns ``payload`` itself when nothing in it needs
    changing."""
    if version == 1:
        return _view_1(payload)
    role = payload.get("role")
    item_type = payload.get("type", "message" if role is not None else None)
    view = {
        key: value
        for key, value in payload.items()
        if key not in IGNORED_FIELDS and value is not None
    }
    changed = len(view) != len(payload)
    if role is not None and "type" not in view:
        view["type"] = "message"
        changed = True
    withheld = _ITEM_WITHHELD.get(item_type) if isinstance(item_type, str) else None
    if withheld is not None and _drop(view, withheld):
        changed = True
    for key, value in view.items():
        if key == "content" and item_type == "message":
            content = _content_view(value, role)
        else:
            content = _without_nulls(value)
        if content is not value:
            view[key] = content
            changed = True
    return view if changed else payload


def _content_view(content: Any, role: Any) -> Any:
    """A message's content as the view sees it: string content as its one text part, and
    each part without what the service withholds or writes as ``null``, with its defaults."""
    if isinstance(content, str):
        part_type = ROLE_PART_TYPES.get(role) if isinstance(role, str) else None
        return content if part_type is None else [{"type": part_type, "text": content}]
    if not isinstance(content, list):
        return _without_nulls(content)
    parts = [_part_view(part) for part in content]
    return content if all(a is b for a, b in zip(parts, content, strict=True)) else parts


def _part_view(part: Any) -> Any:
    if not isinstance(part, dict):
        return _without_nulls(part)
    named = part.get("type")
    part_type = named if isinstance(named, str) else ""
    view = {
        key: value
        for key, value in part.items()
        if value is not None and not (key in EMPTY_PART_FIELDS and value == [])
    }
    changed = len(view) != len(part)
    withheld = _PART_WITHHELD.get(part_type)
    if withheld is not None and _drop(view, withheld):
        changed = True
    for key, default in PART_DEFAULTS.get(part_type, {}).items():
        if key not in view:
            view[key] = default
            changed = True
    for key, value in view.items():
        inner = _without_nulls(value)
        if inner is not value:
            view[key] = inner
            changed = True
    return view if changed else part


def _drop(view: dict[str, Any], path: tuple[str, ...]) -> bool:
    """Remove the field at ``path`` from ``view`` (copying the objects on the way, which may
    be the caller's); whether there was one."""
    if len(path) == 1:
        return view.pop(path[0], None) is not None
    inner = view.get(path[0])
    if not isinstance(inner, dict):
        return False
    copied = dict(inner)
    if not _drop(copied, path[1:]):
        return False
    view[path[0]] = copied
    return True


def _without_nulls(value: Any) -> Any:
    """``value`` with every object's fields holding ``null`` left out, at any depth; ``value``
    itself when it holds none."""
    if isinstance(value, dict):
        view = {key: _without_nulls(inner) for key, inner in value.items() if inner is not None}
        same = len(view) == len(value) and all(view[key] is value[key] for key in view)
        return value if same else view
    if isinstance(value, list):
        items = [_without_nulls(inner) for inner in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


# -- version 1 -----------------------------------------------------------------------------


def _view_1(payload: dict[str, Any]) -> dict[str, Any]:
    """The view of scheme ``conversation-items/1``: ids, status, provider data, the message
    type, string content and empty ``annotations`` and ``logprobs`` lists only."""
    role = payload.get("role")
    content = payload.get("content")
    needs = (
        any(name in payload for name in IGNORED_FIELDS)
        or (role is not None and "type" not in payload)
        or (isinstance(content, str) and role in ROLE_PART_TYPES)
        or (isinstance(content, list) and any(_part_needs_1(part) for part in content))
    )
    if not needs:
        return payload
    view = {key: value for key, value in payload.items() if key not in IGNORED_FIELDS}
    if role is not None and "type" not in view:
        view["type"] = "message"
    if isinstance(content, str) and role in ROLE_PART_TYPES:
        view["content"] = [{"type": ROLE_PART_TYPES[role], "text": content}]
    elif isinstance(content, list):
        view["content"] = [_part_view_1(part) for part in content]
    return view


def _part_needs_1(part: Any) -> bool:
    return isinstance(part, dict) and any(part.get(name) == [] for name in _V1_EMPTY_PART_FIELDS)


def _part_view_1(part: Any) -> Any:
    if not _part_needs_1(part):
        return part
    return {
        key: value
        for key, value in part.items()
        if not (key in _V1_EMPTY_PART_FIELDS and value == [])
    }
