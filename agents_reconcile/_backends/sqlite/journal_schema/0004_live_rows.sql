-- agents-reconcile SQLite journal, schema version 4: one live row per session and backend.
--
-- The migration runner executes these statements inside its write transaction and records
-- the version in journal_schema itself; an older journal is upgraded by the same steps.
--
-- An append writes one row: the session's live row, which holds its write count and the
-- intent it has in flight. Opening the next intent replaces the acknowledged one and moves
-- the count in one UPDATE, where an older journal deleted a row, inserted another and moved
-- a second table's count twice, through a trigger. The live row is a rowid table, so a
-- record of a few KiB stays on its row's page.

CREATE TABLE IF NOT EXISTS live (
    session_id TEXT NOT NULL,
    backend TEXT NOT NULL,
    write_count INTEGER NOT NULL,
    counted_at REAL NOT NULL,
    -- The live intent, all NULL when the session has none.
    intent_id TEXT,
    state TEXT,
    owner TEXT,
    created_at REAL,
    updated_at REAL,
    fence INTEGER,
    record BLOB,
    UNIQUE (session_id, backend)
);

-- The live intents by id (claims, settlements, discards, the operator's reads) and in the
-- listings' order; rows without one are in neither, so neither grows with idle sessions.
CREATE UNIQUE INDEX IF NOT EXISTS live_by_intent ON live (intent_id)
    WHERE intent_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS live_unresolved ON live (session_id, backend, created_at, intent_id)
    WHERE intent_id IS NOT NULL;

-- The counts move over as they are; the intents already recorded stay in ``intents``, which
-- from now on holds the intents recorded beside a session's live one (``record``, and those
-- of an older release), each still blocking its session's next opening.
INSERT INTO live (session_id, backend, write_count, counted_at)
SELECT session_id, backend, write_count, counted_at FROM session_writes;

DROP TRIGGER IF EXISTS intents_count_write;
DROP TRIGGER IF EXISTS session_writes_floor;
DROP TABLE session_writes;

-- Only a row with no live intent is ever deleted (pruning an idle count); its count raises
-- the floor in the statement that removes it.
CREATE TRIGGER IF NOT EXISTS live_floor AFTER DELETE ON live
BEGIN
    UPDATE write_floor SET write_count = max(write_count, OLD.write_count) WHERE id = 0;
END;

-- Every unresolved intent, live or recorded beside, with the columns of an intent's row.
CREATE VIEW IF NOT EXISTS unresolved AS
SELECT intent_id, session_id, backend, state, owner, created_at, updated_at, record, fence
FROM live WHERE intent_id IS NOT NULL
UNION ALL
SELECT intent_id, session_id, backend, state, owner, created_at, updated_at, record, fence
FROM intents;
