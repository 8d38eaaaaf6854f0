-- On a Redis Cluster (homes.py, ClaimedHomes): the session an intent id belongs to, kept in the
-- bucket of the intent id itself, so that an id is one session's in the whole journal whatever
-- bucket that session's keys are in. KEYS[1] the bucket's schema version (GLOBAL.schema),
-- KEYS[2] its claims (a hash: intent id -> session id).
-- ARGV: version, then
--   'claim', an intent id, a session: the id becomes the session's unless another session's.
--            Replies {'mine'} (now, or before) or {'other', session}.
--   'drop', then pairs of an intent id and a session: each id claimed by that session is no
--            longer. Replies how many went.
if ARGV[2] == 'drop' then
  local gone = 0
  for i = 3, #ARGV - 1, 2 do
    if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
      gone = gone + redis.call('HDEL', KEYS[2], ARGV[i])
    end
  end
  return gone
end
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local holder = redis.call('HGET', KEYS[2], ARGV[3])
if not holder then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  return {'mine'}
end
if holder == ARGV[4] then
  return {'mine'}
end
return {'other', holder}
