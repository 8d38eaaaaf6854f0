-- agents-reconcile SQLite journal, schema version 2: tools' external effects.
--
-- One row per effect key: its intent (state started) before the tool body runs, its receipt
-- (state done, the output inside the record) after. Few rows per session; read by key, and by
-- session in the order they were begun.
CREATE TABLE IF NOT EXISTS effects (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    started_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    record BLOB NOT NULL
);

-- A session's effects in the order they were begun (rowids only grow: effects are not deleted).
CREATE INDEX IF NOT EXISTS effects_by_session ON effects (session_id);

-- The started effects (no receipt yet), the few an operator may be needed for, journal-wide.
CREATE INDEX IF NOT EXISTS effects_started ON effects (session_id) WHERE state = 'started';
