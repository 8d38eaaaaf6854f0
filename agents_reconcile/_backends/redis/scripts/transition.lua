-- transition(): compare-and-set of an unresolved intent's state and owner.
-- ARGV: version, intent id, session expected to hold it, new state, new owner, (unused),
-- '1' when a state is expected, that state, '1' when an owner is expected, that owner, '1'
-- when a fencing token is expected, that token, '1' when the update time is expected (as read:
-- a claim on an expired lease fails once its holder renewed it), that time. The update time is
-- the server's. A move to reconciling without an expected token is a claim: the intent takes a
-- new token, one more than its last and at least the session's write count.
-- Replies 1 (changed), 0 (expectations not met) or {'moved', holder} ({'moved'} when no
-- session holds the id) when the id is not that session's.
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
if ARGV[7] == '1' and r.state ~= ARGV[8] then
  return 0
end
if ARGV[9] == '1' and r.owner ~= ARGV[10] then
  return 0
end
if ARGV[11] == '1' and r.fence ~= ARGV[12] then
  return 0
end
if ARGV[13] == '1' and tonumber(r.updated) ~= tonumber(ARGV[14]) then
  return 0
end
if ARGV[4] == 'reconciling' and ARGV[11] ~= '1' then
  local write_count = tonumber(count_of(s, r.backend))
  r.fence = string.format('%d', math.max((tonumber(r.fence) or 0) + 1, write_count))
end
r.state, r.owner, r.updated = ARGV[4], ARGV[5], now()
redis.call('HSET', s.intents, id, packed(r))
return 1
