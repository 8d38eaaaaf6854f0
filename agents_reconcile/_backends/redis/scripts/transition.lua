-- transition(): compare-and-set of an unresolved intent's state and owner.
-- ARGV: version, intent id, session expected to hold it, new state, new owner, (unused),
-- '1' when a state is expected, that state, '1' when an owner is expected, that owner, '1'
-- when a fencing token is expected, that token, '1' when the update time is expected (as read:
-- a claim on an expired lease fails once its holder renewed it), that time. The update time is the server's. A move to
-- reconciling without an expected token is a claim: the intent takes a new token, one more
-- than its last and at least the session's write count.
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
local s = session_keys(SESSION_AT)
if ARGV[7] == '1' and field(s.state, id) ~= ARGV[8] then
  return 0
end
if ARGV[9] == '1' and field(s.owner, id) ~= ARGV[10] then
  return 0
end
if ARGV[11] == '1' and field(s.fence, id) ~= ARGV[12] then
  return 0
end
if ARGV[13] == '1' and tonumber(field(s.updated, id)) ~= tonumber(ARGV[14]) then
  return 0
end
if ARGV[4] == 'reconciling' and ARGV[11] ~= '1' then
  local backend = redis.call('HGET', s.backend, id)
  local write_count = tonumber(count_of(s, backend))
  local token = math.max((tonumber(field(s.fence, id)) or 0) + 1, write_count)
  redis.call('HSET', s.fence, id, token)
end
redis.call('HSET', s.state, id, ARGV[4])
redis.call('HSET', s.owner, id, ARGV[5])
redis.call('HSET', s.updated, id, now())
return 1
