"""The contracts as pytest tests: subclass one of these classes as ``Test...`` and say how to
make the object checked. Each contract is one test, named after it; a contract that does not
apply (a capability the object lacks) is skipped with the reason, and a broken one fails with
the ``ContractViolation`` naming it.

The tests are coroutines marked for pytest-asyncio where that plugin runs, and run their own
event loop where it does not.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final

import pytest

from ._checks import JOURNAL_KINDS, SESSION_KINDS, STORE_KINDS
from ._core import Contract, ContractSkipped, Subject, contracts

__all__ = ["JournalContract", "RevisionedStoreContract", "SessionContract"]

# pytest loads its plugins before it imports test modules (and this module with them): where
# pytest-asyncio runs, it has been imported by then.
_ASYNC: Final = "pytest_asyncio" in sys.modules


async def _run(found: Contract, subject: Subject) -> None:
    __tracebackhide__ = True
    try:
        await found.run(subject)
    except ContractSkipped as skipped:
        pytest.skip(skipped.reason)


def _test(found: Contract) -> Callable[..., Any]:
    test: Callable[..., Any]
    if _ASYNC:

        async def run_async(self: Any) -> None:
            await _run(found, self.contract_subject())

        test = pytest.mark.asyncio(run_async)
    else:

        def run_sync(self: Any) -> None:
            asyncio.run(_run(found, self.contract_subject()))

        test = run_sync
    test.__name__ = f"test_{found.name}"
    test.__qualname__ = f"test_{found.name}"
    test.__doc__ = found.statement
    return test


def _add_tests(cls: type[Any], kinds: Iterable[str]) -> None:
    for found in contracts(*kinds):
        setattr(cls, f"test_{found.name}", _test(found))


def _overrides(instance: Any, base: type[Any], name: str) -> bool:
    return getattr(type(instance), name) is not getattr(base, name)


class JournalContract:
    """Every journal contract (intent journal; effect and aside journal where offered) as a
    pytest test. Define ``make_journal``; ``another_journal`` and ``journal_with_newer_schema``
    are optional."""

    async def make_journal(self) -> Any:
        """A new, empty journal (closed after each test's check)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_journal()")

    async def another_journal(self, journal: Any) -> Any:
        """Another journal object on ``journal``'s data (a second worker), for the races and
        for reads across objects; without it the races run on ``journal`` alone and reads
        across objects are not checked."""
        raise NotImplementedError

    async def journal_with_newer_schema(self, journal: Any) -> Any:
        """Stamp a schema version newer than the journal knows on ``journal``'s migrated
        storage, and return a journal opened on it afterwards; that contract is skipped when
        this is not defined."""
        raise NotImplementedError

    def contract_subject(self) -> Subject:
        base = JournalContract
        return Subject(
            journal=self.make_journal,
            another=self.another_journal if _overrides(self, base, "another_journal") else None,
            newer_schema=(
                self.journal_with_newer_schema
                if _overrides(self, base, "journal_with_newer_schema")
                else None
            ),
        )


class RevisionedStoreContract:
    """Every revisioned store contract, and the plain session contracts, as pytest tests.
    Define ``make_store``; ``store_with_newer_schema`` is optional."""

    async def make_store(self, session_id: str) -> Any:
        """A store object for ``session_id``: two calls with one id are two workers on the same
        data (each test uses ids of its own)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_store()")

    async def store_with_newer_schema(self, store: Any) -> Any:
        """Stamp a newer schema version on ``store``'s migrated storage, and return a store
        object of the same session opened on it afterwards; that contract is skipped when this
        is not defined."""
        raise NotImplementedError

    def contract_subject(self) -> Subject:
        newer = _overrides(self, RevisionedStoreContract, "store_with_newer_schema")
        return Subject(
            store=self.make_store,
            session=self.make_store,
            newer_schema=self.store_with_newer_schema if newer else None,
        )


class SessionContract:
    """Every plain SDK ``Session`` contract as a pytest test. Define ``make_session``."""

    async def make_session(self, session_id: str) -> Any:
        """A session object for ``session_id`` (each test uses ids of its own)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_session()")

    def contract_subject(self) -> Subject:
        return Subject(session=self.make_session)


_add_tests(JournalContract, JOURNAL_KINDS)
_add_tests(RevisionedStoreContract, STORE_KINDS)
_add_tests(SessionContract, SESSION_KINDS)
