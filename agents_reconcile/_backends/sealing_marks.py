"""The mark of a sealed journal (its sealing component, ``JournalSealing``): the ids of the
payload keys a deployment seals under, kept by the journal itself.

What writes a sealed record (an append's intent, an effect's record, an operator's repair or
receipt) marks the journal first, under the keys of its keyring (``mark_sealed``), so that a
journal once sealed says so when no sealed record is left in it. What an operator writes into
a journal that holds a payload is checked against the mark first (``unsealed_write``): a
journal marked sealed takes it only sealed under a key the mark names, never readable and
never under a key the deployment does not hold. A journal never sealed holds no mark and
takes what it took before; a journal without the component (``sealing`` None) is left alone.
"""

from __future__ import annotations

import os
import weakref
from typing import Final

from .._core.sealing import SESSION_KEYS, Keyring, PayloadKey
from .journal import IntentJournal

__all__ = ["mark_sealed", "unsealed_write"]

_MARKED: Final[dict[tuple[int, str], set[str]]] = {}
"""What this process marked already, by journal storage (this package's engines name it in
their ``repr``): a mark is written once per journal and key, not once per wrapper."""
_MARKED_OBJECTS: Final[weakref.WeakKeyDictionary[object, set[str]]] = weakref.WeakKeyDictionary()
"""The same, for a journal of another package: by object."""


def _marked(journal: IntentJournal) -> set[str]:
    if type(journal).__module__.startswith("agents_reconcile._backends."):
        return _MARKED.setdefault((os.getpid(), f"{type(journal).__qualname__}:{journal!r}"), set())
    return _MARKED_OBJECTS.setdefault(journal, set())


async def mark_sealed(journal: IntentJournal, keyring: Keyring) -> None:
    """Mark ``journal`` sealed under ``keyring``'s payload keys, before a record sealed under
    one of them is written (nothing for a keyring without keys). Once per journal and key in
    a process: afterwards this costs a set lookup."""
    sealing = journal.sealing
    if not keyring or sealing is None:
        return
    wanted = {key.mark for key in keyring}
    done = _marked(journal)
    if wanted <= done:
        return
    await sealing.mark(sorted(wanted - done))
    done |= wanted


async def unsealed_write(journal: IntentJournal, key: PayloadKey | None) -> str | None:
    """Why a payload sealed with ``key`` (None: readable) may not be written into
    ``journal``, or None when it may: a journal marked sealed takes a payload only sealed
    under a key its mark names. Reads the mark; writes nothing."""
    sealing = journal.sealing
    if sealing is None:
        return None
    marked = await sealing.keys()
    if not marked or (key is not None and key.mark in marked):
        return None
    named = ", ".join(sorted(marked))
    if key is None:
        problem = (
            f"the journal is marked sealed (under keys {named}) and no payload key was given: "
            "what would be written would be readable in it"
        )
    else:
        problem = (
            f"the journal is marked sealed under keys {named}, and the payload key given "
            f"({key.key_id}) is not one of them: the deployment could not open what would be "
            "written"
        )
    if SESSION_KEYS in marked:
        problem += (
            f" ({SESSION_KEYS}: keys derived from each session's own EncryptedSession key; "
            "make the write from code with the session, which holds it)"
        )
    return problem
