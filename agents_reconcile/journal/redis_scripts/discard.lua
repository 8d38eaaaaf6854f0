-- discard(): forget an unresolved intent without a decision.
-- ARGV: version, intent id, session expected to hold it. Replies 1, or {'moved', holder}
-- ({'moved'} when no session holds the id) when the id is not that session's.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
local holder = redis.call('HGET', GLOBAL.index, id)
if holder ~= ARGV[3] then
  return moved(holder)
end
remove_intent(session_keys(8), id)
return 1
