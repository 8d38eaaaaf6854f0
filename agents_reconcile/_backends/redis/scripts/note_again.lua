-- note_again(): count a decision reached again. The newest decision about an intent, while its
-- record is still ARGV[3], becomes ARGV[4] (the same decision with its repeat count and time).
-- ARGV: version, intent id, expected record, new record. Replies 1 when replaced, else 0.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local numbers = redis.call('HGET', GLOBAL.decided, ARGV[2])
if not numbers then
  return 0
end
local newest = string.match(numbers, '(%d+)$')
if redis.call('HGET', GLOBAL.decision, newest) ~= ARGV[3] then
  return 0
end
redis.call('HSET', GLOBAL.decision, newest, ARGV[4])
return 1
