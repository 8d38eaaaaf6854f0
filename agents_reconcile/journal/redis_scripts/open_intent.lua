-- open_intent(): record an intent and count it as a write of its session, only while its
-- session and backend have no other unresolved intent and, when ARGV[10] is not empty, the
-- session's count is still that number. ARGV[1..9] as for record(). ARGV[11], when not
-- empty, is an acknowledged intent cleared first (as discard() does, counting a write), only
-- while it is in flight under this owner in this session and backend. Replies, with the
-- session's count as found second (after the clearing):
--   {'recorded', writes}               recorded now (writes: the count before it)
--   {'held', writes, seq, row}         the id is already this session's unresolved intent;
--                                      seq is the count stored when it was opened ('' if
--                                      none), row as entries.lua gives it
--   {'blocked', writes, rows}          other unresolved intents, oldest first
--   {'stale', writes}                  the count is not the one expected
--   {'settled'} or {'taken'}           as for record()
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local s = session_keys(8)
local id, backend = ARGV[2], ARGV[4]
local clearing = ARGV[11]
if clearing and clearing ~= '' and redis.call('HGET', GLOBAL.index, clearing) == ARGV[3]
  and redis.call('HGET', s.backend, clearing) == backend
  and redis.call('HGET', s.state, clearing) == 'in_flight'
  and redis.call('HGET', s.owner, clearing) == ARGV[6] then
  remove_intent(s, clearing)
  redis.call('HINCRBY', s.writes, backend, 1)
end
local writes = redis.call('HGET', s.writes, backend) or '0'
-- Before the scan, which would list the intent itself as blocking: a call retried after its
-- reply was lost finds what its first attempt recorded.
local holder = redis.call('HGET', GLOBAL.index, id)
if holder then
  if holder ~= ARGV[3] then
    return {'taken'}
  end
  return {'held', writes, field(s.write_seq, id), intent_row(s, id)}
end
local blocking = {}
for _, other in ipairs(redis.call('ZRANGE', s.open, 0, -1)) do
  if redis.call('HGET', s.backend, other) == backend then
    blocking[#blocking + 1] = intent_row(s, other)
  end
end
if #blocking > 0 then
  return {'blocked', writes, blocking}
end
if redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
  return {'settled'}
end
if ARGV[10] ~= '' and tonumber(ARGV[10]) ~= tonumber(writes) then
  return {'stale', writes}
end
store_intent(s, writes)
return {'recorded', writes}
