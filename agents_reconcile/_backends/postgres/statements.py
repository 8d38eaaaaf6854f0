"""The PostgreSQL journal's statements, built once per schema.

Why each is shaped as it is (the fence, the locked paths, one round trip per opening) is told
in ``journal.py``; asyncpg caches prepared statements by their text, so each variant below
is parsed and planned once per connection.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ..._core.ownership import Owner
    from ..._core.records import Decision, PendingWrite
    from ..journal import IntentState

__all__ = [
    "EMPTY_SLOT",
    "LIVE_INTENT",
    "SETTLING",
    "TAKEN",
    "EffectStatements",
    "JournalStatements",
    "decision_args",
    "floor_of",
    "intent_args",
    "made_at_floor",
]

SETTLING: Final = "('settled', 'replayed', 'dropped')"
_NOW: Final = "extract(epoch FROM clock_timestamp())::float8"
"""The journal's clock: the server's time, in seconds."""
EMPTY_SLOT: Final = (
    "intent_id = NULL, state = NULL, owner = NULL, updated_at = NULL, fence = NULL, record = NULL"
)
"""The assignments that take the intent off its slot (slot 0 then holds the count alone; its
``created_at``, the listings' order, is never NULL and stays as it was)."""
LIVE_INTENT: Final = (
    "intent_id = $1, state = $4, owner = $5, created_at = $6,"
    f" updated_at = coalesce({_NOW}, $7::float8), record = $8"
)
"""The assignments that give slot 0 the intent being opened ($1..$8, its columns as
``intent_args`` gives them; the server's clock stamps it, the writer's time only if it had
none); its ``fence`` is the caller's."""
TAKEN: Final = frozenset({"slots_intent_id", "slots_pkey"})
"""The unique indexes that fail a statement whose intent id, or the slot it gives an intent
recorded beside, another transaction took after its snapshot: nothing of it is kept."""


def floor_of(schema: str) -> str:
    """The journal's floor in ``schema`` (quoted), as an SQL expression: the highest count it
    pruned, what a session without a count reads as (``write_floor``)."""
    return f"(SELECT write_count FROM {schema}.write_floor WHERE id = 0)"


def made_at_floor(schema: str, session: str, backend: str, more: int) -> str:
    """The ``SELECT`` that makes a session's row, its slot 0 (``session``, ``backend``: SQL
    expressions), at the floor plus ``more``, stamped now, when the CTE ``present`` returned no
    row: the columns ``session_id, backend, slot, write_count, counted_at``. It reads the floor
    ``FOR SHARE``: the newest version, once a prune that holds it committed, kept from being
    raised until this statement's transaction ends, so a row is never made below a floor raised
    meanwhile. Nothing is locked when ``present`` found the row."""
    return (
        f"SELECT {session}, {backend}, 0, f.write_count + {more}, {_NOW}"
        f" FROM {schema}.write_floor AS f WHERE f.id = 0 AND NOT EXISTS (SELECT 1 FROM present)"
        " FOR SHARE OF f"
    )


def intent_args(intent: PendingWrite, state: IntentState, owner: Owner) -> tuple[object, ...]:
    """An intent's columns, in the order ``record`` and ``open_intent`` take them ($1..$8)."""
    return (
        intent.intent_id,
        intent.session_id,
        str(intent.backend),
        state.value,
        str(owner),
        intent.created_at,
        time.time(),
        intent.encode(),
    )


def decision_args(decision: Decision) -> tuple[object, ...]:
    """A decision's columns, in the order ``note`` and ``settle`` take them."""
    return (
        decision.intent_id,
        decision.session_id,
        str(decision.backend),
        decision.outcome.value,
        decision.reason.value,
        decision.action.value,
        decision.decided_at,
        decision.encode(),
    )


class EffectStatements:
    """The statements of tools' effects (``effects.py``), with the schema's quoted name in
    place: a table of their own, no session lock, no count."""

    def __init__(self, schema: str) -> None:
        s = schema
        # With the age by the server's clock, read in the same step (an effect's lease is
        # judged on the journal's clock, never a writer's).
        effect_columns = f"key, session_id, state, owner, record, {_NOW} - updated_at AS age"
        returned = "key, session_id, state, owner, record, age"
        self.effect = f"SELECT {effect_columns} FROM {s}.effects WHERE key = $1"
        self.effects = (
            f"SELECT {effect_columns} FROM {s}.effects WHERE session_id = $1"
            " ORDER BY created_at, key"
        )
        # The started effects (partial index effects_started), every session's or one's.
        started = f"SELECT {effect_columns} FROM {s}.effects WHERE state = 'started'"
        self.started_effects = f"{started} ORDER BY created_at, key"
        self.started_effects_of = f"{started} AND session_id = $1 ORDER BY created_at, key"
        # Records the key unless it is known, and answers with the row held either way. A row
        # that another transaction committed after this statement's snapshot stops the INSERT
        # but is not seen by the SELECT: then no row comes back, and the caller reads it
        # afresh (self.effect, a new statement, a new snapshot).
        # Stamped with the journal's clock (the server's).
        self.begin_effect = (
            f"WITH added AS (INSERT INTO {s}.effects (key, session_id, state, owner,"
            f" created_at, updated_at, record) VALUES ($1, $2, 'started', $3, {_NOW}, {_NOW},"
            f" $4) ON CONFLICT (key) DO NOTHING RETURNING {effect_columns})"
            f" SELECT true AS added, {returned} FROM added"
            f" UNION ALL SELECT false AS added, {effect_columns} FROM {s}.effects"
            " WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM added)"
        )

        # Compare-and-set on the started row of the key, its session and its owner ($1..$3):
        # the server re-checks the WHERE on the newest version of the row, so of two racing
        # updates at most one matches. Each returns a row only when it changed one.
        def effect_update(assignments: str) -> str:
            return (
                f"UPDATE {s}.effects SET {assignments}"
                " WHERE key = $1 AND session_id = $2 AND owner = $3 AND state = 'started'"
                " RETURNING 1"
            )

        # A takeover is stamped with the journal's clock: the new owner's lease runs from it.
        self.restart_effect = effect_update(f"owner = $4, updated_at = {_NOW}, record = $5")
        # A receipt is stamped on the journal's clock (the writer's time only if it had none):
        # pruning judges its age by it.
        self.finish_effect = effect_update(
            f"state = 'done', updated_at = coalesce({_NOW}, $4::float8), record = $5"
        )


class JournalStatements(EffectStatements):
    """Every statement the journal runs, with its schema's quoted name in place."""

    def __init__(self, schema: str) -> None:
        super().__init__(schema)
        s = self.schema = schema
        intent_columns = "intent_id, session_id, backend, state, owner, updated_at, record"
        # With the fencing token and the age by the server's clock (leases are judged on the
        # journal's clock, never a writer's).
        self.select_intents = (
            f"SELECT {intent_columns}, fence, {_NOW} - updated_at AS age FROM {s}.intents"
        )
        floor = floor_of(s)
        slots = f"{s}.slots"
        # A session's row is its slot 0, which holds its count (and its live intent).

        def on_session_row(more: int) -> str:
            # Takes the session's row lock and returns its count, raised by `more` (and then
            # stamped): the row as it stands when there is one (an UPDATE waits for its lock
            # and reads the newest version), else made at the floor plus `more`; the upsert
            # locks a row another transaction made meanwhile, the newest version of it too.
            stamp = f", counted_at = {_NOW}" if more else ""
            return (
                f"WITH present AS (UPDATE {slots} SET write_count = write_count + {more}{stamp}"
                " WHERE session_id = $1 AND backend = $2 AND slot = 0 RETURNING write_count),"
                f" made AS (INSERT INTO {slots} AS w (session_id, backend, slot, write_count,"
                f" counted_at) {made_at_floor(s, '$1::text', '$2::text', more)}"
                " ON CONFLICT (session_id, backend, slot)"
                f" DO UPDATE SET write_count = w.write_count + {more}{stamp}"
                " RETURNING w.write_count)"
                " SELECT write_count FROM present UNION ALL SELECT write_count FROM made"
            )

        # The lock alone, nothing counted: a session without a row gets one at the floor.
        self.lock_session = on_session_row(0)
        # The floor only for a session without a row: a row without its count is damaged,
        # and reads as NULL (refused).
        self.write_count = (
            f"SELECT CASE WHEN c.slot IS NULL THEN {floor} ELSE c.write_count END"
            f" FROM (SELECT 1) AS one LEFT JOIN {slots} AS c ON c.session_id = $1"
            " AND c.backend = $2 AND c.slot = 0"
        )
        self.count_write = on_session_row(1)
        settled_check = (
            f"SELECT EXISTS (SELECT 1 FROM {s}.decisions"
            f" WHERE intent_id = $1 AND action IN {SETTLING}) AS settled"
        )

        # An intent recorded beside its session's live one takes the slot after the session's
        # last; read in the statement's snapshot, which shows the session's slots as they stand
        # (the session's lock is held, or its count still stands once locked).
        next_slot = (
            f"(SELECT coalesce(max(slot), 0) + 1 FROM {slots}"
            " WHERE session_id = $2 AND backend = $3)"
        )

        def insert_intent(fence: str) -> str:
            return (
                f"INSERT INTO {slots} (intent_id, session_id, backend, slot, state, owner,"
                " created_at, updated_at, record, fence)"
                f" SELECT $1::text, $2::text, $3::text, {next_slot}, $4::text, $5::text,"
                # The server's clock stamps it; the writer's time ($7) only if it had none.
                f" $6::float8, coalesce({_NOW}, $7::float8), $8::bytea, {fence}"
            )

        # An intent id is unique across the slots that hold one (the index slots_intent_id).
        id_free = "ON CONFLICT (intent_id) WHERE intent_id IS NOT NULL DO NOTHING"
        count_added = (
            f"UPDATE {slots} SET write_count = write_count + 1, counted_at = {_NOW}"
            " WHERE session_id = $2 AND backend = $3 AND slot = 0"
            " AND EXISTS (SELECT 1 FROM added)"
        )
        # The locked paths: run after lock_session, so the snapshot is fresh and the settled
        # check and the prior copy are what the last holder of the lock left.
        self.record_locked = (
            f"WITH done AS ({settled_check}),"
            f" prior AS (SELECT record FROM {s}.intents WHERE intent_id = $1),"
            f" added AS ({insert_intent('0')}"
            " WHERE NOT (SELECT settled FROM done) AND NOT EXISTS (SELECT 1 FROM prior)"
            f" {id_free} RETURNING intent_id),"
            f" counted AS ({count_added})"
            " SELECT (SELECT settled FROM done) AS settled,"
            " EXISTS (SELECT 1 FROM added) AS added,"
            " (SELECT record FROM prior) AS prior"
        )
        # A one-step append that raised (fused.py), recorded failed as record_locked records
        # it, but only while the session and backend have no other unresolved intent (the one
        # that append was to clear, $9, still in flight under its owner $5, aside), the check
        # open_locked makes: an intent in the way refuses that append, so its batch was never
        # written. Run after lock_session, so the snapshot shows what the lock's last holder
        # left; the intent holding the id comes back with its state and owner.
        self.record_alone = (
            f"WITH done AS ({settled_check}),"
            f" prior AS (SELECT record, state, owner FROM {s}.intents WHERE intent_id = $1),"
            f" blocking AS (SELECT 1 FROM {s}.intents WHERE session_id = $2 AND backend = $3"
            " AND intent_id <> $1 AND (intent_id IS DISTINCT FROM $9"
            " OR state IS DISTINCT FROM 'in_flight' OR owner IS DISTINCT FROM $5)),"
            f" added AS ({insert_intent('0')}"
            " WHERE NOT (SELECT settled FROM done) AND NOT EXISTS (SELECT 1 FROM prior)"
            " AND NOT EXISTS (SELECT 1 FROM blocking)"
            f" {id_free} RETURNING intent_id),"
            f" counted AS ({count_added})"
            " SELECT (SELECT settled FROM done) AS settled,"
            " EXISTS (SELECT 1 FROM added) AS added,"
            " EXISTS (SELECT 1 FROM blocking) AS blocked,"
            " p.record AS prior, p.state AS prior_state, p.owner AS prior_owner"
            " FROM (SELECT 1) AS one LEFT JOIN prior AS p ON true"
        )
        # What open_intent answers from, the same in both of its statements: flags, the count,
        # the intent holding the id (NULL columns when none does), then the unresolved intents
        # of the session and backend, one per row (oldest first; one row of NULLs when none).
        prior_columns = (
            "p.record AS prior, p.session_id AS prior_session, p.backend AS prior_backend,"
            " p.state AS prior_state, p.owner AS prior_owner, p.updated_at AS prior_updated,"
            " p.fence AS prior_seq"
        )
        blocking_columns = (
            "b.intent_id, b.session_id, b.backend, b.state, b.owner, b.updated_at, b.record"
        )
        # Opens the intent on the session's slot 0 (made by lock_session), its count moved in
        # the same UPDATE, only when the id is free, the session and backend have no
        # unresolved intent, the id was never settled and the count ($9, read under the lock)
        # is the one expected ($10, NULL for any). An id another session takes after the
        # snapshot fails the statement on slots_intent_id.
        self.open_locked = (
            f"WITH blocking AS (SELECT {intent_columns}, created_at FROM {s}.intents"
            " WHERE session_id = $2 AND backend = $3),"
            f" done AS ({settled_check}),"
            " prior AS (SELECT record, session_id, backend, state, owner, updated_at, fence"
            f" FROM {s}.intents WHERE intent_id = $1),"
            f" added AS (UPDATE {slots} SET {LIVE_INTENT}, fence = $9::bigint,"
            f" write_count = write_count + 1, counted_at = {_NOW}"
            " WHERE session_id = $2 AND backend = $3 AND slot = 0"
            " AND NOT EXISTS (SELECT 1 FROM blocking) AND NOT (SELECT settled FROM done)"
            " AND NOT EXISTS (SELECT 1 FROM prior) AND coalesce($10::bigint, $9::bigint) = $9"
            " RETURNING intent_id)"
            " SELECT f.*, " + blocking_columns + " FROM (SELECT EXISTS (SELECT 1 FROM added)"
            " AS added, (SELECT settled FROM done) AS settled, $9::bigint AS write_count,"
            f" {prior_columns} FROM (SELECT 1) AS one LEFT JOIN prior AS p ON true) AS f"
            " LEFT JOIN blocking AS b ON true ORDER BY b.created_at, b.intent_id"
        )

        # The fenced paths: one autocommit statement each (see the module docstring). `seen`
        # is the statement's snapshot (the session's count there, the floor when it has no
        # row); `fence` counts the write only if that count still stands once the row lock is
        # granted: the row seen is updated only while it holds the count seen (an UPDATE
        # evaluates its WHERE on the newest version of the row, and updates nothing when the
        # row was deleted meanwhile), and a session seen without a row gets one only while
        # the floor is still the one seen (read FOR SHARE) and no other transaction made it
        # meanwhile with a count (ON CONFLICT DO UPDATE takes the lock first and evaluates
        # its WHERE on the newest version). The intent is inserted only from the fence's
        # RETURNING, so after it. A plain INSERT: an id another transaction took meanwhile
        # fails the whole statement.
        def seen(blocked: str) -> str:
            return (
                # A session without a row reads as the floor; one whose row lost its count
                # reads as NULL, which nothing is fenced by and the answer refuses.
                f"seen AS (SELECT CASE WHEN c.slot IS NULL THEN {floor} ELSE c.write_count END"
                f" AS write_count, c.slot IS NOT NULL AS present, {blocked} AS blocked,"
                f" ({settled_check}) AS settled, {prior_columns} FROM (SELECT 1) AS one"
                f" LEFT JOIN {slots} AS c ON c.session_id = $2 AND c.backend = $3"
                f" AND c.slot = 0 LEFT JOIN {s}.intents AS p ON p.intent_id = $1)"
            )

        # `known`: the session's row is taken to be there (``retention.row_known``), and the
        # statement leaves out making it (the INSERT costs each opening some microseconds);
        # a row pruned since is found missing and made on the locked path. `opens`: the
        # count's row takes the intent (its slot 0, an opening) in the same UPDATE, fenced
        # by the count before it; else the intent goes beside (``fenced_insert``).
        def fence(expected: str, known: bool, opens: bool) -> str:
            free = (
                "v.write_count >= 0 AND NOT v.blocked AND NOT v.settled AND v.prior IS NULL"
                f"{expected}"
            )
            takes = f", {LIVE_INTENT}, fence = v.write_count" if opens else ""
            bumped = (
                f"UPDATE {slots} AS w SET write_count = v.write_count + 1,"
                f" counted_at = {_NOW}{takes} FROM seen AS v"
                " WHERE w.session_id = $2 AND w.backend = $3 AND w.slot = 0"
                f" AND v.present AND w.write_count = v.write_count AND {free}"
                " RETURNING w.write_count"
            )
            if known:
                return f"fence AS ({bumped})"
            columns, values, assigned = "", "", ""
            if opens:
                columns = ", intent_id, state, owner, created_at, updated_at, record, fence"
                values = (
                    f", $1::text, $4::text, $5::text, $6::float8, coalesce({_NOW}, $7::float8),"
                    " $8::bytea, v.write_count"
                )
                assigned = "".join(
                    f", {column} = excluded.{column}"
                    for column in columns.removeprefix(", ").split(", ")
                )
            return (
                f"bumped AS ({bumped}),"
                f" made AS (INSERT INTO {slots} AS w (session_id, backend, slot, write_count,"
                f" counted_at{columns}) SELECT $2::text, $3::text, 0, v.write_count + 1, {_NOW}"
                f"{values} FROM seen AS v, {s}.write_floor AS f WHERE f.id = 0 AND NOT v.present"
                f" AND f.write_count = v.write_count AND {free} FOR SHARE OF f"
                " ON CONFLICT (session_id, backend, slot) DO UPDATE SET write_count ="
                f" excluded.write_count, counted_at = excluded.counted_at{assigned}"
                " WHERE w.write_count = excluded.write_count - 1 RETURNING w.write_count),"
                " fence AS (SELECT write_count FROM bumped UNION ALL SELECT write_count FROM made)"
            )

        def fenced_insert(fence: str) -> str:
            return f"added AS ({insert_intent(fence)} FROM fence RETURNING intent_id)"

        # Each by whether the session's row is known to be there. An intent recorded goes
        # beside the live one.
        self.record = {
            known: f"WITH {seen('false')}, {fence('', known, False)}, {fenced_insert('0')}"
            " SELECT EXISTS (SELECT 1 FROM added) AS added, settled, prior FROM seen"
            for known in (False, True)
        }
        # $9: the count expected, NULL for any; a snapshot count that is not it refuses. The
        # intent opened is the session's live one: its slot 0 takes it with the count.
        self.open_intent = {
            known: f"WITH blocking AS (SELECT {intent_columns}, created_at FROM {s}.intents"
            " WHERE session_id = $2 AND backend = $3),"
            f" {seen('EXISTS (SELECT 1 FROM blocking)')},"
            f" {fence(' AND coalesce($9::bigint, v.write_count) = v.write_count', known, True)},"
            " added AS (SELECT 1 FROM fence)"
            " SELECT EXISTS (SELECT 1 FROM added) AS added, v.settled, v.write_count, v.prior,"
            " v.prior_session, v.prior_backend, v.prior_state, v.prior_owner, v.prior_updated,"
            f" v.prior_seq, {blocking_columns}"
            " FROM seen AS v LEFT JOIN blocking AS b ON true ORDER BY b.created_at, b.intent_id"
            for known in (False, True)
        }
        self.held = (
            "SELECT record AS prior, session_id AS prior_session, backend AS prior_backend,"
            " state AS prior_state, owner AS prior_owner, updated_at AS prior_updated,"
            f" fence AS prior_seq FROM {s}.intents WHERE intent_id = $1"
        )
        self.intent_record = f"SELECT record FROM {s}.intents WHERE intent_id = $1"

        # Taking an intent off the journal, with ``only`` its conditions (checked on the
        # newest version of its row): a live one leaves its slot 0 empty, its count moved in
        # the same UPDATE; one beside is deleted, its session's count moved. Exactly one of
        # them runs (an id is in one slot), so slot 0 is changed at most once.
        def removed(only: str, when: str) -> str:
            return (
                f"emptied AS (UPDATE {slots} SET {EMPTY_SLOT},"
                f" write_count = write_count + 1, counted_at = {_NOW}"
                f" WHERE intent_id = $1 AND slot = 0{only} AND {when}"
                " RETURNING session_id, backend),"
                f" gone AS (DELETE FROM {slots} WHERE intent_id = $1 AND slot > 0{only}"
                f" AND {when} RETURNING session_id, backend),"
                f" counted AS (UPDATE {slots} AS w SET write_count = w.write_count + 1,"
                f" counted_at = {_NOW} FROM gone AS g"
                " WHERE w.session_id = g.session_id AND w.backend = g.backend AND w.slot = 0)"
            )

        # The session's count moves with the removal, its row locked first (the order every
        # path takes): a tail read while the write was in flight is out of date once it lands.
        # It is counted only when this statement removed the intent: two clearings of one
        # intent at once (the background one and a reader's) both see it in their snapshots,
        # and the one that waited for the lock finds it gone and counts nothing.
        def forget(only: str) -> str:
            return (
                f"WITH target AS (SELECT session_id, backend FROM {s}.intents"
                f" WHERE intent_id = $1{only}),"
                f" locked AS (SELECT w.write_count FROM {slots} AS w, target AS t"
                " WHERE w.session_id = t.session_id AND w.backend = t.backend AND w.slot = 0"
                " FOR UPDATE OF w),"
                # The conditions again: checked on the newest version of the row once its
                # lock is granted (a claim committed after this statement's snapshot).
                f" {removed(only, 'EXISTS (SELECT 1 FROM locked)')}"
                " SELECT (SELECT count(*) FROM emptied) + (SELECT count(*) FROM gone)"
            )

        self.discard = forget("")
        # discard by the holder ($2, with its token $3 when not NULL): only while it is
        # still in flight under them.
        self.discard_held = forget(
            " AND state = 'in_flight' AND owner = $2 AND ($3::bigint IS NULL OR fence = $3)"
        )
        # discard, only while the intent is in flight under this owner in this session and
        # backend ($2..$5): the clearing of an acknowledged intent before the next opening.
        self.clear = forget(" AND session_id = $2 AND backend = $3 AND state = $4 AND owner = $5")
        self.get = f"{self.select_intents} WHERE intent_id = $1"
        # Damaged intents set aside: the row unchecked, then removed only while it still
        # holds the very bytes, state and owner read (the operator's compare-and-set).
        self.raw_intent = (
            f"SELECT {intent_columns}, {_NOW} - updated_at AS age FROM {s}.intents"
            " WHERE intent_id = $1"
        )
        # (Its write is counted by the caller, count_write, in the same transaction.)
        # NULL-safe: a row with a column missing is set aside as it was read.
        held_raw = (
            " AND record IS NOT DISTINCT FROM $2 AND state IS NOT DISTINCT FROM $3"
            " AND owner IS NOT DISTINCT FROM $4 AND updated_at IS NOT DISTINCT FROM $5"
        )
        self.remove_raw = (
            f"WITH emptied AS (UPDATE {slots} SET {EMPTY_SLOT}"
            f" WHERE intent_id = $1 AND slot = 0{held_raw} RETURNING slot),"
            f" gone AS (DELETE FROM {slots} WHERE intent_id = $1 AND slot > 0{held_raw}"
            " RETURNING slot)"
            " SELECT true FROM emptied UNION ALL SELECT true FROM gone"
        )
        self.keep_aside = (
            f"INSERT INTO {s}.set_aside (intent_id, session_id, set_aside_at, meta, record)"
            " VALUES ($1, $2, $3, $4, $5)"
        )
        self.aside_entries = {
            (by_session, by_intent): f"SELECT meta FROM {s}.set_aside WHERE true"
            + (" AND session_id = $1" if by_session else "")
            + (f" AND intent_id = ${1 + by_session}" if by_intent else "")
            + f" ORDER BY seq DESC LIMIT ${1 + by_session + by_intent}"
            for by_session in (False, True)
            for by_intent in (False, True)
        }
        self.aside_kept = (
            f"SELECT record FROM {s}.set_aside WHERE intent_id = $1 ORDER BY seq DESC LIMIT 1"
        )
        self.is_settled = (
            f"SELECT 1 FROM {s}.decisions WHERE intent_id = $1 AND action IN {SETTLING} LIMIT 1"
        )
        # After a discard by its holder deleted nothing: whether the intent is held otherwise
        # (still unresolved) or was settled (taken over and closed by another), either of
        # which refuses it; gone unsettled, it was discarded already (a retry).
        self.held_or_settled = (
            f"SELECT EXISTS (SELECT 1 FROM {s}.intents WHERE intent_id = $1)"
            f" OR EXISTS ({self.is_settled})"
        )
        decision_columns = (
            "intent_id, session_id, backend, outcome, reason, action, decided_at, record"
        )
        self.note = (
            f"INSERT INTO {s}.decisions ({decision_columns})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        # A decision reached again: the newest about its intent, while still the one read,
        # takes its new repeat count (returns a row only when replaced).
        self.note_again = (
            f"UPDATE {s}.decisions SET record = $3 WHERE record = $2 AND seq ="
            f" (SELECT max(seq) FROM {s}.decisions WHERE intent_id = $1) RETURNING seq"
        )
        # Whether this very decision settled the intent (a settlement retried after its reply
        # was lost): its stored bytes are the ones given.
        self.settled_as = (
            f"SELECT 1 FROM {s}.decisions"
            f" WHERE intent_id = $1 AND action IN {SETTLING} AND record = $2 LIMIT 1"
        )
        # The claim is read with FOR UPDATE: a transition racing this settlement is either
        # seen (the newest owner is compared) or waits and then finds the intent gone.
        self.settle = (
            f"WITH done AS ({settled_check}),"
            f" again AS (SELECT EXISTS (SELECT 1 FROM {s}.decisions WHERE intent_id = $1"
            f" AND action IN {SETTLING} AND record = $8::bytea) AS again),"
            f" claim AS (SELECT state, owner, fence, slot FROM {slots} WHERE intent_id = $1"
            " FOR UPDATE),"
            " verdict AS (SELECT NOT (SELECT settled FROM done) AND ($9::text IS NULL"
            " OR NOT EXISTS (SELECT 1 FROM claim)"
            " OR EXISTS (SELECT 1 FROM claim WHERE state = 'reconciling' AND owner = $9::text"
            " AND ($10::bigint IS NULL OR fence = $10::bigint))) AS allowed),"
            # Settled, the intent leaves the journal and its session's count moves once: with
            # the emptying of its slot 0 when it is live there, else by itself.
            f" emptied AS (UPDATE {slots} SET {EMPTY_SLOT}, write_count = write_count + 1,"
            f" counted_at = {_NOW} WHERE intent_id = $1 AND slot = 0"
            " AND (SELECT allowed FROM verdict)),"
            f" gone AS (DELETE FROM {slots}"
            " WHERE intent_id = $1 AND slot > 0 AND (SELECT allowed FROM verdict)),"
            f" counted AS (UPDATE {slots} SET write_count = write_count + 1,"
            f" counted_at = {_NOW}"
            " WHERE session_id = $2 AND backend = $3 AND slot = 0 AND (SELECT allowed FROM verdict)"
            " AND NOT EXISTS (SELECT 1 FROM claim WHERE slot = 0)),"
            f" stored AS (INSERT INTO {s}.decisions ({decision_columns})"
            " SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::float8,"
            " $8::bytea WHERE (SELECT allowed FROM verdict))"
            " SELECT (SELECT settled FROM done) AS settled,"
            " (SELECT allowed FROM verdict) AS allowed, (SELECT again FROM again) AS again"
        )

        # The statements whose filters vary, built once: asyncpg caches prepared statements
        # by their text, so each variant is parsed and planned once per connection.
        flags = ((False, False), (False, True), (True, False), (True, True))
        self._transition = {
            (*key, fenced, stamped, claim): _transition(s, *key, fenced, stamped, claim)
            for key in flags
            for fenced in (False, True)
            for stamped in (False, True)
            for claim in (False, True)
        }
        self._pending = {key: _pending(self.select_intents, *key) for key in flags}
        self._decisions = {key: _decisions(s, *key) for key in flags}
        # The newest decision of each intent of $1, through decisions_by_intent.
        self.newest_decisions = (
            f"SELECT DISTINCT ON (intent_id) intent_id, session_id, record FROM {s}.decisions"
            " WHERE intent_id = ANY($1::text[]) ORDER BY intent_id, seq DESC"
        )

    def transition(
        self, by_state: bool, by_owner: bool, by_fence: bool, by_update: bool, claim: bool
    ) -> str:
        """The compare-and-set of state and owner ($1, $2) of intent $3, expecting its state,
        owner, token and update time in that order from $4 on when asked; a ``claim`` also
        takes a new token (see ``IntentJournal.transition``)."""
        return self._transition[by_state, by_owner, by_fence, by_update, claim]

    def pending(self, by_session: bool, by_backend: bool) -> str:
        return self._pending[by_session, by_backend]

    def decisions(self, by_session: bool, by_intent: bool) -> str:
        return self._decisions[by_session, by_intent]


def _transition(
    s: str, by_state: bool, by_owner: bool, by_fence: bool, by_update: bool, claim: bool
) -> str:
    """``JournalStatements.transition`` of the schema ``s`` (quoted)."""
    where = " WHERE intent_id = $3"
    number = 4
    columns = (
        (by_state, "state", "::text"),
        (by_owner, "owner", "::text"),
        (by_fence, "fence", "::bigint"),
        (by_update, "updated_at", "::float8"),
    )
    for wanted, column, cast in columns:
        if wanted:
            where += f" AND {column} = ${number}{cast}"
            number += 1
    update = f"UPDATE {s}.slots AS i SET state = $1, owner = $2, updated_at = {_NOW}"
    if claim:
        # The count: the row's own on a live intent (its newest version), its slot 0's on one
        # recorded beside.
        update += (
            ", fence = greatest(i.fence + 1, coalesce(i.write_count, (SELECT w.write_count FROM"
            f" {s}.slots AS w WHERE w.session_id = i.session_id AND w.backend = i.backend"
            f" AND w.slot = 0), {floor_of(s)}))"
        )
    return f"{update}{where} RETURNING 1"


def _pending(select_intents: str, by_session: bool, by_backend: bool) -> str:
    """``JournalStatements.pending``: ``select_intents`` of a session and a backend."""
    conditions: list[str] = []
    if by_session:
        conditions.append(f"session_id = ${len(conditions) + 1}")
    if by_backend:
        conditions.append(f"backend = ${len(conditions) + 1}")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"{select_intents}{where} ORDER BY created_at, intent_id"


def _decisions(s: str, by_session: bool, by_intent: bool) -> str:
    """``JournalStatements.decisions`` of the schema ``s`` (quoted), newest first."""
    conditions: list[str] = []
    if by_session:
        conditions.append(f"session_id = ${len(conditions) + 1}")
    if by_intent:
        conditions.append(f"intent_id = ${len(conditions) + 1}")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return (
        f"SELECT intent_id, session_id, record FROM {s}.decisions{where}"
        f" ORDER BY seq DESC LIMIT ${len(conditions) + 1}"
    )
