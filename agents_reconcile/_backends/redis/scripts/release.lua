-- On a Redis Cluster (RedisClusterJournal, journal.py): the first half of settling an intent
-- with the decision of a session in another bucket. In the bucket of the session holding the
-- intent, remove it and mark it settled there, only while that session holds it and, when
-- fenced, the owner still holds its claim; the decision is then stored in its own session's
-- bucket (settle.lua, no session expected to hold the intent).
-- ARGV: version, intent id, the session expected to hold it, '1' when fenced by an owner, that
-- owner, the reconciling state, the owner's fencing token ('' for any).
-- Replies {'done'}, {'unclaimed'} (the owner lost the claim) or {'moved', holder} ({'moved'}
-- when no session of the bucket holds it).
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
local s = session_keys(SESSION_AT)
local r = intent_of(s, id)
if not r then
  return moved(redis.call('HGET', GLOBAL.index, id))
end
if ARGV[4] == '1' and (r.state ~= ARGV[6] or r.owner ~= ARGV[5]
    or (ARGV[7] ~= '' and r.fence ~= ARGV[7])) then
  return {'unclaimed'}
end
remove_intent(s, ARGV[3], id)
redis.call('SADD', GLOBAL.settled, id)
return {'done'}
