"""The intent journal contract: where pending writes and decisions are kept."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from .._core.ownership import Owner
from .._core.records import (
    ACTIVE_STATES,
    BackendIdentity,
    Decision,
    IntentState,
    JournalEntry,
    Opened,
    PendingWrite,
    require_settling,
)
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .components import (
        JournalAside,
        JournalEffects,
        JournalPages,
        JournalRetention,
        JournalSealing,
    )

__all__ = [
    "ACTIVE_STATES",
    "JOURNAL_COMPONENTS",
    "JOURNAL_METHODS",
    "Capabilities",
    "IntentJournal",
    "IntentState",
    "JournalEntry",
    "Opened",
    "capabilities_of",
    "journal_gaps",
    "meant_as_journal",
    "require_journal",
    "require_limit",
    "require_settling",
]


@runtime_checkable
class IntentJournal(Protocol):
    """Durable store of unresolved intents and of the decisions that settled them.

    Implementations translate their driver's errors into ``JournalError`` subclasses and
    raise ``RecordError`` subclasses for records they cannot trust. A journal whose storage
    has no schema (one in memory) answers the schema methods with None from
    ``schema_version()`` and ``check()`` and ``[]`` from ``migrate()`` (``Unversioned``).

    The words the methods below use, as a journal must keep them:

    - **Unresolved**: an intent recorded (``record``, ``open_intent``) and neither acknowledged
      (``discard``) nor settled. ``pending`` and ``get`` list only these.
    - **Newest** (decisions): the one the journal stored last, by an order the journal itself
      assigns as it stores them (a sequence number, a list position, an insertion order),
      never by ``Decision.decided_at``, which is a writer's clock. ``note_again`` replaces a
      decision in place and keeps its position. Decisions about one intent are stored in the
      order their calls took effect (the journal serialises them: one session's writes never
      interleave); ``decisions`` lists newest first, ``newest_decisions`` and a page's
      ``newest`` give each intent's newest.
    - **Settled**: the journal holds a decision about the intent that settles it
      (``Decision.settled``: stored by ``settle``, or by ``aside.set_aside``). A settled
      intent is never unresolved again: ``record`` and ``open_intent`` of its id raise
      ``IntentConflict``, ``get`` answers None and ``is_settled`` True. **After a prune**
      (``journal.retention``) has removed every settling decision about it, the intent is no
      longer settled: the journal answers for its id as for an id it never saw (``get``
      None, ``is_settled`` False; its id may be recorded again). That is sound because
      pruning removes only decisions older than the retention keeps them, the wrapper never
      reuses an intent id, and it refuses a RunState's copy of an intent the journal no
      longer knows once that copy is older than the retention's ``runstates``. So a journal
      keeps no settled id without its decision: a copy of an abandoned write would pass as
      settled.
    - **Read consistency**: a journal may be reached through several objects, in several
      processes and hosts (``another_journal`` in the conformance suite). Every read through
      any of them (``pending``, ``get``, ``is_settled``, ``write_count``, ``decisions``,
      ``newest_decisions`` and the components' reads) sees every write whose call returned,
      through whichever object, before the read was made: no replica, cache or snapshot may
      answer a read that an earlier, returned write would change (a worker that misses
      another's finished write replays it out of order). A write not yet returned when the
      read begins may be seen or not, but whole: every write is atomic, so a read sees all of
      it or none (an intent and its count together; a settled intent's removal with its
      decision). A later read through the same object never goes back to a state older
      than one an earlier read saw.
    - **The journal's clock**: ``updated_at``, ``JournalEntry.age``, ``Effect.age`` and the
      retention's ages are the journal's own time, in seconds (the server's on a shared
      journal), never a time a writer put in a record (``PendingWrite.created_at``): a writer
      whose clock is behind must not make a live owner's intent look abandoned.
    - **``collecting_damage``**: the reads that list records (``pending``, ``decisions``,
      ``newest_decisions``, ``effects.started``, ``pages``' rows) run inside it when an
      operator inspects a journal. There, a row whose record fails its checks (an edited or
      unsigned record, one in another row than its own, one sealed under an unknown key) is
      reported to it and left out, so one damaged row hides no other; outside it, the same
      row fails the whole read (reconciliation fails closed). ``each`` does both; a journal
      that reads rows otherwise must do the same. ``get`` and the writes never collect: they
      raise.
    """

    async def record(self, intent: PendingWrite, *, state: IntentState, owner: Owner) -> None:
        """Store a new intent. The same id with the same content is a no-op; other content
        raises ``IntentConflict``; an id that was already settled raises it too."""
        ...

    async def open_intent(
        self,
        intent: PendingWrite,
        *,
        state: IntentState,
        owner: Owner,
        expect_write_count: int | None = None,
        clearing: str | None = None,
    ) -> Opened:
        """Record ``intent`` and count it as a write of its session, in one atomic step, only
        if its session and backend have no other unresolved intent and, when ``expect_write_count``
        is given, only if the session's write count is still that number. A refused opening
        writes nothing and counts nothing, so callers that retry cannot push each other's
        counts on forever.

        Idempotent: when ``intent``'s id is already unresolved in this journal (a retried call
        whose reply was lost), the same content, state and owner answer ``recorded`` with the
        count stored when it was first opened; other content raises ``IntentConflict``, and
        another state or owner is reported as blocking. A settled id raises ``IntentConflict``.

        ``clearing``: the id of an earlier intent whose append was acknowledged, forgotten first
        in the same atomic step, as ``discard`` does (counting a write of its session), so that
        an append in the steady state is one journal commit. It is cleared only while it is
        still in flight under ``owner`` in the same session and backend as ``intent`` (a
        claimed or moved intent is left alone); an unknown id changes nothing. Whatever the
        answer, the clearing has happened when the call returns.
        """
        ...

    async def write_count(self, session_id: str, backend: BackendIdentity) -> int:
        """How many writes of this session the journal has counted (intents recorded, their
        acknowledgements (``discard``), settlements, and ``count_write`` calls): a tail read
        when the count was N is current while it is N. A count never goes down: a journal
        that prunes idle sessions' counts (``journal.retention``) reads a session without one as
        the highest count it pruned, and counts its next write above that."""
        ...

    async def count_write(self, session_id: str, backend: BackendIdentity) -> int:
        """Count a write that is not an intent (a pop, a clear); return the new count."""
        ...

    async def transition(
        self,
        intent_id: str,
        *,
        state: IntentState,
        owner: Owner,
        expect_state: IntentState | None = None,
        expect_owner: Owner | None = None,
        expect_fence: int | None = None,
        expect_updated_at: float | None = None,
    ) -> bool:
        """Set state and owner if the intent is unresolved and matches what is expected
        (``expect_fence``: its fencing token; ``expect_updated_at``: its ``updated_at`` as read,
        so that a claim made on an expired lease fails if its holder renewed it since);
        return whether it changed (a compare-and-set).
        ``updated_at`` becomes the journal's time: the same state and owner again renews a
        holder's lease. A move to reconciling without ``expect_fence`` is a claim: the intent
        takes a new fencing token in the same step (one more than its last, and at least the
        session's write count), so every earlier holder's token is stale from then on; with
        it, a holder renews its claim under the token it has. A claim counts no write: a
        RunState's account of the session's writes does not move with who holds an intent."""
        ...

    async def discard(
        self, intent_id: str, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        """Forget an intent whose append was acknowledged (no decision is recorded), counting a
        write of its session in the same step: the write has landed, so a tail read while it
        was in flight (when the count already said it was opened) is out of date. An unknown
        id changes nothing. With ``owner`` (and ``fence``), only while that owner still holds
        it in flight (under that token), or when it is gone unsettled (discarded already: a
        retry); otherwise ``LeaseLost`` and nothing changes. That includes an intent settled:
        an owner whose lease ran out while another worker took the intent over and settled
        it is told so, in the same atomic step, never answered as if it still held it."""
        ...

    async def pending(
        self, session_id: str | None, backend: BackendIdentity | None = None
    ) -> list[JournalEntry]:
        """Unresolved intents of one session (every session when ``None``; one backend when
        given), oldest first (by ``PendingWrite.created_at``). Under ``collecting_damage``
        an intent whose record fails its checks is reported there and left out."""
        ...

    async def get(self, intent_id: str) -> JournalEntry | None:
        """One unresolved intent, or None when unknown or settled (a record that fails its
        checks raises its ``RecordError``, even under ``collecting_damage``)."""
        ...

    async def is_settled(self, intent_id: str) -> bool:
        """Whether the journal holds a decision that settled this intent (False for one
        unresolved, unknown, or whose settling decisions were all pruned)."""
        ...

    async def settle(
        self, decision: Decision, *, owner: Owner | None = None, fence: int | None = None
    ) -> None:
        """Close the decision's intent and store the decision, atomically, counting a write of
        the session (a replay wrote; a batch found committed may have come from one). With
        ``owner`` (and ``fence``), only while that owner still holds the intent's claim (state
        reconciling, under that token): a lost claim raises ``LeaseLost``, an intent settled
        already ``IntentConflict``. Idempotent: the very same decision again (a retried call
        whose reply was lost) is a no-op."""
        ...

    async def note(self, decision: Decision) -> None:
        """Store a decision that leaves its intent unresolved (a denial)."""
        ...

    async def note_again(self, previous: Decision, again: Decision) -> bool:
        """Replace the newest decision about ``previous``'s intent with ``again`` (the same
        decision, counted once more: ``Decision.repeats``, ``last_seen``), only while it is
        still ``previous``, byte for byte; whether it was (False, and nothing changed, when
        another decision about the intent came since, or there is none). ``again`` settles
        nothing, as ``note``'s."""
        ...

    async def decisions(
        self, *, session_id: str | None = None, intent_id: str | None = None, limit: int = 100
    ) -> list[Decision]:
        """Stored decisions, newest first (the journal's order of storing, as the class
        says), of one session or one intent when given, at most ``limit`` (below 1:
        ``ValueError``). Under ``collecting_damage`` a decision that fails its checks is
        reported there and left out."""
        ...

    async def newest_decisions(self, intent_ids: Sequence[str]) -> dict[str, Decision]:
        """The newest decision about each of ``intent_ids`` that has one (an id without a
        decision is left out), read in one step whatever their number (an operator's
        ``status`` makes one read, not one per pending intent). Under ``collecting_damage`` a
        decision that fails its checks is reported there and left out, as ``decisions``
        does."""
        ...

    async def close(self) -> None:
        """Release connections; a later operation may open them again."""
        ...

    async def schema_version(self) -> int | None:
        """The schema version the journal's storage holds (None when it holds none yet);
        writes nothing."""
        ...

    async def check(self) -> str | None:
        """None when the storage holds this release's schema; else a sentence saying what is
        missing or newer. Runs no DDL and writes nothing."""
        ...

    async def migrate(self) -> list[str]:
        """Create or upgrade the schema; return the steps applied (none when current). A
        newer schema is refused before anything touches it."""
        ...

    # Components: each an object of its own (``components.py``), None when the journal has
    # none. A plain attribute meets each (``aside = None`` declares there is none).

    @property
    def effects(self) -> JournalEffects | None:
        """Tools' external effects, their intents and receipts (``JournalEffects``), or None:
        effect tools are then refused."""
        ...

    @property
    def aside(self) -> JournalAside | None:
        """Setting damaged intents aside (``JournalAside``), or None."""
        ...

    @property
    def pages(self) -> JournalPages | None:
        """Listing unresolved intents and started effects a page at a time (``JournalPages``),
        or None: ``status`` then pages the whole listings itself."""
        ...

    @property
    def retention(self) -> JournalRetention | None:
        """Pruning what the retention lets go (``JournalRetention``), or None: the journal
        keeps everything."""
        ...

    @property
    def sealing(self) -> JournalSealing | None:
        """The mark of a sealed journal (``JournalSealing``), or None."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """How a journal behaves where ``IntentJournal`` leaves it a choice that the wrapper can use,
    declared by the journal as its class attribute ``capabilities`` (never guessed from the
    methods it happens to have): two flags. A journal that declares nothing has appends take
    the general path. What a journal offers beyond its core is a component (``effects``,
    ``aside``, ``pages``, ``retention``, ``sealing``), never a flag.

    - ``folds_clearing``: ``open_intent(clearing=...)`` clears the previous acknowledged intent
      as part of the opening (in its commit, or just before it on the same connection), so an
      append never meets its own previous intent.
    - ``starts_eagerly``: its calls capture nothing of the calling task, so one that answers
      at once may be started in the caller's task (``_core.cancellation.outliving_cancellation``).
    """

    folds_clearing: bool = False
    starts_eagerly: bool = False


NOTHING_MORE: Final = Capabilities()
"""What a journal that declares nothing is taken to do: neither flag."""


def capabilities_of(journal: object) -> Capabilities:
    """What ``journal`` declares it offers (``NOTHING_MORE`` when it declares nothing)."""
    declared = getattr(type(journal), "capabilities", None)
    return declared if isinstance(declared, Capabilities) else NOTHING_MORE


JOURNAL_METHODS: Final = (
    "record",
    "open_intent",
    "write_count",
    "count_write",
    "transition",
    "discard",
    "pending",
    "get",
    "is_settled",
    "settle",
    "note",
    "note_again",
    "decisions",
    "newest_decisions",
    "close",
    "schema_version",
    "check",
    "migrate",
)
"""The methods of ``IntentJournal``: every one the wrapper may call."""
JOURNAL_COMPONENTS: Final = ("effects", "aside", "pages", "retention", "sealing")
"""The components of ``IntentJournal``: attributes, each an object or None."""


def journal_gaps(journal: object) -> list[str]:
    """What ``journal`` lacks of ``IntentJournal`` (nothing: it is one), as a reader would
    write it: ``name()`` for a method, ``name`` for a component. A method where a component
    belongs (an earlier release's ``effects(session_id)``) is no component: it is a gap."""
    return [
        f"{name}()" for name in JOURNAL_METHODS if not callable(getattr(journal, name, None))
    ] + [
        name
        for name in JOURNAL_COMPONENTS
        if not hasattr(journal, name) or inspect.ismethod(getattr(journal, name))
    ]


def meant_as_journal(value: object) -> bool:
    """Whether ``value`` is meant as a journal (it records and opens intents), whatever else it
    lacks: one that lacks something is refused by ``require_journal``, saying what."""
    return all(callable(getattr(value, method, None)) for method in ("record", "open_intent"))


def require_journal(journal: object) -> None:
    """``ConfigurationError`` naming what ``journal`` lacks of ``IntentJournal``, and what to
    add, when it lacks anything: a journal written for an earlier release is refused before
    it is used, never met with an ``AttributeError`` in the middle of an append."""
    gaps = journal_gaps(journal)
    if not gaps:
        return
    methods = [gap for gap in gaps if gap.endswith("()")]
    components = [gap for gap in gaps if not gap.endswith("()")]
    add = []
    if methods:
        add.append(f"the method{'s' if len(methods) > 1 else ''} {', '.join(methods)}")
    if components:
        declared = ", ".join(f"{name} = None" for name in components)
        add.append(f"{' and '.join(components)} (the component, or {declared} for none)")
    if inspect.ismethod(getattr(journal, "effects", None)):
        add.append(
            "its effects as an object (a JournalEffects: begin, restart, finish, get, "
            "of_session, started), in place of the earlier release's methods begin_effect, "
            "restart_effect, finish_effect, effect, effects, started_effects"
        )
    raise ConfigurationError(
        f"journal {type(journal).__name__} is not an IntentJournal of this release: it lacks "
        f"{', '.join(gaps)}; add {'; and '.join(add)} (docs/backends.md: Adding a backend)"
    )


def require_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
