-- agents-reconcile SQLite journal, schema version 3: damaged intents set aside.
--
-- An intent whose record fails its checks is moved here by an operator, its bytes kept as
-- they were (``record``) beside a description of them (``meta``: the row's columns, the
-- digest and size of the bytes, why they were refused, who set them aside and why). Rare
-- rows, read by session and by intent.
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
