-- agents-reconcile PostgreSQL journal, schema version 2: what pruning needs (``prune``), the
-- time each session's count was last raised and the journal's floor.
--
-- The migration runner executes this file inside its transaction, with search_path set to
-- the journal's own schema, so names here are unqualified. It records the version itself; a
-- version-1 journal is upgraded by the same statements that make a new one.

-- When each session's count was last raised, on the journal's clock (the server's, in seconds
-- since the epoch): a count idle longer than the retention keeps it may be pruned. The counts
-- there at the upgrade are stamped with its time (now() is evaluated once, and the value is
-- kept for the rows there without rewriting them), so that none looks idle for longer than it
-- has been watched. Every statement of this release that raises a count stamps it; the
-- default stamps a row made by a statement that does not name the column.
ALTER TABLE session_writes
    ADD COLUMN counted_at double precision NOT NULL DEFAULT extract(epoch FROM now())::float8;

ALTER TABLE session_writes
    ALTER COLUMN counted_at SET DEFAULT extract(epoch FROM clock_timestamp())::float8;

-- No index on counted_at: every append updates its session's row, and an index on a column
-- it changes would make each of those updates write a new index entry (no HOT update).
-- Pruning finds idle counts by sweeping the primary key instead.

-- The journal's floor, one row: the highest count it pruned. A session without a count reads
-- as the floor and its next write counts floor + 1, so a count never goes down. A statement
-- that makes a session's row reads the floor with FOR SHARE; pruning takes it FOR UPDATE
-- before it deletes a count, so a row is never made below a floor raised meanwhile.
CREATE TABLE write_floor (
    id          integer PRIMARY KEY CHECK (id = 0),
    write_count bigint NOT NULL CHECK (write_count >= 0)
);

INSERT INTO write_floor (id, write_count) VALUES (0, 0);
