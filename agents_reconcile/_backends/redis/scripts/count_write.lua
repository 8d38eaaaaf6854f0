-- count_write(): count a write that is not an intent. ARGV: version, backend.
-- Replies the new count.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
return redis.call('HINCRBY', session_keys(8).write_count, ARGV[2], 1)
