"""Conformance checks for your own journal, revisioned store or SDK session.

The contracts this package relies on, each an independent check that either passes, is
skipped (the object lacks a capability: no effect journal, no schema), or raises a
``ContractViolation`` naming the contract. Run them without pytest::

    report = await check_journal(MyJournal)      # or check_store, check_session
    print(report)
    report.raise_for_violations()

or as pytest tests, one per contract, by subclassing ``JournalContract``,
``RevisionedStoreContract`` or ``SessionContract`` (those need pytest; importing this package
does not)::

    class TestMyJournal(JournalContract):
        async def make_journal(self):
            return MyJournal()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._checks import check_journal, check_session, check_store
from ._core import (
    KINDS,
    Contract,
    ContractSkipped,
    ContractViolation,
    Report,
    Result,
    Subject,
    contracts,
)

if TYPE_CHECKING:
    from ._suites import JournalContract, RevisionedStoreContract, SessionContract

__all__ = [
    "KINDS",
    "Contract",
    "ContractSkipped",
    "ContractViolation",
    "JournalContract",
    "Report",
    "Result",
    "RevisionedStoreContract",
    "SessionContract",
    "Subject",
    "check_journal",
    "check_session",
    "check_store",
    "contracts",
]

# Shown (in tracebacks, reprs) where they are imported from.
for _public in (Contract, ContractSkipped, ContractViolation, Report, Result, Subject):
    _public.__module__ = __name__

_SUITES = frozenset({"JournalContract", "RevisionedStoreContract", "SessionContract"})


def __getattr__(name: str) -> Any:
    # The pytest classes import pytest: only when asked for.
    if name in _SUITES:
        from . import _suites

        return getattr(_suites, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
