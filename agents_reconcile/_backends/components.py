"""The optional parts of a journal (components): each a protocol here, and an attribute of
the journal that holds one (``journal.aside``), ``None`` when the journal has none. An engine
builds its components from its own connection object (a file, a database, a link to a server)
and the journal's own keyring, so a component is one concept beside the core
(``IntentJournal``: intents, decisions, write counts, leases), never a slice of it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .._core.records import Decision
from .aside import RawIntent, SetAside

__all__ = ["JournalAside"]


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
