"""Damaged intents set aside: an unresolved intent's row whose record fails its checks (edited,
truncated, signed by nobody this deployment trusts) blocks its session, because nothing can be
judged from it. An operator clears it by setting it aside: in one step the row leaves the
intents, its bytes are kept as they were beside a description of them (``SetAside``), and a
decision records who did it and why. The session then runs again, judged only by what the
journal still vouches for.

Nothing here reads the record's content: a description holds what the row's own columns say
(unverified), the digest and size of the bytes, and why they were refused.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from blake3 import blake3

from ..errors import JournalCorrupt

__all__ = ["RawIntent", "SetAside", "as_bytes", "raw_digest"]


def _seconds(value: object) -> float | None:
    """A finite number of seconds, or None (missing, unreadable, NaN or infinite)."""
    if value is None or value == "" or value == b"":
        return None
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


def as_bytes(record: object) -> bytes:
    """A record's bytes as a driver returned them (bytes, a buffer, or text a column of another
    type held), unchanged: what a set-aside entry's digest and size describe."""
    if isinstance(record, (bytes, bytearray, memoryview)):
        return bytes(record)
    if record is None:
        return b""  # a row without its record holds no bytes
    return str(record).encode("utf-8", "surrogatepass")


def raw_digest(record: bytes) -> str:
    """The digest of stored bytes, as a set-aside entry names them."""
    return "blake3:" + blake3(record).hexdigest()


@dataclass(frozen=True, slots=True)
class RawIntent:
    """An unresolved intent's row as stored, unchecked: its columns, its record's bytes, and
    ``stored``: the record, state, owner and update time exactly as the driver returned them,
    which ``set_aside`` compares before it moves the row (a renewal since the read, or any
    other change, leaves it where it is). ``age``: seconds since the row last changed, by the
    journal's clock where it tells one; a time that cannot be read counts as just renewed
    (``age_known`` False), so an unreadable row never looks long abandoned."""

    intent_id: str
    session_id: str
    backend: str
    state: str
    owner: str
    record: bytes
    age: float
    age_known: bool
    stored: tuple[object, ...]

    @classmethod
    def of_row(cls, row: Sequence[object], age: object = None) -> RawIntent:
        """From a row's intent id, session, backend, state, owner, update time and record, as a
        driver returns them (``age``: the journal's own, where it gives one)."""
        record = row[6]
        intent_id, session_id, backend, state, owner = (str(value) for value in row[:5])
        seconds = _seconds(age)
        if seconds is None:
            updated = _seconds(row[5])
            seconds = None if updated is None else time.time() - updated
        data = as_bytes(record)
        return cls(
            intent_id,
            session_id,
            backend,
            state,
            owner,
            record=data,
            age=seconds if seconds is not None else 0.0,
            age_known=seconds is not None,
            stored=(record, row[3], row[4], row[5]),
        )

    def held_for(self, now: float) -> float:
        """Seconds since the row last changed, as of its reading."""
        return self.age


@dataclass(frozen=True, slots=True)
class SetAside:
    """What an operator set aside: the row's columns as they were (unverified), the digest
    and size of its record's bytes, why they were refused, and who set them aside, when and
    why. The bytes themselves are kept beside it in the journal, never shown."""

    intent_id: str
    session_id: str
    backend: str
    state: str
    owner: str
    digest: str
    size: int
    problem: str
    actor: str
    reason: str
    set_aside_at: float

    @classmethod
    def of(cls, raw: RawIntent, *, problem: str, actor: str, reason: str, at: float) -> SetAside:
        return cls(
            intent_id=raw.intent_id,
            session_id=raw.session_id,
            backend=raw.backend,
            state=raw.state,
            owner=raw.owner,
            digest=raw_digest(raw.record),
            size=len(raw.record),
            problem=problem,
            actor=actor,
            reason=reason,
            set_aside_at=at,
        )

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decode(cls, data: object) -> SetAside:
        try:
            found: Any = orjson.loads(data if isinstance(data, (bytes, str)) else b"")
            fields = {name: found[name] for name in cls.__dataclass_fields__}
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise JournalCorrupt(f"a set-aside entry cannot be read ({exc})") from exc
        numbers = ("size", "set_aside_at")
        for name, value in fields.items():
            wanted = (int, float) if name in numbers else str
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise JournalCorrupt(f"a set-aside entry holds a {name} of the wrong type")
        return cls(**fields)

    def view(self) -> dict[str, Any]:
        """As commands print it: every field (none holds content)."""
        return asdict(self)
