"""What ``show`` says about a batch without its content: per item its kind (type and role),
the tool it calls and the call id, its size and its digest; never a text, arguments or an
output. Enough to choose between ``committed`` and ``abandon`` without opening the store.

A record sealed under a key the operator did not give shows only what the seal leaves
readable (counts and digests); the same record shows its items once its key is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from .._core.records import PendingWrite

__all__ = ["item_shapes", "printable", "sealed_outline"]

# Fields that name an item without holding its content: never text, arguments or output.
_NAMING: Final = ("type", "role", "name", "call_id", "status")
_SHORT: Final = 120


def item_shapes(intent: PendingWrite) -> list[dict[str, Any]]:
    """One mapping per item of the batch, in order (``position`` from 0, as every position
    in ``--json``; the text counts from 1)."""
    return [
        _shape(position, item, digest)
        for position, (item, digest) in enumerate(
            zip(intent.batch, intent.batch_digests, strict=False)
        )
    ]


def _shape(position: int, item: Any, digest: str) -> dict[str, Any]:
    shape: dict[str, Any] = {"position": position}
    if isinstance(item, Mapping):
        for name in _NAMING:
            value = item.get(name)
            # ``name`` is a tool's only on a call; on a message it may be a person's.
            if name == "name" and not str(item.get("type", "")).endswith("_call"):
                continue
            if isinstance(value, str) and value:
                shape[name] = printable(value[:_SHORT])
        if "type" not in shape and "role" in shape:
            shape["type"] = "message"
    else:
        shape["type"] = type(item).__name__
    shape["size"] = _size(item)
    shape["digest"] = digest
    return shape


def printable(text: str) -> str:
    """``text`` with control characters escaped: nothing read from a journal drives the
    terminal it is printed on."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _size(item: Any) -> int:
    try:
        return len(orjson.dumps(item))
    except TypeError:
        return len(repr(item).encode())


def sealed_outline(record: bytes) -> dict[str, Any] | None:
    """What a sealed record's readable part says (unverified: its digest covers the sealed
    part too), or None when the bytes are no record at all."""
    try:
        body = orjson.loads(record)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, Mapping):
        return None
    sealed = body.get("sealed")
    digests = body.get("batch_digests")
    return {
        "items": len(digests) if isinstance(digests, Sequence) else None,
        "batch_digests": list(digests) if isinstance(digests, Sequence) else [],
        "sealed_under": sealed.get("kid") if isinstance(sealed, Mapping) else None,
        "verified": False,
    }
