"""The optional parts of a journal (components): each a protocol here, and an attribute of
the journal that holds one (``journal.aside``), ``None`` when the journal has none. An engine
builds its components from its own connection object (a file, a database, a link to a server)
and the journal's own keyring, so a component is one concept beside the core
(``IntentJournal``: intents, decisions, write counts, leases), never a slice of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._core.records import Decision
from .aside import RawIntent, SetAside

__all__ = ["JournalAside", "JournalSealing"]


@runtime_checkable
class JournalAside(Protocol):
    """Setting a damaged intent aside (``_backends/aside.py``): the row's bytes are kept as
    they were; only its description is read back. Every journal of this package has one."""

    async def raw(self, intent_id: str) -> RawIntent | None:
        """The unresolved intent's row as stored, unchecked (None when unknown or settled)."""
        ...

    async def set_aside(self, raw: RawIntent, aside: SetAside, decision: Decision) -> bool:
        """In one atomic step, only while the intent's row still holds exactly ``raw``'s
        record, state and owner: remove the row, keep its bytes with ``aside``, store
        ``decision`` (which settles the intent) and count a write of the row's session.
        False, and nothing changed, when the row is gone or changed."""
        ...

    async def entries(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[SetAside]:
        """Set-aside entries, newest first (descriptions only, never the bytes)."""
        ...


@runtime_checkable
class JournalSealing(Protocol):
    """The journal's mark that it is sealed: the ids of the payload keys its deployment seals
    under (never key material), written before the first record sealed under a key is, and
    never removed (pruning leaves it), so that a journal once sealed is known to be sealed
    when no sealed record is left in it (every intent settled, every receipt pruned). An
    operator's write that would put a payload in it unsealed, or sealed under a key the mark
    does not name, is refused (``_backends/sealing_marks.py``). A journal never sealed holds
    no mark; dropping a journal drops its mark with it."""

    async def keys(self) -> frozenset[str]:
        """The key ids the journal is marked with (empty: never sealed). Only reads."""
        ...

    async def mark(self, key_ids: Sequence[str]) -> None:
        """Add ``key_ids`` to the mark (ids already there are left as they are)."""
        ...
