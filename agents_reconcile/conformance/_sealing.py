"""The sealing component's contracts (``JournalSealing``), checked on a journal whose
``sealing`` is one; skipped, with the reason, on one whose ``sealing`` is None: an operator's
unsealed write into a journal once sealed is then not refused."""

from __future__ import annotations

from typing import Any, Final

from .._core.retention import Retention
from ._core import Subject, contract, require, skip
from ._journal import FAILED, journal_of, worker
from ._journal_retention import NO_RETENTION
from ._records import ME, make_intent

__all__: list[str] = []

_FIRST: Final = ("aaaa000000000001", "bbbb000000000002")
_SECOND: Final = ("bbbb000000000002", "cccc000000000003")


async def _sealing_journal(subject: Subject) -> Any:
    journal = await journal_of(subject)
    if journal.sealing is None:
        skip(
            "the journal has no sealing component (journal.sealing is None; a JournalSealing: "
            "keys, mark): a journal once sealed is not known to be"
        )
    return journal


async def _keys(journal: Any) -> frozenset[str]:
    found = await journal.sealing.keys()
    require(isinstance(found, frozenset), f"sealing.keys() answered {found!r}, not a frozenset")
    return found  # type: ignore[no-any-return]


@contract("sealing")
async def sealing_marks_only_add_up_and_read_back(subject: Subject) -> None:
    """A new journal holds no mark; ``sealing.mark(ids)`` adds the ids (those there already
    are left as they are, an empty list changes nothing), and ``sealing.keys()`` reads back
    every id ever added, from this journal object and from another on the same data."""
    journal = await _sealing_journal(subject)
    require(await _keys(journal) == frozenset(), "a new journal holds a sealing mark")
    await journal.sealing.mark(list(_FIRST))
    await journal.sealing.mark(list(_SECOND))
    await journal.sealing.mark([])
    expected = frozenset(_FIRST + _SECOND)
    found = await _keys(journal)
    require(found == expected, f"after marking {_FIRST} then {_SECOND}, keys() is {set(found)}")
    other = await worker(subject, journal)
    seen = await _keys(other)
    require(seen == expected, f"another journal object on the same data reads {set(seen)}")


@contract("sealing")
async def pruning_keeps_the_sealing_mark(subject: Subject) -> None:
    """``retention.prune()`` with every retention at zero leaves the sealing mark whole: a journal
    once sealed is known to be sealed when no sealed record is left in it."""
    journal = await _sealing_journal(subject)
    sealing = journal.sealing
    if journal.retention is None:
        skip(NO_RETENTION)
    await sealing.mark(list(_FIRST))
    intent = make_intent("i-1")
    await journal.record(intent, state=FAILED, owner=ME)
    await journal.retention.prune(Retention(0, 0, 0))
    found = await _keys(journal)
    require(found == frozenset(_FIRST), f"after retention.prune(), keys() is {set(found)}")
