-- agents-reconcile SQLite journal, schema version 2: what pruning needs (``prune``), the
-- time each session's count was last raised and the journal's floor.
--
-- The migration runner executes these statements inside its write transaction and records
-- the version in journal_schema itself; a version-1 journal is upgraded by the same steps.

-- When each session's count was last raised, on the journal's clock (seconds since the epoch):
-- a count idle longer than the retention keeps it may be pruned. The counts there at the
-- upgrade are stamped with its time, so that none looks idle for longer than it has been
-- watched.
ALTER TABLE session_writes ADD COLUMN counted_at REAL NOT NULL DEFAULT 0;

UPDATE session_writes SET counted_at = (julianday('now') - 2440587.5) * 86400.0;

-- The journal's floor, one row: the highest count it pruned. A session without a count reads
-- as the floor and its next write counts floor + 1, so a count never goes down.
CREATE TABLE IF NOT EXISTS write_floor (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    write_count INTEGER NOT NULL
);

INSERT OR IGNORE INTO write_floor (id, write_count) VALUES (0, 0);

-- A count removed raises the floor to it in the statement that removes it: no count can go
-- without the floor knowing it, whoever deletes the row.
CREATE TRIGGER IF NOT EXISTS session_writes_floor AFTER DELETE ON session_writes
BEGIN
    UPDATE write_floor SET write_count = max(write_count, OLD.write_count) WHERE id = 0;
END;

-- Every intent recorded is a write of its session, counted above the floor when the session
-- has no count, and stamped with the time the intent row was written.
DROP TRIGGER IF EXISTS intents_count_write;

CREATE TRIGGER intents_count_write AFTER INSERT ON intents
BEGIN
    INSERT INTO session_writes (session_id, backend, write_count, counted_at)
    VALUES (
        NEW.session_id,
        NEW.backend,
        coalesce((SELECT write_count FROM write_floor WHERE id = 0), 0) + 1,
        NEW.updated_at
    )
    ON CONFLICT (session_id, backend) DO UPDATE
    SET write_count = write_count + 1, counted_at = excluded.counted_at;
END;

-- Receipts are pruned too (rows of state done): a session's effects are still read in the
-- order they were begun, rowids growing among the rows kept.
