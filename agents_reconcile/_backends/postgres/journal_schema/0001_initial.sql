-- agents-reconcile PostgreSQL journal, schema version 1: its tables and indexes.
--
-- The migration runner executes this file inside its transaction, with search_path set to
-- the journal's own schema, so names here are unqualified. It records the version itself.

-- Unresolved intents only: a row goes when its write is acknowledged or settled, so the
-- table stays small and its rows are updated in place (fillfactor leaves room for that).
CREATE TABLE intents (
    intent_id  text PRIMARY KEY,
    session_id text NOT NULL,
    backend    text NOT NULL,
    state      text NOT NULL,
    owner      text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    -- The intent's fencing token: the session's write count when it was opened (0 when
    -- recorded otherwise), raised by each claim.
    fence      bigint NOT NULL DEFAULT 0,
    -- PendingWrite.encode(): the record with its own digest, kept byte for byte.
    record     bytea NOT NULL
) WITH (fillfactor = 70);

CREATE INDEX intents_by_session ON intents (session_id, backend, created_at);

-- Every decision, settling or not; newest first is ORDER BY seq DESC.
CREATE TABLE decisions (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    intent_id  text NOT NULL,
    session_id text NOT NULL,
    backend    text NOT NULL,
    outcome    text NOT NULL,
    reason     text NOT NULL,
    action     text NOT NULL,
    decided_at double precision NOT NULL,
    -- Decision.encode(), with its digest.
    record     bytea NOT NULL
);

CREATE INDEX decisions_by_intent ON decisions (intent_id, seq);
CREATE INDEX decisions_by_session ON decisions (session_id, seq);

-- An intent is settled at most once, whichever worker tries: a second settlement fails on
-- this index even if it raced past every other check.
CREATE UNIQUE INDEX decisions_settle_once ON decisions (intent_id)
    WHERE action IN ('settled', 'replayed', 'dropped');

-- Writes counted per session and backend. Its row is also the session's lock: operations
-- that must see the session whole (opening, recording, settling an intent) take it first.
CREATE TABLE session_writes (
    session_id text NOT NULL,
    backend    text NOT NULL,
    write_count bigint NOT NULL CHECK (write_count >= 0),
    PRIMARY KEY (session_id, backend)
) WITH (fillfactor = 70);

-- Tools' external effects, one row per effect key, kept for good: a done effect must never
-- run again. Its state and owner are columns so that restarting and finishing are one
-- compare-and-set UPDATE each; a row is updated in place at most a few times (fillfactor
-- leaves room for that).
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

-- Damaged intents set aside: an intent whose record fails its checks is moved here by an
-- operator, its bytes kept as they were (record) beside a description of them (meta: the
-- row's columns, the digest and size of the bytes, why they were refused, who set them aside
-- and why).
CREATE TABLE set_aside (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    intent_id    text NOT NULL,
    session_id   text NOT NULL,
    set_aside_at double precision NOT NULL,
    meta         bytea NOT NULL,
    record       bytea NOT NULL
);

CREATE INDEX set_aside_by_session ON set_aside (session_id, seq);
CREATE INDEX set_aside_by_intent ON set_aside (intent_id, seq);
