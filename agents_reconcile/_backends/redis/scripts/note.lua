-- note(): store a decision that leaves its intent unresolved.
-- ARGV: version, intent id, decision record. Replies the decision's sequence number.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
return store_decision(session_keys(SESSION_AT), ARGV[2], ARGV[3])
