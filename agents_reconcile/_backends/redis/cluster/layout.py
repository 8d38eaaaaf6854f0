"""Where a Redis journal on a Redis Cluster keeps what: 256 buckets, each laid out as a journal
of its own under one hash tag.

A script may touch only keys of one slot. A session's keys already share one (its hash tag);
the journal's global keys (``layout.GLOBAL_KEYS``, the effect index and started effects, the
set-aside keys) are touched by the same scripts, so each bucket keeps its own
copy of them beside the keys of the sessions in it: bucket ``N`` is everything under
``<prefix>:{bNNN}``, laid out exactly as a journal on one server under that prefix
(``JournalKeys.within``), e.g. ``<prefix>:{b017}:index`` and
``<prefix>:{b017}:{<32-hex session tag>}:intents``. A key's slot is that of its first hash tag,
``bNNN``: a bucket is one slot. A session's bucket is the first byte of the blake3 digest of its
id (the same digest its own tag is cut from), so every script of the journal runs unchanged,
given the bucket's global keys where it would be given the journal's.

One key per bucket has no counterpart on one server: ``claims``, a hash from an intent id to the
session that recorded it, kept in the bucket of the intent id itself (``homes.ClaimedHomes``).
"""

from __future__ import annotations

import re
from typing import Final

from blake3 import blake3

from ...addresses import checked_prefix
from ..layout import (
    ASIDE_KEYS,
    COUNTS,
    EFFECT_INDEX,
    EFFECT_KEYS,
    EFFECT_STARTED,
    GLOBAL_KEYS,
    RETIRED,
    SEALING,
    SESSION_KEYS,
    UPGRADED,
    JournalKeys,
)

__all__ = ["BUCKETS", "CLAIMS", "BucketKeys"]

BUCKETS: Final = 256
"""Buckets per journal: each one slot of the cluster, so a journal spreads over 256 slots."""
CLAIMS: Final = "claims"
_NUMBERS_KEPT: Final = 4096


def _tag(number: int) -> str:
    return f"b{number:03d}"


class BucketKeys(JournalKeys):
    """The key names of one journal on a Redis Cluster: a ``JournalKeys`` per bucket, and
    which bucket a session or an intent id is in.

    A session's keys (``session``, ``effects``, ``scripted``) come with its bucket's global
    keys; there are no journal-wide keys (``names`` and ``globals`` are empty: every global key
    is a bucket's, from ``bucket(n)``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = checked_prefix(prefix)
        self.names = {}
        self.globals = []
        self.version_key = f"{prefix}:{{b000..b{BUCKETS - 1:03d}}}:schema"
        self._buckets: dict[int, JournalKeys] = {}
        self._numbers: dict[str, int] = {}
        self._claims = [f"{prefix}:{{{_tag(n)}}}:{CLAIMS}".encode() for n in range(BUCKETS)]
        self._bucketed = re.compile(
            re.escape(prefix.encode())
            + rb":\{b([0-9]{3})\}:(?:(?:"
            + "|".join(
                (*GLOBAL_KEYS, EFFECT_INDEX, EFFECT_STARTED, UPGRADED, CLAIMS, *ASIDE_KEYS)
            ).encode()
            + rb")|\{[0-9a-f]{32}\}:(?:"
            + "|".join((*SESSION_KEYS, *RETIRED, *EFFECT_KEYS)).encode()
            + rb"))",
        )

    # -- buckets -----------------------------------------------------------------------------

    def bucket(self, number: int) -> JournalKeys:
        """Bucket ``number``'s keys, laid out as a journal's under ``<prefix>:{bNNN}``."""
        keys = self._buckets.get(number)
        if keys is None:
            keys = self._buckets[number] = JournalKeys.within(self.prefix, _tag(number))
        return keys

    def number(self, name: str) -> int:
        """The bucket of a session (or of an intent id, for its claim): the first byte of the
        blake3 digest of ``name``."""
        found = self._numbers.get(name)
        if found is None:
            found = blake3(name.encode("utf-8", "surrogatepass")).digest(length=1)[0]
            if len(self._numbers) >= _NUMBERS_KEPT:
                del self._numbers[next(iter(self._numbers))]
            self._numbers[name] = found
        return found

    def of(self, session_id: str) -> JournalKeys:
        """The keys of the bucket ``session_id`` is in."""
        return self.bucket(self.number(session_id))

    def claims(self, intent_id: str) -> list[bytes]:
        """The keys a claim of ``intent_id`` takes: the schema version and the claims of the
        intent id's own bucket."""
        number = self.number(intent_id)
        return [self.bucket(number).globals[0], self._claims[number]]

    def buckets(self) -> list[JournalKeys]:
        """Every bucket's keys, bucket 0 first."""
        return [self.bucket(number) for number in range(BUCKETS)]

    # -- as JournalKeys, each in the session's bucket -------------------------------------

    def session(self, session_id: str) -> list[bytes]:
        return self.of(session_id).session(session_id)

    def effects(self, session_id: str) -> list[bytes]:
        return self.of(session_id).effects(session_id)

    def scripted(self, session_id: str) -> list[bytes]:
        return self.of(session_id).scripted(session_id)

    def tagged(self, counts: bytes) -> list[bytes] | None:
        suffix = b":" + COUNTS.encode()
        if not counts.endswith(suffix) or not self.owns(counts):
            return None
        base = counts[: -len(suffix)]
        return [base + b":" + name.encode() for name in SESSION_KEYS]

    def bucket_of_key(self, key: bytes) -> int | None:
        """The bucket of a key laid out as this journal's (None for any other key)."""
        found = self._bucketed.fullmatch(key)
        return None if found is None else int(found.group(1))

    def counts_pattern(self) -> str:
        from ..backend import glob_escape

        return f"{glob_escape(self.prefix)}:{{b*}}:{{*}}:{COUNTS}"

    def owns(self, key: bytes) -> bool:
        # The sealing mark is one key of the whole journal, outside the buckets.
        return (
            self._bucketed.fullmatch(key) is not None or key == f"{self.prefix}:{SEALING}".encode()
        )
