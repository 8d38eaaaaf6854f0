-- agents-reconcile PostgreSQL journal, schema version 3: damaged intents set aside.
--
-- Run like 0001 (inside the migration runner's transaction, search_path set to the journal's
-- schema). An intent whose record fails its checks is moved here by an operator: its bytes
-- kept as they were (record) beside a description of them (meta: the row's columns, the
-- digest and size of the bytes, why they were refused, who set them aside and why).
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
