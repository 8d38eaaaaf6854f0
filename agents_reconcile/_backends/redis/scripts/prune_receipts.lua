-- prune(): remove the receipts (effects done) stored longer than ARGV[2] seconds before the
-- server's time (finish_effect stamps the server's time on them), from every effect key; a
-- receipt of a session with an unresolved intent stays (that intent's batch may hold the
-- output it vouches for, checked before the intent is accepted or replayed).
-- KEYS: the global keys, the effect index, the started effects, then for each session named
-- in ARGV its five effect keys (EFFECT_KEYS order) and its unresolved intents (its 'intents').
-- ARGV: version, seconds kept, '1' for a dry run (count, remove nothing), how many sessions;
-- then for each, its id, how many effect keys and the keys. An effect no longer that
-- session's, started, younger, or of a session with an unresolved intent is left as it is.
-- Replies {removed, bytes}.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local cutoff = tonumber(now()) - tonumber(ARGV[2])
local dry = ARGV[3] == '1'
local removed, bytes = 0, 0
local at = 5
for n = 1, tonumber(ARGV[4]) do
  local first = EFFECT_AT + (n - 1) * 6
  local e = effect_keys(first)
  local session, asked = ARGV[at], tonumber(ARGV[at + 1])
  if redis.call('HLEN', KEYS[first + 5]) == 0 then
    for i = 1, asked do
      local key = ARGV[at + 1 + i]
      local stored = tonumber(field(e.updated, key))
      if redis.call('HGET', e.index, key) == session and field(e.state, key) == 'done'
          and stored and stored < cutoff then
        removed = removed + 1
        bytes = bytes + #key + #field(e.record, key)
        if not dry then
          redis.call('HDEL', e.index, key)
          redis.call('ZREM', e.started, key)
          redis.call('LREM', e.order, 1, key)
          redis.call('HDEL', e.record, key)
          redis.call('HDEL', e.state, key)
          redis.call('HDEL', e.owner, key)
          redis.call('HDEL', e.updated, key)
        end
      end
    end
  end
  at = at + 2 + asked
end
return {removed, bytes}
