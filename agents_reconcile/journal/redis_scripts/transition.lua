-- transition(): compare-and-set of an unresolved intent's state and owner.
-- ARGV: version, intent id, session expected to hold it, new state, new owner, updated_at,
-- '1' when a state is expected, that state, '1' when an owner is expected, that owner.
-- Replies 1 (changed), 0 (expectations not met) or {'moved', holder} ({'moved'} when no
-- session holds the id) when the id is not that session's.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
local holder = redis.call('HGET', GLOBAL.index, id)
if holder ~= ARGV[3] then
  return moved(holder)
end
local s = session_keys(8)
if ARGV[7] == '1' and field(s.state, id) ~= ARGV[8] then
  return 0
end
if ARGV[9] == '1' and field(s.owner, id) ~= ARGV[10] then
  return 0
end
redis.call('HSET', s.state, id, ARGV[4])
redis.call('HSET', s.owner, id, ARGV[5])
redis.call('HSET', s.updated, id, ARGV[6])
return 1
