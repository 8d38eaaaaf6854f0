-- discard(): forget an unresolved intent without a decision.
-- ARGV: version, intent id, session expected to hold it. Replies 1, or -1 when the id is
-- not that session's.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
if redis.call('HGET', GLOBAL.index, id) ~= ARGV[3] then
  return -1
end
remove_intent(session_keys(8), id)
return 1
