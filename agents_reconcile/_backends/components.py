"""The optional parts of a journal (components): each a protocol here, and an attribute of
the journal that holds one (``journal.aside``), ``None`` when the journal has none. An engine
builds its components from its own connection object (a file, a database, a link to a server)
and the journal's own keyring, so a component is one concept beside the core
(``IntentJournal``: intents, decisions, write counts, leases), never a slice of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, Protocol, TypeVar, runtime_checkable

from .._core.effect_records import Effect
from .._core.records import Decision, JournalEntry
from .._core.retention import Pruned, Retention
from .aside import RawIntent, SetAside

__all__ = [
    "COUNT_LIMIT",
    "JournalAside",
    "JournalEffects",
    "JournalPages",
    "JournalRetention",
    "JournalSealing",
    "Page",
]

_Row = TypeVar("_Row")

COUNT_LIMIT: Final = 1000
"""How many of the rows that follow a page a journal counts at most (``Page.more``): more than
that many unresolved intents is an operator's matter whatever the exact number, and counting
them all would make a page cost more as the journal grows."""


@dataclass(frozen=True)
class Page(Generic[_Row]):
    """One page of a journal's listing (``JournalPages``): at most ``limit`` rows in the order
    the journal lists them, what follows them, and where the next page starts."""

    rows: list[_Row]
    """The page's rows. Under ``collecting_damage`` a row that fails its checks is reported
    there and left out (the page then holds fewer), and the cursor moves past it all the
    same."""
    newest: dict[str, Decision] = field(default_factory=dict)
    """The newest decision about each row (by intent id, or effect key) that has one."""
    more: int = 0
    """How many rows follow this page in the listing (of the session asked, if one was),
    counted up to ``COUNT_LIMIT``: at that number, at least that many."""
    more_waiting: int = 0
    """Of the rows counted in ``more``, how many may wait for an operator: intents whose
    newest decision denied them or left them pending; effects begun before the time given as
    ``overdue_before``."""

    @property
    def counted_all(self) -> bool:
        """Whether ``more`` is every row that follows (below ``COUNT_LIMIT``), not a floor."""
        return self.more < COUNT_LIMIT

    after: str | None = None
    """The cursor that lists the next page (``after=``); None when nothing follows."""


@runtime_checkable
class JournalEffects(Protocol):
    """Tools' external effects (``agents_reconcile._effects``): an effect's intent before its
    tool body runs, and its receipt after. Every journal of this package has one; a journal
    without one (``effects`` None) cannot serve effect tools.

    A row per effect key: the key, its session, its state (``started``, ``done``), its owner,
    when it last changed, and the encoded ``Effect`` (its output sealed with the journal's
    keyring where payloads are sealed; signed where the deployment signs, checked on reading).
    An effect is not a session write: it takes no part in the write counts.
    """

    async def begin(self, effect: Effect) -> tuple[Effect, bool]:
        """Record ``effect`` (state started) unless its key is known; return the record the
        journal holds for the key afterwards, and whether this call recorded it. Atomic: of
        callers racing with one key, exactly one records."""
        ...

    async def restart(self, effect: Effect, *, expect_owner: str) -> bool:
        """Replace the started record of ``effect.key`` whose owner is ``expect_owner`` with
        ``effect`` (a new owner, one more attempt), for another run of the body; False (and
        nothing changed) when the key is unknown, done, or started under another owner."""
        ...

    async def finish(self, effect: Effect) -> Effect:
        """Store ``effect``'s receipt (state done) over the started record of its key, which
        must be owned by ``effect.owner``; return the stored record. The very same receipt
        again (a retried call whose reply was lost) is a no-op returning it; for a key that
        is unknown, done with another output, or started under another owner, raise
        ``IntentConflict``."""
        ...

    async def get(self, key: str) -> Effect | None:
        """The record of one effect key, or None."""
        ...

    async def of_session(self, session_id: str) -> list[Effect]:
        """Every effect of a session, oldest first."""
        ...

    async def started(self, session_id: str | None = None) -> list[Effect]:
        """The effects that are started and have no receipt, of one session (every session
        when None), in the order they were begun: those that may wait for an operator once
        their owner is gone. Reads only; the work grows with how many are started, not with
        how many effects the journal keeps. Under ``collecting_damage`` a row that fails its
        checks is reported there and left out, like ``pending``."""
        ...


@runtime_checkable
class JournalAside(Protocol):
    """Setting a damaged intent aside (``_backends/aside.py``): the row's bytes are kept as
    they were; ``entries`` reads their descriptions back, ``kept`` the bytes of one. Every
    journal of this package has one."""

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

    async def kept(self, intent_id: str) -> bytes | None:
        """The bytes kept when the intent ``intent_id`` was set aside, exactly as its row held
        them (sealed where the journal seals: never opened here), for an operator to check
        against the entry's digest; None when nothing of that intent is set aside (or its
        entry was pruned). Only reads."""
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


@runtime_checkable
class JournalPages(Protocol):
    """Listing a journal's unresolved intents and started effects a page at a time, each page
    in one step through an index, with the newest decision of each row and a count of what
    follows, so that an operator's ``status`` costs the same on a journal of a million
    sessions as on an empty one. Every journal of this package has one."""

    async def intents(
        self, *, limit: int, after: str | None = None, session_id: str | None = None
    ) -> Page[JournalEntry]:
        """Up to ``limit`` unresolved intents (of one session when given), those that follow
        the cursor ``after`` (from the first when None) in the journal's listing order: a
        total order the journal keeps the same from call to call, which it chooses (this
        package's SQL journals list by session, backend, creation time and id; Redis by
        session and id). Paging on with each page's ``after`` lists every intent exactly
        once; one recorded or settled meanwhile may be listed or not, any other is listed
        exactly once. A cursor this journal did not give raises ``ValueError``, and so does
        a ``limit`` below 1. Read in one step, whatever the journal holds beside the page
        (counting what follows reads at most ``COUNT_LIMIT`` index entries, no record)."""
        ...

    async def started_effects(
        self,
        *,
        limit: int,
        after: str | None = None,
        session_id: str | None = None,
        overdue_before: float | None = None,
    ) -> Page[Effect]:
        """Up to ``limit`` effects started with no receipt (of one session when given), those
        that follow the cursor ``after``, as ``intents`` lists intents (an empty page from a
        journal that keeps no effects); ``more_waiting`` counts those that follow the page
        and were begun (or last taken over) before ``overdue_before``, a time (none when
        None), by the journal's own record of when: one that keeps only when an effect was
        first begun counts by that, so more, never fewer."""
        ...

    async def counts_writes_of(self, session_id: str) -> bool:
        """Whether the journal holds a write count of ``session_id`` under any backend: the
        session had an append counted (and retention has not pruned its count since). An
        operator's command tells by it a session with nothing to decide from a name the
        journal never saw. Only reads, in one step."""
        ...


@runtime_checkable
class JournalRetention(Protocol):
    """Removing what a journal's retention lets go and no guarantee needs (the table in
    ``_core/retention.py``). Every journal of this package has one; the sealing mark is never
    removed."""

    async def prune(
        self, retention: Retention, *, limit: int | None = None, dry_run: bool = False
    ) -> Pruned:
        """Remove the decisions, set-aside entries, receipts and idle sessions' write counts
        older than ``retention`` keeps them, never one a guarantee still needs: a decision
        about an unresolved intent, a started effect, a receipt or the count of a session
        with an unresolved intent (its batch may hold an effect's output, checked against the
        receipt before the intent is accepted or replayed). Ages are judged on the journal's
        clock for what it stamps itself (receipts, counts, set-aside entries) and by
        ``decided_at`` for decisions. A pruned count raises the journal's floor to it
        (``write_count``) in the same atomic step.

        Each removal checks its rule again in the step that removes (a session counted, or an
        intent opened, since the call began keeps what it needs), so a pruner that is
        frozen, cancelled or on another host removes nothing still needed. ``limit``: at most
        that many rows of each kind are examined, oldest first (None: everything due); the
        answer's ``done`` is False while more may be due. ``dry_run``: count, remove nothing.
        """
        ...
