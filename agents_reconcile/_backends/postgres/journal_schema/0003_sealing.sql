-- agents-reconcile PostgreSQL journal, schema version 3: the mark of a sealed journal.
--
-- The migration runner executes this file inside its transaction, with search_path set to
-- the journal's own schema, so names here are unqualified. It records the version itself; an
-- older journal is upgraded by the same statements that make a new one.

-- The ids of the payload keys the deployment seals under (never the keys): a row is written
-- before the first record sealed under a key is, and never removed, so a journal once sealed
-- says so when no sealed record is left in it. An operator's write that would put a payload
-- in it unsealed, or under a key not named here, is refused. Empty: never sealed.
CREATE TABLE sealing_keys (
    key_id    text PRIMARY KEY,
    marked_at double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp())::float8
);

-- A journal sealed under an earlier release: the keys its sealed records name (intents and
-- effect receipts). A record is read as the bytes it is (escape encoding never fails, where
-- a damaged row would not be text or JSON): a sealed field is written with its algorithm
-- first, then its key id, so only a seal matches.
INSERT INTO sealing_keys (key_id)
SELECT DISTINCT (regexp_match(encode(record, 'escape'),
    '"sealed":\{"alg":"chacha20-poly1305","kid":"([0-9a-f]{16})"'))[1] AS kid
FROM (SELECT record FROM intents UNION ALL SELECT record FROM effects) AS records
WHERE encode(record, 'escape') LIKE '%"sealed":{"alg":"chacha20-poly1305","kid":"%'
ON CONFLICT (key_id) DO NOTHING;
