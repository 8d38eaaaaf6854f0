"""Intent and effect ids as an operator types them: the whole id, or any prefix of it that names
one thing in the journal (the demo and the tables print the first characters). A prefix that
names several is refused, listing them; one that names none is left as typed, for the command
to say what it found."""

from __future__ import annotations

from typing import Any, Final

from .._backends.rows import collecting_damage
from ..errors import ResolutionRefused

__all__ = ["full_id"]

_SHOWN: Final = 8
_RECENT: Final = 1000
"""How many of the newest decisions a prefix is looked for in (settled intents)."""


async def full_id(journal: Any, typed: str) -> str:
    """The id ``typed`` names: itself when an intent or effect has it whole, else the one id
    it begins (``ResolutionRefused`` when it begins several)."""
    typed = typed.strip()
    if not typed or await _known(journal, typed):
        return typed
    found = {ident for ident in await _candidates(journal) if ident.startswith(typed)}
    if len(found) == 1:
        return found.pop()
    if found:
        listed = ", ".join(sorted(found)[:_SHOWN]) + (", ..." if len(found) > _SHOWN else "")
        raise ResolutionRefused(
            f"{typed!r} begins {len(found)} ids ({listed}); type more of it", intent_id=typed
        )
    return typed


async def _known(journal: Any, ident: str) -> bool:
    if journal.aside is not None and await journal.aside.raw(ident) is not None:
        return True
    if journal.effects is not None and await journal.effects.get(ident) is not None:
        return True
    return bool(await journal.is_settled(ident))


async def _candidates(journal: Any) -> set[str]:
    found: set[str] = set()
    with collecting_damage() as damaged:
        found.update(entry.intent.intent_id for entry in await journal.pending(None))
        if journal.effects is not None:
            found.update(effect.key for effect in await journal.effects.started(None))
        found.update(d.intent_id for d in await journal.decisions(limit=_RECENT))
    found.update(record.ident for record in damaged)
    if journal.aside is not None:
        found.update(entry.intent_id for entry in await journal.aside.entries(limit=_RECENT))
    return found
