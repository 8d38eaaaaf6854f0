"""Where the Redis journal keeps what: its key names, built once per prefix and session.

Every key sits under ``{prefix}:``. The journal's own keys come first in every script's
``KEYS`` (their order is ``GLOBAL.*`` in ``scripts/prelude.lua``), then a session's,
which share one hash tag: the first 32 hex digits of the blake3 digest of the session id, so
a session's keys stay together whatever characters its id holds.

The floor (the highest write count pruned, which a session without a count reads as) is a key
of its own, and each session's counts carry their stamp (``STAMP``) under the session's tag, so
that a layout for Redis Cluster can keep a floor per slot beside the sessions of that slot.

Effects keep to the same rule: their scripts take the global keys, then the effect
index and the started effects, then the effect keys of the effect's session, under that
session's hash tag.
"""

from __future__ import annotations

import re
from typing import Any, Final, Protocol

from blake3 import blake3

from ..addresses import checked_prefix

__all__ = [
    "ASIDE_KEYS",
    "COUNTS",
    "EFFECT_INDEX",
    "EFFECT_KEYS",
    "EFFECT_STARTED",
    "GLOBAL_KEYS",
    "INTENTS",
    "LISTING",
    "RETIRED",
    "ROW",
    "SESSION_KEYS",
    "STAMP",
    "UPGRADED",
    "IntentHomes",
    "JournalKeys",
    "KeyLayout",
    "listed",
    "packed_row",
    "unlisted",
    "unpacked_row",
]

GLOBAL_KEYS: Final = (
    "schema",
    "index",
    "settled",
    "seq",
    "log",
    "decided",
    "decision",
    "floor",
    "listing",
)
LISTING: Final = "listing"
"""A sorted set, every score 0: each unresolved intent as ``listed(session, id)``, so that a
page of all of them is one ``ZRANGEBYLEX`` from the cursor on, however many there are."""
INTENTS: Final = "intents"
"""The session key holding its unresolved intents: a hash from intent id to the intent's row,
all of it in one value (``ROW``), so that opening an intent is one ``HSET`` and removing it one
``HDEL``."""
SESSION_KEYS: Final = (INTENTS, "write_count", "decisions")
ROW: Final = re.compile(rb"(\S*) (\S*) (\S*) (\S*) ([0-9]+) ([0-9]+)\n")
"""The header of an intent's row in ``intents`` (``packed`` in ``prelude.lua``): its state, its
fencing token (empty for an intent ``record`` stored), when its state or owner last changed
(the server's clock), its ``created_at``, then how many bytes its backend identity and its
owner take; after the line, the backend identity, the owner and the encoded intent, back to
back."""
RETIRED: Final = ("open", "record", "backend", "state", "owner", "updated", "fence")
"""The session keys of the layouts before 4 (one hash per field of an intent): never written
now, but still this journal's keys, so that ``drop`` deletes a journal of such a layout, which
is refused."""
EFFECT_INDEX: Final = "effect_index"
"""A hash: effect key -> the session it belongs to (``effects.get(key)`` has only the key)."""
EFFECT_STARTED: Final = "effect_started"
"""A sorted set: the keys of the effects started and without a receipt, scored by when they
were begun (``effects.started()`` lists them without reading every effect kept)."""
EFFECT_KEYS: Final = (
    "effect_order",
    "effect_record",
    "effect_state",
    "effect_owner",
    "effect_updated",
)
"""A session's effect keys: the list of its effect keys, oldest first, then hashes from an
effect key to its encoded ``Effect``, its state, its owner and when it last changed."""
ASIDE_KEYS: Final = ("aside", "aside_record", "aside_order")
"""Damaged intents set aside (``aside.py``): a hash from a position to a description, one
from the same position to the bytes, and the list of intent ids in the order they were set
aside (the position is the index in it, from 1). Global keys, passed after a session's."""
COUNTS: Final = "write_count"
"""The session key holding its counts (a hash from backend identity to count): what the sweep
for idle counts looks for."""
STAMP: Final = ""
"""The field of a session's counts holding when one was last raised, on the server's clock (an
idle session's counts are pruned by it). No backend identity is empty, so it is never a
backend's; one field for the session keeps the cost of a stamp a field, not a key."""
SEALING: Final = "sealing"
"""A set: the ids of the payload keys this journal's records were ever sealed under (the
journal's mark that it is sealed, kept when no sealed record is left)."""
UPGRADED: Final = "upgraded"
"""A key of the layouts before 4 (when one of layout 1 was moved to 2): never written now, still
this journal's for ``drop``."""
_SESSIONS_KEPT: Final = 1024
_HOMES_KEPT: Final = 4096


def packed_row(
    *, state: str, fence: str, updated: str, created: str, backend: str, owner: str, record: bytes
) -> bytes:
    """An intent's row as ``intents`` holds it (``ROW``; ``packed`` in ``prelude.lua``)."""
    head = f"{state} {fence} {updated} {created} "
    parts = (backend.encode("utf-8", "surrogatepass"), owner.encode("utf-8", "surrogatepass"))
    return b"%s%d %d\n%s%s%s" % (head.encode(), len(parts[0]), len(parts[1]), *parts, record)


def unpacked_row(value: bytes) -> dict[str, Any] | None:
    """The parts of a row ``intents`` holds (``packed_row`` undone): ``state``, ``fence``,
    ``updated``, ``created``, ``backend`` and ``owner`` as text, ``record`` as bytes; None when
    ``value`` is not a row."""
    found = ROW.match(value)
    if found is None:
        return None
    state, fence, updated, created, backend, owner = found.groups()
    owner_at = found.end() + int(backend)
    record_at = owner_at + int(owner)
    return {
        "state": state.decode(),
        "fence": fence.decode(),
        "updated": updated.decode(),
        "created": created.decode(),
        "backend": value[found.end() : owner_at].decode("utf-8", "surrogatepass"),
        "owner": value[owner_at:record_at].decode("utf-8", "surrogatepass"),
        "record": value[record_at:],
    }


def listed(session_id: str, intent_id: str) -> bytes:
    """An unresolved intent's member of the listing (``listing_member`` in ``prelude.lua``):
    the session id with each byte 0 written as 1 1 and each byte 1 as 1 2, a byte 0, then the
    intent id; so each (session, id) is one member, and the first byte 0 ends the session."""
    session = session_id.encode("utf-8", "surrogatepass")
    escaped = session.replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x01")
    return escaped + b"\x00" + intent_id.encode("utf-8", "surrogatepass")


def unlisted(member: bytes) -> tuple[str, str]:
    """The (session, intent id) of a listing member (``listed`` undone)."""
    escaped, _, ident = member.partition(b"\x00")
    session = escaped.replace(b"\x01\x01", b"\x00").replace(b"\x01\x02", b"\x01")
    return session.decode("utf-8", "surrogatepass"), ident.decode("utf-8", "surrogatepass")


class KeyLayout(Protocol):
    """Where a journal keeps what, as its link and parts ask it: a number of buckets, each laid
    out as a ``JournalKeys`` (one on a server, ``JournalKeys`` itself; 256 on a cluster,
    ``cluster.layout.BucketKeys``), the bucket of a session or of an intent id's claim, and
    the keys a session's scripts take (its bucket's global keys, then its own)."""

    prefix: str
    version_key: str
    """The version key's name (on a cluster, the names of every bucket's, in short)."""

    def buckets(self) -> list[JournalKeys]:
        """Every bucket's keys, bucket 0 first."""
        ...

    def bucket(self, number: int) -> JournalKeys:
        """Bucket ``number``'s keys."""
        ...

    def number(self, name: str) -> int:
        """The bucket of a session (or of an intent id, for its claim)."""
        ...

    def of(self, session_id: str) -> JournalKeys:
        """The keys of the bucket ``session_id`` is in."""
        ...

    def session(self, session_id: str) -> list[bytes]:
        """A session's keys, in ``SESSION_KEYS`` order."""
        ...

    def effects(self, session_id: str) -> list[bytes]:
        """The keys every effect script takes for a session's effects."""
        ...

    def scripted(self, session_id: str) -> list[bytes]:
        """Its bucket's global keys, then the session's: what every script but settle takes."""
        ...

    def claims(self, intent_id: str) -> list[bytes] | None:
        """The keys a claim of ``intent_id`` takes (the version and the claims of its bucket);
        None where an id needs no claim (one bucket: its ``index`` says it for the journal)."""
        ...

    def tagged(self, counts: bytes) -> list[bytes] | None:
        """The keys of the session whose counts are at ``counts`` (None: not this journal's)."""
        ...

    def counts_pattern(self) -> str:
        """A ``SCAN`` pattern for every session's counts."""
        ...

    def bucket_of_key(self, key: bytes) -> int | None:
        """The bucket of a key laid out as this journal's (None for any other key)."""
        ...

    def owns(self, key: bytes) -> bool:
        """Whether ``key`` is laid out as one of this journal's."""
        ...


class JournalKeys:
    """The key names of one journal (one ``prefix``), encoded once rather than per command:
    the layout on one server (``KeyLayout``, one bucket), and each bucket's on a cluster."""

    def __init__(self, prefix: str) -> None:
        self._build(checked_prefix(prefix))

    @classmethod
    def within(cls, prefix: str, tag: str) -> JournalKeys:
        """The keys of a journal laid out under ``prefix:{tag}``, ``tag`` the hash tag of all of
        them (one bucket of a journal on Redis Cluster: ``cluster/layout.py``)."""
        keys = cls.__new__(cls)
        keys._build(f"{checked_prefix(prefix)}:{{{tag}}}")
        return keys

    def _build(self, prefix: str) -> None:
        self.prefix = prefix
        self.names = {name: f"{prefix}:{name}" for name in GLOBAL_KEYS}
        self.globals = [self.names[name].encode("utf-8") for name in GLOBAL_KEYS]
        self.version_key = self.names["schema"]
        for name in (EFFECT_INDEX, EFFECT_STARTED, UPGRADED, *ASIDE_KEYS):
            self.names[name] = f"{prefix}:{name}"
        self._effect_globals = [
            *self.globals,
            *(self.names[name].encode("utf-8") for name in (EFFECT_INDEX, EFFECT_STARTED)),
        ]
        self._sessions: dict[str, list[bytes]] = {}
        self._effects: dict[str, list[bytes]] = {}
        self._pattern: re.Pattern[bytes] | None = None

    # -- as a KeyLayout of one bucket ---------------------------------------------------------

    def buckets(self) -> list[JournalKeys]:
        return [self]

    def bucket(self, number: int) -> JournalKeys:
        return self

    def number(self, name: str) -> int:
        return 0

    def of(self, session_id: str) -> JournalKeys:
        return self

    def claims(self, intent_id: str) -> list[bytes] | None:
        return None

    def bucket_of_key(self, key: bytes) -> int | None:
        return 0 if self.owns(key) else None

    # -- a bucket's keys -----------------------------------------------------------------------

    def session(self, session_id: str) -> list[bytes]:
        """A session's keys, in ``SESSION_KEYS`` order."""
        return self._tagged(self._sessions, session_id, SESSION_KEYS)

    def effects(self, session_id: str) -> list[bytes]:
        """The keys every effect script takes: the global keys, the effect index, the started
        effects, then the session's effect keys in ``EFFECT_KEYS`` order (``effect_keys`` in
        ``prelude.lua``)."""
        return self._effect_globals + self._tagged(self._effects, session_id, EFFECT_KEYS)

    def _tagged(
        self, cache: dict[str, list[bytes]], session_id: str, names: tuple[str, ...]
    ) -> list[bytes]:
        keys = cache.get(session_id)
        if keys is None:
            tag = blake3(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
            keys = [f"{self.prefix}:{{{tag}}}:{name}".encode() for name in names]
            if len(cache) >= _SESSIONS_KEPT:
                del cache[next(iter(cache))]
            cache[session_id] = keys
        return keys

    def tagged(self, counts: bytes) -> list[bytes] | None:
        """The keys of the session whose counts are at ``counts`` (a key the sweep found), in
        ``SESSION_KEYS`` order; None when ``counts`` is not laid out as a session's counts of
        this journal. The session's id is not needed: its keys differ only by name."""
        suffix = b":" + COUNTS.encode()
        if not counts.endswith(suffix) or not self.owns(counts):
            return None
        base = counts[: -len(suffix)]
        return [base + b":" + name.encode() for name in SESSION_KEYS]

    def counts_pattern(self) -> str:
        """A ``SCAN`` pattern for every session's counts of this journal (``tagged`` checks
        each key found)."""
        from .backend import glob_escape

        return f"{glob_escape(self.prefix)}:{{*}}:{COUNTS}"

    def scripted(self, session_id: str) -> list[bytes]:
        """The global keys, then the session's: the layout every script but settle takes."""
        return self.globals + self.session(session_id)

    def owns(self, key: bytes) -> bool:
        """Whether ``key`` is laid out as one of this journal's (and not, say, a key of a
        journal whose prefix extends this one's)."""
        pattern = self._pattern
        if pattern is None:
            # Compiled when first needed: a cluster journal lays out 256 buckets this way.
            pattern = self._pattern = re.compile(
                re.escape(self.prefix.encode())
                + rb":(?:(?:"
                + "|".join(
                    (*GLOBAL_KEYS, EFFECT_INDEX, EFFECT_STARTED, UPGRADED, SEALING, *ASIDE_KEYS)
                ).encode()
                + rb")|\{[0-9a-f]{32}\}:(?:"
                + "|".join((*SESSION_KEYS, *RETIRED, *EFFECT_KEYS)).encode()
                + rb"))",
            )
        return pattern.fullmatch(key) is not None


class IntentHomes:
    """Where one journal object last saw each intent it recorded: a hint that spares a lookup
    of the session holding an intent, always checked by the script that uses it."""

    def __init__(self) -> None:
        # Oldest first, so the oldest go first.
        self._homes: dict[str, str] = {}

    def get(self, intent_id: str) -> str | None:
        return self._homes.get(intent_id)

    def remember(self, intent_id: str, session_id: str) -> None:
        homes = self._homes
        if intent_id not in homes and len(homes) >= _HOMES_KEPT:
            del homes[next(iter(homes))]
        homes[intent_id] = session_id

    def forget(self, intent_id: str) -> None:
        self._homes.pop(intent_id, None)

    def clear(self) -> None:
        self._homes.clear()
