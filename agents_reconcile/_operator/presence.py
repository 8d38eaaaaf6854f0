"""Whether a name an operator gave is there at all: a session in a journal (which knows the
sessions it holds intents, decisions, tool effects, set-aside records or counted writes of) or
in a store (which knows the sessions it holds items of). A session that is there with nothing
to report (no decision, no damage) is a finding; one that is not there is ``NotFound``, said
plainly with exit 1, as ``show`` says of an id that names nothing, never "nothing found" with
exit 0, which a mistyped name would pass for.

The counted writes are read by session through the journal's pages component
(``pages.counts_writes_of``); a journal without one, whose counts can only be read with a
backend identity the command does not know, is never said to lack a session (``journal_holds``
answers None)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._backends.rows import collecting_damage
from ..errors import ReconcileError

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal

__all__ = ["NotFound", "journal_holds"]


class NotFound(ReconcileError):
    """Nothing by the name a command was given is where it looked: no intent, tool effect or
    set-aside record by an id in the journal, no session in the journal or in the store.
    Nothing was written. ``what`` (``id``, ``session``) and ``name`` say what was looked for."""

    def __init__(self, message: str, *, what: str, name: str) -> None:
        super().__init__(message)
        self.what = what
        self.name = name


async def journal_holds(journal: IntentJournal, session_id: str) -> str | None:
    """What the journal holds of ``session_id``, as words (``pending intents``,
    ``decisions``, ``tool effects``, ``set-aside records``, ``counted writes``); ``""`` when it
    holds nothing of it; None when it cannot tell (a journal whose counted writes cannot be
    read by session here). A row that cannot be read (damaged, sealed) counts as held."""
    with collecting_damage() as damaged:
        if await journal.pending(session_id):
            return "pending intents"
        if await journal.decisions(session_id=session_id, limit=1):
            return "decisions"
        if journal.effects is not None and await journal.effects.of_session(session_id):
            return "tool effects"
    if damaged:
        return "records that cannot be read here"
    if journal.aside is not None and await journal.aside.entries(session_id=session_id, limit=1):
        return "set-aside records"
    if journal.pages is None:
        return None
    return "counted writes" if await journal.pages.counts_writes_of(session_id) else ""
