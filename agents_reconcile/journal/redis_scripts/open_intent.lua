-- open_intent(): record an intent only while its session and backend have none unresolved,
-- counting it as a write. ARGV as for record(). Replies {'blocked', writes, rows} or
-- record()'s reply with the write count before this intent inserted second.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local s = session_keys(8)
local backend = ARGV[4]
local writes = redis.call('HGET', s.writes, backend) or '0'
local blocking = {}
for _, other in ipairs(redis.call('ZRANGE', s.open, 0, -1)) do
  if redis.call('HGET', s.backend, other) == backend then
    blocking[#blocking + 1] = intent_row(s, other)
  end
end
if #blocking > 0 then
  return {'blocked', writes, blocking}
end
local reply = record_intent(s)
return {reply[1], writes, reply[2]}
