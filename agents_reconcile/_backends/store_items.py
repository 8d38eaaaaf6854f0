"""What every revisioned store shares: item encoding and the write records' shape."""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

from .._core.fingerprint import canonical_item, exact_json
from .._core.records import new_write_id
from ..errors import FingerprintError

__all__ = ["ANONYMOUS", "decode_item", "encode_item", "new_write_id", "valid_limit"]

ANONYMOUS: Final = "session"
"""The writer named for writes made through the plain ``Session`` methods."""


def encode_item(item: Any, index: int = 0) -> bytes:
    """An item as the SDK's sessions keep it: its JSON text, NaN, infinities and lone
    surrogates included.

    ``FingerprintError`` for an item that would not read back equal (the journal's rule), so
    the store never holds a converted copy of what the caller gave."""
    try:
        element = item if isinstance(item, dict) else canonical_item(item)
    except (TypeError, ValueError) as exc:
        raise FingerprintError(
            f"item {index} ({type(item).__name__}) cannot be stored as JSON: {exc}", index=index
        ) from exc
    # An item holding a lone surrogate comes back as the stdlib's ASCII text, escapes and
    # all, as the SDK's sessions write it: UTF-8 cannot hold a surrogate, and the escapes
    # suit every store (PostgreSQL's text columns included).
    data, nonfinite, _ = exact_json(element, index=index, purpose="store")
    if nonfinite:
        # orjson writes these as null; the SDK's sessions (json.dumps) write NaN and Infinity
        # tokens, and so does this rare item, compact like orjson's text.
        text = json.dumps(element, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
        return text.encode()
    return data


def decode_item(raw: bytes | str) -> Any:
    """The item ``encode_item`` wrote (or any JSON text, with NaN and Infinity tokens or
    escaped lone surrogates)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        # orjson reads no NaN or Infinity token and no escaped lone surrogate: only an item
        # that holds one comes here.
        return json.loads(raw)


def valid_limit(limit: int | None) -> int | None:
    """None or a non-negative count; the SDK passes None for 'everything'."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be None or a non-negative int, not {limit!r}")
    return limit
