-- record(): store a new intent. Replies {'recorded'}, {'settled'}, {'taken'} (the id belongs
-- to another session) or {'exists', stored record} for the caller to compare.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
return record_intent(session_keys(SESSION_AT))
