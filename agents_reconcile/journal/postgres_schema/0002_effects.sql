-- agents-reconcile PostgreSQL journal, schema version 2: tools' external effects.
--
-- Run like 0001 (inside the migration runner's transaction, search_path set to the journal's
-- schema), on a new journal right after it and on a version-1 journal alone; the intents,
-- decisions and write counts already there are left as they are.

-- One row per effect key, kept for good: a done effect must never run again. Its state and
-- owner are columns so that restarting and finishing are one compare-and-set UPDATE each; a
-- row is updated in place at most a few times (fillfactor leaves room for that).
CREATE TABLE effects (
    key        text PRIMARY KEY,
    session_id text NOT NULL,
    state      text NOT NULL CHECK (state IN ('started', 'done')),
    owner      text NOT NULL,
    -- When the key was first recorded, and when its row last changed (the journal's clock).
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    -- Effect.encode(): the record with its own digest (its output sealed, its MAC where
    -- records are signed), kept byte for byte.
    record     bytea NOT NULL
) WITH (fillfactor = 80);

-- A session's effects, oldest first.
CREATE INDEX effects_by_session ON effects (session_id, created_at, key);

-- The started effects (no receipt yet), oldest first: the few an operator may be needed for,
-- listed journal-wide without reading every effect ever kept.
CREATE INDEX effects_started ON effects (created_at, key) WHERE state = 'started';
