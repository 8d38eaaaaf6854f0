"""Revisioned stores: the capability, and the exact rule it allows.

A revisioned store keeps, per session, a head revision and a record of writes. Each write
(an append, a pop, a clear) moves the head by one and is recorded with its revision, a write
id and who wrote it, in the same transaction as the items. With that, a pending write is
judged by facts rather than by looking at content:

- its write id is recorded (at the revision right after the one it expected) -> COMMITTED
- its replay after others' writes is recorded (under ``extended_write_id``)  -> COMMITTED
- not recorded, and the head is still the one it expected                     -> UNCHANGED
- not recorded, and the head moved through recorded writes of others           -> EXTENDED
- the record of writes is inconsistent (the head went back, revisions are
  missing, the write id sits somewhere it cannot be)                           -> AMBIGUOUS

``classify_revision`` is that rule, pure. ``ReconcilingSession`` detects the capability
(``is_revisioned``) and uses it instead of fingerprints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from .classify import Verdict
from .records import Outcome, Reason

__all__ = [
    "WRITES_CHECKED",
    "RevisionedStore",
    "WriteRecord",
    "classify_revision",
    "extended_write_id",
    "is_revisioned",
    "void_write_id",
]

WRITES_CHECKED: Final = 1000
"""How many writes of others a classification reads to vouch for an extension."""


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """One recorded write: the revision it produced, its id, who made it, and what it did."""

    revision: int
    write_id: str
    writer: str
    kind: str
    """``append``, ``pop`` or ``clear``."""
    count: int
    """Items appended or removed."""
    at: float


@runtime_checkable
class RevisionedStore(Protocol):
    """What a store offers beyond the SDK's ``Session`` to be judged exactly."""

    session_id: str

    async def head(self) -> int:
        """The session's head revision (0 for a session never written)."""
        ...

    async def append_if(
        self, items: list[Any], *, expected: int, write_id: str, writer: str
    ) -> int:
        """Append ``items`` only if the head is ``expected``, recording the write with its id,
        atomically; return the new head. Raises ``RevisionConflict`` (nothing written) when
        the head is another one, or when ``write_id`` is already recorded."""
        ...

    async def find_write(self, write_id: str) -> WriteRecord | None:
        """The recorded write with this id, if any."""
        ...

    async def writes_after(self, revision: int, *, limit: int = 100) -> list[WriteRecord]:
        """Recorded writes with revisions above ``revision``, oldest first, at most ``limit``."""
        ...


def extended_write_id(write_id: str) -> str:
    """The write id of a write's replay after others extended the history (policy
    ``on_extended="append"``). That replay lands after the others, not right after the head
    the write expected, so it carries an id of its own: found by it, it is told apart from a
    write recorded out of place, and the store refuses it a second time."""
    return f"{write_id}+extended"


def void_write_id(write_id: str) -> str:
    """The write id of the empty write that fences a store against a write closed without
    being written (an operator's abandon): it moves the head past the one the write expected,
    so the write's owner, if it was only frozen, is refused when it wakes."""
    return f"{write_id}+void"


def is_revisioned(session: object) -> bool:
    """Whether ``session`` offers the revisioned capability."""
    return isinstance(session, RevisionedStore)


def classify_revision(
    *,
    expected: int,
    write_id: str,
    head: int,
    found: WriteRecord | None,
    after: Sequence[WriteRecord],
    found_extended: WriteRecord | None = None,
) -> Verdict:
    """Judge a write made against ``expected`` with id ``write_id``, given the store's
    ``head``, the write's record if ``found``, its replay after an extension if
    ``found_extended`` (see ``extended_write_id``), and the writes recorded after ``expected``
    (``after``, oldest first, as many as were read)."""
    evidence: dict[str, Any] = {"expected_revision": expected, "head": head}
    if found_extended is not None:
        evidence["write_revision"] = found_extended.revision
        evidence["replayed_after_extension"] = True
        if found is not None:
            evidence["problem"] = "write recorded twice: as made and as replayed after others"
            return Verdict(Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN, evidence)
        if found_extended.revision <= expected + 1:
            evidence["problem"] = "replay after others recorded where no others could be"
            return Verdict(Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN, evidence)
        return Verdict(Outcome.COMMITTED, Reason.WRITE_FOUND, evidence)
    if found is not None:
        evidence["write_revision"] = found.revision
        if found.revision != expected + 1:
            evidence["problem"] = "write recorded at another revision than expected + 1"
            return Verdict(Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN, evidence)
        return Verdict(Outcome.COMMITTED, Reason.WRITE_FOUND, evidence)
    if head == expected:
        return Verdict(Outcome.UNCHANGED, Reason.WRITE_ABSENT, evidence)
    if head < expected:
        evidence["problem"] = "head revision went back"
        return Verdict(Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN, evidence)
    # ``after`` is read after ``head``, so it may run past it (others kept writing); it must
    # start right after ``expected``, have no gaps, and reach ``head`` (or fill the read).
    revisions = [record.revision for record in after]
    wanted = list(range(expected + 1, expected + 1 + len(revisions)))
    complete = len(revisions) >= head - expected
    if revisions != wanted or (not complete and len(revisions) < WRITES_CHECKED):
        evidence["problem"] = "revisions missing from the record of writes"
        evidence["recorded"] = revisions[:20]
        return Verdict(Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN, evidence)
    if any(record.write_id in (write_id, extended_write_id(write_id)) for record in after):
        evidence["problem"] = "write id recorded but not found by its id"
        return Verdict(Outcome.AMBIGUOUS, Reason.WRITE_RECORD_BROKEN, evidence)
    evidence["writers"] = sorted({record.writer for record in after})
    evidence["writes"] = max(head - expected, len(after))
    evidence["kinds"] = sorted({record.kind for record in after})
    return Verdict(Outcome.EXTENDED, Reason.EXTENDED_BY_OTHERS, evidence)
