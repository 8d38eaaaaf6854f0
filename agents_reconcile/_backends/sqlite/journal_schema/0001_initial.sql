-- agents-reconcile SQLite journal, schema version 1: its tables, indexes and trigger.
--
-- The migration runner executes these statements inside its write transaction and records
-- the version in journal_schema itself.

-- The intents table holds the writes in flight or unresolved: few at a time, but an abandoned
-- one stays until it is resolved, so with many sessions the table grows; every append looks
-- for its session's unresolved intent by (session_id, backend), through intents_by_session.
-- WITHOUT ROWID keeps each row in its primary-key b-tree.
CREATE TABLE IF NOT EXISTS intents (
    intent_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    backend TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    record BLOB NOT NULL,
    fence INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS intents_by_session ON intents (session_id, backend, created_at);

CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    intent_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    backend TEXT NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL,
    action TEXT NOT NULL,
    decided_at REAL NOT NULL,
    record BLOB NOT NULL
);

CREATE INDEX IF NOT EXISTS decisions_by_intent ON decisions (intent_id);
CREATE INDEX IF NOT EXISTS decisions_by_session ON decisions (session_id, seq);

CREATE TABLE IF NOT EXISTS session_writes (
    session_id TEXT NOT NULL,
    backend TEXT NOT NULL,
    write_count INTEGER NOT NULL,
    PRIMARY KEY (session_id, backend)
) WITHOUT ROWID;

-- Every intent recorded is a write of its session (the write may land): counting it in a
-- trigger keeps opening an intent a single statement.
CREATE TRIGGER IF NOT EXISTS intents_count_write AFTER INSERT ON intents
BEGIN
    INSERT INTO session_writes (session_id, backend, write_count)
    VALUES (NEW.session_id, NEW.backend, 1)
    ON CONFLICT (session_id, backend) DO UPDATE SET write_count = write_count + 1;
END;

-- Tools' external effects: one row per effect key, its intent (state started) before the tool
-- body runs, its receipt (state done, the output inside the record) after. Few rows per
-- session; read by key, and by session in the order they were begun.
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

-- Damaged intents set aside: an intent whose record fails its checks is moved here by an
-- operator, its bytes kept as they were (``record``) beside a description of them (``meta``:
-- the row's columns, the digest and size of the bytes, why they were refused, who set them
-- aside and why). Rare rows, read by session and by intent.
CREATE TABLE IF NOT EXISTS set_aside (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    intent_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    set_aside_at REAL NOT NULL,
    meta BLOB NOT NULL,
    record BLOB NOT NULL
);

CREATE INDEX IF NOT EXISTS set_aside_by_session ON set_aside (session_id, seq);
CREATE INDEX IF NOT EXISTS set_aside_by_intent ON set_aside (intent_id);
