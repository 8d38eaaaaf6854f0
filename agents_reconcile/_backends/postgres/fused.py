"""The PostgreSQL half of a fused append (``_session/fused.py``): the journal's ``open_intent``
(with the clearing of the previous acknowledged intent) and a revisioned PostgreSQL store's
compare-and-swap append as one statement, for a journal and a store in one database reached
as one role. The intent is recorded exactly when its batch is appended, in one round trip.

What the statement does, in order (each step a CTE; the order is forced by what each reads):

1. ``locked``: the session's row (its slot 0 in ``slots``), ``FOR UPDATE``. In READ COMMITTED
   a locking read waits for a concurrent writer and returns the newest version of the row, so
   this is the session's count as it stands, and whether its live intent is still the one to
   clear, in flight under this owner; nothing of the session can be opened, recorded, settled
   or counted until the statement commits.
2. ``seen``: what the statement's snapshot shows: the count, whether slot 0 holds the intent
   to clear, the session's unresolved intents (the one being cleared left out), whether the id
   was settled, the intent holding the id. The count is the fence of ``journal.py``: every
   transaction that gives the session an intent or takes one away counts a write under the
   same lock, so a snapshot count equal to the locked one means the snapshot shows the
   session's intents as they stand. When they differ (or the session has no row: not made
   yet, or its idle count pruned since, ``retention.py``), nothing but the clearing is done
   and the statement says ``fell``; the call then runs it again in a transaction that takes
   the lock first (making the row at the journal's floor when there is none), whose snapshot
   is taken after the lock was granted. Materialized, so each of these reads runs once:
   inlined into ``decided``, every column it reads twice would be a subquery of its own, run
   again.
3. ``store``: the store's session row, ``FOR UPDATE`` (after the journal's lock: every fused
   statement takes the two in this order, and no other statement takes both), its head as it
   stands.
4. ``decided``: the answer, in the order ``open_and_append.lua`` checks: the clearing was
   claimed meanwhile (``again``), the intent is not to be opened (``open``: held, blocked or
   settled), the count is past the run's (``stale_state``), the store's head is not the one
   expected (``head``), the write id is recorded (``known``); else ``go``.
5. ``head``: the store's compare-and-swap ``UPDATE``, only on ``go``; slot 0 takes the intent
   (``opened``, replacing the one cleared) from its ``RETURNING``, as the items and the write
   record do, so the intent is recorded exactly when the batch is appended; without it, slot
   0 only gives up the intent cleared (``emptied``). Slot 0 changes once either way (a row is
   changed at most once per statement), its count moved by the clearing and the opening
   together and stamped with the journal's clock (``counted_at``, by which pruning judges a
   session idle).

An id another transaction takes after the snapshot (an intent's id, the store's write id)
fails the whole statement on its unique index: nothing is done, and the call asks again, in
a new snapshot that shows it.

Each call first sends ``fast_statement``, the common case alone: the same checks (the ids
left to their unique indexes), as conditions of the count's ``UPDATE`` (those of slot 0 checked
again on the row it locks), every other write hanging off that row, in the same lock order.
It writes all of it or nothing; when it wrote nothing (something to answer: a refusal, an
intent in the way; or something moved meanwhile), the statement above answers, one round
trip more.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Final

from ..._core.ownership import Owner
from ..._core.records import PendingWrite
from ...errors import JournalCorrupt, JournalUnavailable
from ..fused import FailedAppend, Fused
from ..journal import IntentState, Opened
from ..store_items import encode_item
from .answers import _Asked, _compare, _count, _other_content
from .backend import Connection, quote
from .journal import PostgresJournal
from .retention import row_known
from .statements import (
    _NOW,
    EMPTY_SLOT,
    LIVE_INTENT,
    SETTLING,
    TAKEN,
    floor_of,
    intent_args,
    made_at_floor,
)
from .store import _forget_rows, _remember_row, _row_known

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .store import RevisionedPostgresSession

__all__ = [
    "Fused",
    "Pair",
    "fast_statement",
    "record_failed",
    "same_database",
]

_ATTEMPTS: Final = 4
# Unique indexes that fail the statement when another transaction took an id after its snapshot.
_TAKEN: Final = TAKEN | {"writes_write_id_key"}
_REFUSALS: Final = frozenset({"stale_state", "head", "known"})


@functools.lru_cache(maxsize=64)
def rows_statement(journal_schema: str, store_schema: str) -> str:
    """The session's rows made, each unless there: the journal's count at the floor ($1
    session, $2 backend), as ``lock_session`` makes it (the floor read ``FOR SHARE`` only when
    the row is missing), and the store's head at revision 0 ($3)."""
    j, t = quote(journal_schema), quote(store_schema)
    return (
        f"WITH head AS (INSERT INTO {t}.sessions (session_id, revision, next_seq)"
        " VALUES ($3, 0, 0) ON CONFLICT (session_id) DO NOTHING),"
        f" present AS (SELECT 1 FROM {j}.slots WHERE session_id = $1 AND backend = $2"
        " AND slot = 0)"
        f" INSERT INTO {j}.slots (session_id, backend, slot, write_count, counted_at)"
        f" {made_at_floor(j, '$1::text', '$2::text', 0)}"
        " ON CONFLICT (session_id, backend, slot) DO NOTHING"
    )


@functools.lru_cache(maxsize=64)
def statement(journal_schema: str, store_schema: str) -> str:
    """The fused statement for a journal in ``journal_schema`` and a store in ``store_schema``.

    $1..$8 the intent's columns as ``open_intent`` takes them (its state in flight), $9 the
    intent to clear (NULL for none), $10 the count the caller's run accounts for (NULL for
    any), $11 the store's session, $12 the items (JSON text), $13 the head expected, $14 the
    writer, $15 the time of the write record."""
    j, t = quote(journal_schema), quote(store_schema)
    intent_columns = "intent_id, session_id, backend, state, owner, updated_at, record"
    return (
        f"WITH locked AS MATERIALIZED (SELECT write_count,"
        " intent_id = $9 AND state = $4 AND owner = $5 AS clearable FROM"
        f" {j}.slots WHERE session_id = $2 AND backend = $3 AND slot = 0 FOR UPDATE),"
        f" blocking AS (SELECT {intent_columns}, created_at FROM {j}.intents"
        " WHERE session_id = $2 AND backend = $3 AND (slot <> 0 OR intent_id IS DISTINCT FROM $9"
        " OR state IS DISTINCT FROM $4 OR owner IS DISTINCT FROM $5)),"
        # The floor for a session without a row; NULL for a row without its count (damaged).
        " seen AS MATERIALIZED (SELECT CASE WHEN c.slot IS NULL THEN"
        f" {floor_of(j)} ELSE c.write_count END AS write_count,"
        " (SELECT write_count FROM locked) AS newest,"
        " coalesce(c.intent_id = $9 AND c.state = $4 AND c.owner = $5, false) AS clears,"
        " coalesce((SELECT clearable FROM locked), false) AS clearable,"
        " EXISTS (SELECT 1 FROM blocking) AS blocked,"
        f" EXISTS (SELECT 1 FROM {j}.decisions WHERE intent_id = $1 AND action IN {SETTLING})"
        " AS settled,"
        " p.record AS prior, p.session_id AS prior_session, p.backend AS prior_backend,"
        " p.state AS prior_state, p.owner AS prior_owner, p.updated_at AS prior_updated,"
        " p.fence AS prior_seq"
        f" FROM (SELECT 1) AS one LEFT JOIN {j}.slots AS c ON c.session_id = $2"
        f" AND c.backend = $3 AND c.slot = 0 LEFT JOIN {j}.intents AS p ON p.intent_id = $1),"
        f" store AS MATERIALIZED (SELECT revision FROM {t}.sessions"
        " WHERE session_id = $11::text AND EXISTS (SELECT 1 FROM locked) FOR UPDATE),"
        # The clearing is cleared when the snapshot shows it on slot 0 and the newest version
        # (``locked``) still holds it in flight under its owner.
        " decided AS (SELECT s.*, (s.clears AND s.clearable)::int AS cleared,"
        " h.revision AS head, CASE"
        " WHEN s.write_count IS NULL OR s.write_count < 0 OR s.newest < 0 THEN 'damaged'"
        " WHEN s.newest IS DISTINCT FROM s.write_count THEN 'fell'"
        " WHEN s.clears AND NOT s.clearable THEN 'again'"
        " WHEN s.prior IS NOT NULL OR s.blocked OR s.settled THEN 'open'"
        " WHEN $10::bigint IS NOT NULL"
        " AND s.write_count + (s.clears AND s.clearable)::int > $10::bigint THEN 'stale_state'"
        " WHEN h.revision IS NULL THEN 'missing'"
        " WHEN h.revision <> $13::bigint THEN 'head'"
        f" WHEN EXISTS (SELECT 1 FROM {t}.writes WHERE session_id = $11::text"
        " AND write_id = $1) THEN 'known'"
        " ELSE 'go' END AS word FROM seen AS s LEFT JOIN store AS h ON true),"
        f" head AS (UPDATE {t}.sessions AS r SET revision = r.revision + 1,"
        " next_seq = r.next_seq + cardinality($12::text[])"
        " WHERE r.session_id = $11::text AND r.revision = $13::bigint"
        " AND EXISTS (SELECT 1 FROM decided WHERE word = 'go')"
        " RETURNING r.revision, r.next_seq - cardinality($12::text[]) AS first_seq),"
        # The session's slot 0 changes once: it takes the intent (replacing the one cleared)
        # when the batch is appended, else it gives up the one cleared; its count moves with.
        f" opened AS (UPDATE {j}.slots AS w SET {LIVE_INTENT},"
        " fence = d.write_count + d.cleared, write_count = w.write_count + d.cleared + 1,"
        f" counted_at = {_NOW} FROM decided AS d, head"
        " WHERE w.session_id = $2 AND w.backend = $3 AND w.slot = 0 RETURNING w.intent_id),"
        f" emptied AS (UPDATE {j}.slots AS w SET {EMPTY_SLOT},"
        f" write_count = w.write_count + 1, counted_at = {_NOW} FROM decided AS d"
        " WHERE w.session_id = $2 AND w.backend = $3 AND w.slot = 0 AND d.cleared = 1"
        " AND d.word <> 'damaged' AND NOT EXISTS (SELECT 1 FROM head)),"
        f"{_batch_writes(t)}"
        " SELECT EXISTS (SELECT 1 FROM opened) AS added, d.settled,"
        " d.write_count + d.cleared AS write_count, d.prior, d.prior_session, d.prior_backend,"
        " d.prior_state, d.prior_owner, d.prior_updated, d.prior_seq,"
        " b.intent_id, b.session_id, b.backend, b.state, b.owner, b.updated_at, b.record,"
        " d.word, coalesce((SELECT revision FROM head), d.head) AS revision"
        " FROM decided AS d LEFT JOIN blocking AS b ON d.word = 'open'"
        " ORDER BY b.created_at, b.intent_id"
    )


def _batch_writes(store: str) -> str:
    """The store's part of both statements, after ``head`` moved the store's head: the items
    (``items``) and the write's record (``recorded``), each reading ``head``'s ``RETURNING``."""
    return (
        f" items AS (INSERT INTO {store}.items (session_id, seq, revision, item)"
        " SELECT $11::text, head.first_seq + batch.ord - 1, head.revision, batch.item"
        " FROM head, unnest($12::text[]) WITH ORDINALITY AS batch(item, ord)),"
        f" recorded AS (INSERT INTO {store}.writes"
        " (session_id, revision, write_id, writer, kind, count, at)"
        " SELECT $11::text, head.revision, $1, $14::text, 'append', cardinality($12::text[]),"
        " $15::float8 FROM head)"
    )


@functools.lru_cache(maxsize=64)
def fast_statement(journal_schema: str, store_schema: str) -> str:
    """The fused statement's fast path, taking the arguments of ``statement``: the common case
    (nothing blocks the intent, the head is the one expected) written, or nothing written.

    ``counted`` gives slot 0 the intent and moves the count, and only when what ``statement``
    decides by holds: slot 0 is empty or holds the intent to clear in flight under this owner,
    nothing is recorded beside it, the id was not settled, the head is the one expected, the
    count is not past the run's, and the count is the one the statement's snapshot shows. The
    conditions that read other rows are subqueries of the parameters alone, run once, in the
    snapshot; those of slot 0 are checked on the row the ``UPDATE`` locks, and again on its
    newest version when a concurrent writer of it committed meanwhile (READ COMMITTED). So a
    count that moved after the snapshot (every transaction that gives the session an intent or
    takes one away counts a write under that lock; a claim moves none) writes nothing: the
    snapshot shows the session's intents as they stand, as the full statement's ``fell`` check
    makes sure. It does not look up the two ids a unique index guards (the intent's, the
    store's write id): one already taken fails the statement whole on its index, which is the
    answer the full statement gives when another transaction takes one after the snapshot.

    Everything else hangs off ``counted``'s row, taking its locks in the full statement's order
    (the count, the head): ``head`` is the store's compare-and-swap, checked again on its newest
    version (a write of the store alone moves the head without the count), and the items and
    the write record read its ``RETURNING``. When slot 0 was written but the head then failed
    (another moved it after the snapshot), the statement raises a division by zero, so that
    nothing of it is kept; no row (``counted`` is 0) when a condition failed, nothing written.
    Either way the full statement answers."""
    j, t = quote(journal_schema), quote(store_schema)
    clears = "(c.intent_id IS NOT NULL)::int"
    return (
        f"WITH counted AS (UPDATE {j}.slots AS c SET {LIVE_INTENT},"
        f" fence = c.write_count + {clears}, write_count = c.write_count + {clears} + 1,"
        f" counted_at = {_NOW} WHERE c.session_id = $2 AND c.backend = $3 AND c.slot = 0"
        " AND c.write_count >= 0"
        " AND (c.intent_id IS NULL OR (c.intent_id = $9 AND c.state = $4 AND c.owner = $5))"
        f" AND ($10::bigint IS NULL OR c.write_count + {clears} <= $10::bigint)"
        f" AND c.write_count = (SELECT write_count FROM {j}.slots WHERE session_id = $2"
        " AND backend = $3 AND slot = 0)"
        f" AND NOT EXISTS (SELECT 1 FROM {j}.slots WHERE session_id = $2 AND backend = $3"
        " AND slot > 0)"
        f" AND NOT EXISTS (SELECT 1 FROM {j}.decisions WHERE intent_id = $1"
        f" AND action IN {SETTLING})"
        f" AND EXISTS (SELECT 1 FROM {t}.sessions WHERE session_id = $11::text"
        " AND revision = $13::bigint)"
        " RETURNING c.fence),"
        f" head AS (UPDATE {t}.sessions AS r SET revision = r.revision + 1,"
        " next_seq = r.next_seq + cardinality($12::text[])"
        " WHERE r.session_id = $11::text AND r.revision = $13::bigint"
        " AND EXISTS (SELECT 1 FROM counted)"
        " RETURNING r.revision, r.next_seq - cardinality($12::text[]) AS first_seq),"
        f"{_batch_writes(t)}"
        " SELECT c.fence AS write_count, h.revision,"
        " CASE WHEN h.revision IS NULL THEN 1 / (c.fence - c.fence) END AS undone"
        " FROM counted AS c LEFT JOIN head AS h ON true"
    )


async def same_database(journal: PostgresJournal, store: RevisionedPostgresSession) -> bool:
    """Whether the journal's pool and the store's reach one database as one role, as the
    server itself reports it (``backend.ServerIdentity``), so that one statement on the
    journal's connection reaches both: host names or addresses spelled apart, proxies and
    client options (an application name, timeouts) do not matter. Each side is read once per
    pool; a cluster seen started again since one side was read is read again on both."""
    here, there = await journal.server(), await store.server()
    if here is None or there is None:
        return False
    if here != there and here.restarted(there):
        here, there = await journal.server(fresh=True), await store.server(fresh=True)
    return here is not None and here == there


def _rows(items: Sequence[Any]) -> list[str]:
    """The items as the store keeps them."""
    return [encode_item(item, index).decode() for index, item in enumerate(items)]


class Pair:
    """A journal and a revisioned store in one database reached as one role
    (``same_database``), prepared once for their fused appends: the statements for their two
    schemas, and whether this pair made or met the session's two rows already."""

    __slots__ = ("fast", "full", "journal", "made", "store")

    def __init__(self, journal: PostgresJournal, store: RevisionedPostgresSession) -> None:
        self.journal = journal
        self.store = store
        self.fast = fast_statement(journal.schema, store.schema)
        self.full = statement(journal.schema, store.schema)
        self.made = False

    async def append(
        self,
        intent: PendingWrite,
        items: Sequence[Any],
        *,
        owner: Owner,
        clearing: str | None,
        seen_write_count: int | None,
    ) -> Fused:
        """``open_and_append`` of ``items`` as the store keeps them (its schema checked first),
        written by ``owner``."""
        await self.store.ready()
        return await self.open_and_append(
            intent,
            owner=owner,
            clearing=clearing,
            seen_write_count=seen_write_count,
            writer=str(owner),
            rows=_rows(items),
        )

    async def open_and_append(
        self,
        intent: PendingWrite,
        *,
        owner: Owner,
        clearing: str | None,
        seen_write_count: int | None,
        writer: str,
        rows: list[str],
    ) -> Fused:
        """``open_intent`` (in flight, under ``owner``, clearing ``clearing``) and the store's
        compare-and-swap append of ``rows`` at ``intent.expected_revision`` under the intent's
        id, as one statement. Nothing is recorded unless the append is made, and the reverse.
        ``seen_write_count``: refuse (record nothing) when the session's count is past it, as
        a stale run's append is refused.

        The fast path first (``fast_statement``); the full statement (``_answered``) only when
        it wrote nothing. A session this pair has not written yet gets its two rows first (the
        journal's count at the floor, the store's head at revision 0, each unless there), on
        the same connection: one more round trip, once. A count pruned after that is made
        again by the locked run."""
        assert intent.expected_revision is not None
        args = (
            *intent_args(intent, IntentState.IN_FLIGHT, owner),
            clearing,
            seen_write_count,
            self.store.session_id,
            rows,
            intent.expected_revision,
            writer,
        )
        found = await self.journal.database.run(functools.partial(self._fast, intent, args))
        if found:
            write_count, revision = _count(found[0]["write_count"]), found[0]["revision"]
            return Fused(Opened(recorded=True, write_count=write_count), revision=revision)
        # A check failed (or an id was taken meanwhile): nothing was written; the full
        # statement answers why, or appends in a snapshot that shows what changed.
        return await self._answered(intent, args, owner)

    async def _fast(
        self, intent: PendingWrite, args: tuple[object, ...], conn: Connection
    ) -> list[Any] | None:
        """The fast statement's rows: one when it wrote, none when it wrote nothing, None when
        an id was taken or the head or the clearing moved meanwhile (nothing was kept)."""
        driver = self.journal.database.driver
        await self._rows_made(intent, conn)
        try:
            return await conn.fetch(self.fast, *args, time.time())
        except driver.DivisionByZeroError:
            return None  # the head or the clearing moved meanwhile: nothing was kept
        except driver.UniqueViolationError as exc:
            if not _an_id_taken(exc):
                raise
            return None  # nothing was done; a new snapshot shows who took the id

    async def _full(
        self, intent: PendingWrite, args: tuple[object, ...], locked: bool, conn: Connection
    ) -> list[Any] | None:
        """The full statement's rows (``locked``: in a transaction that takes the session's
        lock first, making its row at the floor when there is none, so that its snapshot is
        taken after the lock was granted); None when an id was taken after its snapshot."""
        database = self.journal.database
        await self._rows_made(intent, conn)
        try:
            if not locked:
                return await conn.fetch(self.full, *args, time.time())
            async with conn.transaction():
                key = (intent.session_id, str(intent.backend))
                await conn.fetchval(database.sql.lock_session, *key)
                return await conn.fetch(self.full, *args, time.time())
        except database.driver.UniqueViolationError as exc:
            if not _an_id_taken(exc):
                raise
            return None  # nothing was done; a new snapshot shows who took the id

    async def _rows_made(self, intent: PendingWrite, conn: Connection) -> None:
        """The session's two rows, made unless this pair, or lately this process, made or met
        them. A hint only: a row gone since (pruned, its schema made anew) sends the append
        down the full statement, which makes it again."""
        if self.made:
            return
        journal, store = self.journal, self.store
        place = store.backend_namespace
        counted = (journal.location, journal.schema, intent.session_id, str(intent.backend))
        if not (_row_known(place, store.session_id) and row_known(counted)):
            sql = rows_statement(journal.schema, store.schema)
            await conn.execute(sql, *counted[2:], store.session_id)
            _remember_row(place, store.session_id)
            row_known(counted, made=True)
        self.made = True

    async def _answered(
        self, intent: PendingWrite, args: tuple[object, ...], owner: Owner
    ) -> Fused:
        """The full statement's answer, for an append its fast path did not write: run again
        under the session's lock while the fence fell or the clearing was claimed meanwhile."""
        journal, store = self.journal, self.store
        asked = _Asked(intent, IntentState.IN_FLIGHT, owner, None, journal.keyring)
        run = journal.database.run
        locked = made_again = False
        for _ in range(_ATTEMPTS):
            found = await run(functools.partial(self._full, intent, args, locked))
            if found is None:
                continue
            head = found[0]
            word = head["word"]
            if word == "damaged":
                raise JournalCorrupt(
                    f"session {intent.session_id!r}: its row in the journal holds no write"
                    f" count ({head['write_count']!r}); nothing was recorded or appended"
                )
            write_count = _count(head["write_count"])
            if head["added"]:
                opened = Opened(recorded=True, write_count=write_count)
                return Fused(opened, revision=head["revision"])
            if word == "open":
                answer = asked.answer(head, found, write_count)
                assert answer is not None  # held, blocked or settled: each has its answer
                return Fused(answer)
            if word in _REFUSALS:
                refused = Opened(recorded=False, write_count=write_count)
                return Fused(refused, refused=word, head=head["revision"] or 0)
            if word == "missing":
                # The store's row went (its schema made anew, an operator): made again, once.
                if made_again:
                    return Fused(
                        Opened(recorded=False, write_count=write_count), refused="head", head=0
                    )
                made_again = True
                _forget_rows(store.backend_namespace, store.session_id)
                self.made = False
                continue
            if word == "again" and locked:
                # Claimed by another between the snapshot and the clearing: build it again.
                return Fused(Opened(recorded=False, write_count=write_count))
            if word not in ("fell", "again"):
                raise JournalUnavailable(
                    f"a fused append of intent {intent.intent_id} answered {word}"
                )
            locked = True
        raise JournalUnavailable(
            f"intent {intent.intent_id}: its ids kept being taken meanwhile; nothing was recorded"
        )

    async def record_failed(
        self, intent: PendingWrite, *, state: IntentState, owner: Owner, clearing: str | None
    ) -> FailedAppend:
        """``record_failed`` for this pair's journal."""
        return await record_failed(
            self.journal, intent, state=state, owner=owner, clearing=clearing
        )


def _an_id_taken(exc: BaseException) -> bool:
    """Whether a unique violation is on an index that guards an id (``_TAKEN``)."""
    return getattr(exc, "constraint_name", None) in _TAKEN


async def record_failed(
    journal: PostgresJournal,
    intent: PendingWrite,
    *,
    state: IntentState,
    owner: Owner,
    clearing: str | None,
) -> FailedAppend:
    """Leave ``intent``, whose ``open_and_append`` (under ``owner``, clearing ``clearing``)
    raised, where the next use finds it: failed (or cancelled, ``state``) in the journal.

    One transaction, under the session's lock, so that no statement of the session runs
    between what it reads and what it writes. The statement may have committed (its reply
    lost): its intent, in flight, is moved to ``state``. It may not have: the intent is
    recorded as ``record`` records it, but only while no other intent of the session and
    backend is unresolved (``clearing``, in flight under ``owner``, aside), the check the
    statement makes. One that is refused the statement: never run, or run and refused, it
    wrote nothing, and it never will (a statement that ran before that intent was recorded
    finds the count moved under its lock; one that ran after finds it in its snapshot), so
    nothing is recorded (``FailedAppend.REFUSED``). Recording it anyway would leave two
    unresolved intents expecting one revision: the first one settled moves the head, and the
    other, whose batch was never written, would be judged extended by others."""
    row = intent_args(intent, state, owner)
    key = (intent.session_id, str(intent.backend))
    sql = journal.database.sql
    in_flight = IntentState.IN_FLIGHT.value
    move = sql.transition(True, True, False, False, False)

    async def work(conn: Connection) -> FailedAppend:
        async with conn.transaction():
            _count(await conn.fetchval(sql.lock_session, *key))
            found = await conn.fetchrow(sql.record_alone, *row, clearing)
            if found["added"]:
                return FailedAppend.RECORDED
            prior = found["prior"]
            if prior is not None:
                _compare(intent, prior, journal.keyring)
                held = (found["prior_state"], found["prior_owner"])
                if held == (in_flight, str(owner)):
                    # The statement committed: its intent moves from in flight to failed.
                    args = (state.value, str(owner), intent.intent_id, in_flight, str(owner))
                    await conn.fetchval(move, *args)
                    return FailedAppend.RECORDED
                if held == (state.value, str(owner)):
                    return FailedAppend.RECORDED  # this very call again, its reply lost
                return FailedAppend.TAKEN
            if found["settled"]:
                return FailedAppend.TAKEN
            if found["blocked"]:
                return FailedAppend.REFUSED
            # Taken after the snapshot by an intent of another session: not this one's.
            raise _other_content(intent)

    return await journal.database.run(work)
