-- agents-reconcile revisioned session store on PostgreSQL, schema version 1.
--
-- Run by the store's migration runner inside one transaction, after it has created the
-- schema and its version table (store_schema_version: named for the store, so that an intent
-- journal's schema_version table can share the schema) and pointed search_path at it: the
-- names below are unqualified on purpose. The runner records the step itself.
--
-- The layout mirrors the SQLite store (revisioned_* tables): a head per session, the items
-- as JSON text (one row each, in append order), and one record per write.

-- One row per session: its head revision and the sequence number its next item gets. Every
-- write updates this row, so the row lock orders the writes of a session.
CREATE TABLE sessions (
    session_id text PRIMARY KEY,
    revision   bigint NOT NULL DEFAULT 0 CHECK (revision >= 0),
    next_seq   bigint NOT NULL DEFAULT 0 CHECK (next_seq >= 0)
) WITH (fillfactor = 80);

-- The items, oldest first by seq. The item is the JSON text the SDK's sessions store, kept
-- as text so it reads back byte for byte (jsonb would reorder keys and drop duplicates).
CREATE TABLE items (
    session_id text   NOT NULL,
    seq        bigint NOT NULL,
    revision   bigint NOT NULL,
    item       text   NOT NULL,
    CONSTRAINT items_pkey PRIMARY KEY (session_id, seq)
);

-- The record of writes: the revision each write produced, its id, who made it and what it
-- did. A write id is recorded once per session.
CREATE TABLE writes (
    session_id text             NOT NULL,
    revision   bigint           NOT NULL,
    write_id   text             NOT NULL,
    writer     text             NOT NULL,
    kind       text             NOT NULL CHECK (kind IN ('append', 'pop', 'clear')),
    count      integer          NOT NULL CHECK (count >= 0),
    at         double precision NOT NULL,
    CONSTRAINT writes_pkey PRIMARY KEY (session_id, revision),
    CONSTRAINT writes_write_id_key UNIQUE (session_id, write_id)
);
