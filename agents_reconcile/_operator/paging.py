"""How ``status`` pages: a page of pending intents and a page of started effects at a time,
each read in one step from a journal's pages component (``journal.pages``: every journal of
this package has one), and the token that names the next page (``--after``).

The token carries each listing's own cursor (``Page.after``: the sort key of the last row
shown, never a position, so an intent settled between two pages moves no other from one page
to the next), or that the listing has nothing more, and the session the listing is of. It is
base64url, so it passes through a shell as printed.

A journal without one (``pages`` None) is paged here, from its whole listings: correct, and as
costly as reading them whole.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from .._backends.components import Page
from .._backends.pages import effects_in_memory, intents_in_memory
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .._backends.journal import IntentJournal, JournalEntry
    from .._core.effect_records import Effect

__all__ = [
    "DEFAULT_LIMIT",
    "Position",
    "effects_page",
    "pending_page",
]

DEFAULT_LIMIT: Final = 50
"""Rows of each listing ``status`` shows at once, unless ``--limit`` says otherwise."""
_VERSION: Final = 1


@dataclass(frozen=True)
class Position:
    """Where a ``status`` page starts: each listing's cursor (None: from its first row), and
    whether the listing is over (a page before showed its last row)."""

    session_id: str | None
    pending: str | None = None
    pending_over: bool = False
    effects: str | None = None
    effects_over: bool = False

    @classmethod
    def read(cls, token: str | None, session_id: str | None) -> Position:
        """The position ``token`` (``--after``) names; the first page when None. A token that
        ``status`` did not print, or printed for another ``--session``, is refused."""
        if token is None:
            return cls(session_id)
        try:
            padded = token + "=" * (-len(token) % 4)
            body = orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            body = None
        if not _is_token(body):
            raise ConfigurationError(
                f"--after {token!r} is not a page token: give the one status printed, as it "
                "printed it"
            )
        if body["s"] != session_id:
            listing = "every session" if body["s"] is None else f"session {body['s']!r}"
            raise ConfigurationError(
                f"--after names a page of the listing of {listing}: give the --session it was "
                "printed with"
            )
        return cls(
            session_id,
            pending=body["p"],
            pending_over=body["p"] is None,
            effects=body["e"],
            effects_over=body["e"] is None,
        )

    @staticmethod
    def token(session_id: str | None, pending: str | None, effects: str | None) -> str | None:
        """The token of the page after one whose listings continue at ``pending`` and
        ``effects`` (None: that listing is over); None when both are over."""
        if pending is None and effects is None:
            return None
        body = {"v": _VERSION, "s": session_id, "p": pending, "e": effects}
        return base64.urlsafe_b64encode(orjson.dumps(body)).decode("ascii").rstrip("=")


def _is_token(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and body.get("v") == _VERSION
        and set(body) == {"v", "s", "p", "e"}
        and all(body[key] is None or isinstance(body[key], str) for key in ("s", "p", "e"))
    )


async def pending_page(
    journal: IntentJournal, *, limit: int, after: str | None, session_id: str | None
) -> Page[JournalEntry]:
    """A page of the journal's unresolved intents: in one step from its pages component, else
    paged here from ``pending()``."""
    if journal.pages is not None:
        return await journal.pages.intents(limit=limit, after=after, session_id=session_id)
    return await intents_in_memory(
        await journal.pending(session_id),
        limit=limit,
        after=after,
        newest=journal.newest_decisions,
    )


async def effects_page(
    journal: IntentJournal,
    *,
    limit: int,
    after: str | None,
    session_id: str | None,
    overdue_before: float,
) -> Page[Effect]:
    """A page of the journal's started effects, as ``pending_page`` pages intents; an empty
    one from a journal that keeps no effects."""
    if journal.pages is not None:
        return await journal.pages.started_effects(
            limit=limit, after=after, session_id=session_id, overdue_before=overdue_before
        )
    if journal.effects is None:
        return Page(rows=[])
    return await effects_in_memory(
        await journal.effects.started(session_id),
        limit=limit,
        after=after,
        newest=journal.newest_decisions,
        overdue_before=overdue_before,
    )
