"""The contracts run without pytest: each ``check_*`` runs every contract of its kinds on new
objects from the factories given, and returns a ``Report``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

# Imported for their contracts, which register themselves: in this order, which is the order
# ``contracts()`` lists each kind's in.
from . import (  # noqa: F401
    _aside,
    _effects,
    _effects_keyring,
    _journal,
    _journal_decisions,
    _journal_keyring,
    _journal_pages,
    _journal_reads,
    _journal_retention,
    _sealing,
    _session,
    _store,
)
from ._core import Report, Subject, contracts, run_all

__all__ = [
    "JOURNAL_KINDS",
    "SESSION_KINDS",
    "STORE_KINDS",
    "check_journal",
    "check_session",
    "check_store",
]

JOURNAL_KINDS = ("journal", "effects", "aside", "pages", "retention", "sealing")
"""What a journal is checked for: the intent journal contracts, and the effect, aside, pages,
retention and sealing ones where it offers them."""
STORE_KINDS = ("store", "session")
"""What a revisioned store is checked for: its own contracts, and a plain session's."""
SESSION_KINDS = ("session",)


async def check_journal(
    make_journal: Callable[..., Any | Awaitable[Any]],
    *,
    another: Callable[..., Any | Awaitable[Any]] | None = None,
    newer_schema: Callable[..., Any | Awaitable[Any]] | None = None,
    only: Iterable[str] | None = None,
) -> Report:
    """Check a journal against every journal contract (``JOURNAL_KINDS``).

    ``make_journal()``: a new, empty journal (a function or a coroutine function), called once
    per contract; each is closed after its check. ``another(journal)``: another journal object
    on ``journal``'s data (a second worker), for the races (else they race on one object) and
    for reads across objects (else that contract is skipped).
    ``newer_schema(journal)``: stamp a schema version newer than the journal knows on its
    migrated storage, and return a journal opened on it afterwards (else that contract is
    skipped). ``only``: the names of the contracts to run (all when None).
    """
    return await run_all(
        contracts(*JOURNAL_KINDS),
        lambda: Subject(journal=make_journal, another=another, newer_schema=newer_schema),
        only,
    )


async def check_store(
    make_store: Callable[..., Any | Awaitable[Any]],
    *,
    newer_schema: Callable[..., Any | Awaitable[Any]] | None = None,
    only: Iterable[str] | None = None,
) -> Report:
    """Check a revisioned store against the store contracts and the session contracts
    (``STORE_KINDS``).

    ``make_store(session_id)``: a store object for ``session_id``; two calls with one id are two
    workers on the same data. Each check uses session ids of its own. ``newer_schema(store)``:
    stamp a newer schema version on the store's migrated storage and return a store object of
    the same session opened on it afterwards (else that contract is skipped).
    """
    return await run_all(
        contracts(*STORE_KINDS),
        lambda: Subject(store=make_store, session=make_store, newer_schema=newer_schema),
        only,
    )


async def check_session(
    make_session: Callable[..., Any | Awaitable[Any]], *, only: Iterable[str] | None = None
) -> Report:
    """Check a plain SDK ``Session`` against the session contracts (``SESSION_KINDS``).

    ``make_session(session_id)``: a session object for ``session_id`` (each check uses ids of
    its own, so one store may serve every check).
    """
    return await run_all(contracts(*SESSION_KINDS), lambda: Subject(session=make_session), only)
