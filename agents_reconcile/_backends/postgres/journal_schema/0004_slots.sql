-- agents-reconcile PostgreSQL journal, schema version 4: a session's count and its intents in
-- one table, its live intent on the row of its count.
--
-- The migration runner executes this file inside its transaction, with search_path set to
-- the journal's own schema, so names here are unqualified. It records the version itself; an
-- older journal is upgraded by the same statements that make a new one.
--
-- An append writes one journal row: its session's slot 0, which holds the session's write
-- count and the intent it has in flight. Opening the next intent replaces the acknowledged one
-- and moves the count in one UPDATE, where an older journal deleted a row of ``intents``,
-- inserted another and updated ``session_writes``. Intents recorded beside the live one (by
-- ``record``: a copy found in a RunState, a failed append) take slots 1 and up. Every
-- unresolved intent is a row of this one table, so one unique index keeps an intent id
-- unique across sessions, even when two sessions take one id at the same instant (each under
-- its own session's lock, which two tables' indexes could not).

-- No writer of the schema before may commit between the copies below and the drops.
LOCK TABLE session_writes, intents IN ACCESS EXCLUSIVE MODE;

-- No CHECK constraints: each is evaluated on every update of slot 0, one per append, and
-- those that kept each slot whole cost the append's statement measurably. Every reader checks
-- what it reads instead (a count that is not a count, an intent's row with a column missing,
-- is refused as damaged), and every writer refuses a session whose count is not one.
CREATE TABLE slots (
    session_id  text NOT NULL,
    backend     text NOT NULL,
    -- 0: the session's count and its live intent; 1 and up: an intent recorded beside it.
    slot        integer NOT NULL,
    -- Slot 0's: writes counted for the session and backend, and when the count was last
    -- raised on the journal's clock (pruning judges a session idle by it); NULL beside.
    write_count bigint,
    counted_at  double precision,
    -- The intent (NULL on a slot 0 without one), as the rows of ``intents`` held them.
    intent_id   text,
    state       text,
    owner       text,
    -- When the intent was created: the listings' order, so never NULL (a NULL would drop the
    -- row from a listing's page): on a slot 0 without an intent, its last one's, or 0.
    created_at  double precision NOT NULL DEFAULT 0,
    updated_at  double precision,
    fence       bigint,
    record      bytea,
    PRIMARY KEY (session_id, backend, slot)
) WITH (fillfactor = 70);

-- Unique across every session: an id taken after a statement's snapshot fails that statement.
CREATE UNIQUE INDEX slots_intent_id ON slots (intent_id) WHERE intent_id IS NOT NULL;

-- The unresolved intents in the listings' order (session, backend, creation time, id); slots
-- without an intent are in neither index, so neither grows with idle sessions.
CREATE INDEX slots_unresolved ON slots (session_id, backend, created_at, intent_id)
    WHERE intent_id IS NOT NULL;

-- The counts move over as they are, each to its session's slot 0.
INSERT INTO slots (session_id, backend, slot, write_count, counted_at)
SELECT session_id, backend, 0, write_count, counted_at FROM session_writes;

-- A session with intents and no count (none should be: every intent is recorded under its
-- session's count) reads as the floor, as it did.
INSERT INTO slots (session_id, backend, slot, write_count, counted_at)
SELECT DISTINCT i.session_id, i.backend, 0, f.write_count, extract(epoch FROM now())::float8
FROM intents AS i, write_floor AS f
WHERE f.id = 0 AND NOT EXISTS (SELECT 1 FROM session_writes AS w
    WHERE w.session_id = i.session_id AND w.backend = i.backend);

-- The intents recorded already go beside, oldest first: each still blocks its session's next
-- opening, and is cleared or settled as any intent recorded beside is.
INSERT INTO slots (session_id, backend, slot, intent_id, state, owner, created_at, updated_at,
    fence, record)
SELECT session_id, backend,
    row_number() OVER (PARTITION BY session_id, backend ORDER BY created_at, intent_id),
    intent_id, state, owner, created_at, updated_at, fence, record
FROM intents;

DROP TABLE intents;
DROP TABLE session_writes;

-- Every unresolved intent, live or recorded beside, with the columns of an intent's row: what
-- every reader of intents reads. The writers write ``slots``.
CREATE VIEW intents AS
SELECT intent_id, session_id, backend, state, owner, created_at, updated_at, fence, record, slot
FROM slots WHERE intent_id IS NOT NULL;
