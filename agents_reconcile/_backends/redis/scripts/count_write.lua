-- count_write(): count a write that is not an intent. ARGV: version, backend.
-- Replies the new count.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
return raise_count(session_keys(SESSION_AT), ARGV[2])
