"""Canonical bytes and digests of session items.

A digest is blake3 over the item's canonical bytes: orjson with sorted keys, after the SDK's
own normalisation of an input item (pydantic items dumped with ``exclude_unset``, the
SDK's session-only metadata keys removed, and ``id`` removed for sessions that declare
``_ignore_ids_for_matching``). The scheme's name is stored in every record, so a record
made under another scheme is never compared against digests made under this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import orjson
from blake3 import blake3

from .errors import FingerprintError

__all__ = [
    "FINGERPRINT_SCHEME",
    "canonical_bytes",
    "canonical_item",
    "digest_items",
    "item_digest",
]

FINGERPRINT_SCHEME: Final = "blake3-orjson-sorted/1"
"""Name and version of the digest scheme; part of every record's binding."""

# Keys the SDK strips before an item is replayed or compared (``strip_internal_input_item_metadata``
# in agents/run_internal/items.py). Items read back from a store still carry them, so a digest
# that kept them would differ between the batch we wrote and the same batch read back through a
# path that strips them.
_SESSION_ONLY_KEYS: Final = ("_agents_tool_description", "_agents_tool_title", "created_by")
_OPTIONS: Final = orjson.OPT_SORT_KEYS


def canonical_item(item: Any, *, ignore_ids: bool = False) -> Any:
    """Return the JSON-shaped form of ``item`` that digests and records are made from."""
    if isinstance(item, dict):
        payload: Any = item
    elif hasattr(item, "model_dump"):
        try:
            payload = item.model_dump(exclude_unset=True, mode="json", warnings=False)
        except TypeError:
            payload = item.model_dump(exclude_unset=True)
    else:
        return item
    if isinstance(payload, dict) and (
        (ignore_ids and "id" in payload)
        or "_agents_tool_description" in payload
        or "_agents_tool_title" in payload
        or "created_by" in payload
    ):
        payload = {
            key: value
            for key, value in payload.items()
            if key not in _SESSION_ONLY_KEYS and not (ignore_ids and key == "id")
        }
    return payload


def canonical_bytes(item: Any, *, ignore_ids: bool = False, index: int = 0) -> bytes:
    """Serialise one item canonically, or raise ``FingerprintError`` naming its position."""
    try:
        return orjson.dumps(canonical_item(item, ignore_ids=ignore_ids), option=_OPTIONS)
    except (TypeError, ValueError) as exc:
        raise FingerprintError(
            f"item {index} ({type(item).__name__}) cannot be serialised canonically: {exc}",
            index=index,
        ) from exc


def item_digest(item: Any, *, ignore_ids: bool = False, index: int = 0) -> str:
    """Digest of one item under ``FINGERPRINT_SCHEME`` (hex, 64 characters)."""
    return blake3(canonical_bytes(item, ignore_ids=ignore_ids, index=index)).digest().hex()


def digest_items(items: Iterable[Any], *, ignore_ids: bool = False) -> tuple[str, ...]:
    """Digests of a sequence of items, in order; the first unserialisable item raises."""
    return tuple(
        blake3(canonical_bytes(item, ignore_ids=ignore_ids, index=index)).digest().hex()
        for index, item in enumerate(items)
    )
