"""What every revisioned store shares: item encoding and the write records' shape."""

from __future__ import annotations

import uuid
from typing import Any, Final

import orjson

from ..errors import FingerprintError
from ..fingerprint import canonical_item

__all__ = ["ANONYMOUS", "decode_item", "encode_item", "new_write_id", "valid_limit"]

ANONYMOUS: Final = "session"
"""The writer named for writes made through the plain ``Session`` methods."""


def encode_item(item: Any, index: int = 0) -> bytes:
    """An item as the SDK's sessions keep it: its JSON text."""
    try:
        return orjson.dumps(item if isinstance(item, dict) else canonical_item(item))
    except TypeError as exc:
        raise FingerprintError(
            f"item {index} cannot be stored as JSON: {exc}", index=index
        ) from exc


def decode_item(raw: bytes | str) -> Any:
    return orjson.loads(raw)


def new_write_id() -> str:
    return uuid.uuid4().hex


def valid_limit(limit: int | None) -> int | None:
    """None or a non-negative count; the SDK passes None for 'everything'."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be None or a non-negative int, not {limit!r}")
    return limit
