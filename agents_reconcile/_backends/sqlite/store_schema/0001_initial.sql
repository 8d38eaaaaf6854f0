-- agents-reconcile revisioned session store on SQLite, schema version 1.
--
-- The migration runner executes these statements inside its write transaction and records
-- the version in revisioned_schema itself. A head per session, the items as JSON text (one
-- row each, in append order), and one record per write.

CREATE TABLE IF NOT EXISTS revisioned_sessions (
    session_id TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    next_seq INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS revisioned_items (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS revisioned_writes (
    session_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    write_id TEXT NOT NULL,
    writer TEXT NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (session_id, revision),
    UNIQUE (session_id, write_id)
) WITHOUT ROWID;
