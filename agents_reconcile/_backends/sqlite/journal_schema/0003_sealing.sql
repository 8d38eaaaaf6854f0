-- agents-reconcile SQLite journal, schema version 3: the mark of a sealed journal.
--
-- The migration runner executes these statements inside its write transaction and records
-- the version in journal_schema itself; an older journal is upgraded by the same steps.

-- The ids of the payload keys the deployment seals under (never the keys): a row is written
-- before the first record sealed under a key is, and never removed, so a journal once sealed
-- says so when no sealed record is left in it. An operator's write that would put a payload
-- in it unsealed, or under a key not named here, is refused. Empty: never sealed.
CREATE TABLE IF NOT EXISTS sealing_keys (
    key_id TEXT PRIMARY KEY,
    marked_at REAL NOT NULL
) WITHOUT ROWID;

-- A journal sealed under an earlier release: the keys its sealed records name (intents and
-- effect receipts), read where a record is JSON at all (a damaged row is left to the reads
-- that report it).
INSERT OR IGNORE INTO sealing_keys (key_id, marked_at)
SELECT kid, (julianday('now') - 2440587.5) * 86400.0 FROM (
    SELECT CASE WHEN json_valid(CAST(record AS TEXT))
        THEN json_extract(CAST(record AS TEXT), '$.sealed.kid') END AS kid
    FROM intents
    UNION
    SELECT CASE WHEN json_valid(CAST(record AS TEXT))
        THEN json_extract(CAST(record AS TEXT), '$.sealed.kid') END AS kid
    FROM effects
) WHERE typeof(kid) = 'text';
