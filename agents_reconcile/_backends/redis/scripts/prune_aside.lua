-- prune(): remove the set-aside entries set aside (their description's set_aside_at) longer
-- than ARGV[2] seconds before the server's time, walked by position (the order they were set
-- aside in). KEYS: the global keys, then the three of ASIDE_KEYS in layout.py: descriptions
-- and bytes by position, and the list of intent ids that numbers them, where a removed entry
-- leaves an empty id (the positions of the others stay theirs).
-- ARGV: version, seconds kept, the position the walk resumes after ('0': from the first), how
-- many to examine, '1' for a dry run (count, remove nothing).
-- Replies {last, more, removed, bytes, examined}: the position of the last entry examined (0
-- when none was), 1 when entries follow it (else 0), how many were (or would be) removed, their
-- bytes, and how many were examined.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local described, kept, order = KEYS[GLOBAL_WIDTH + 1], KEYS[GLOBAL_WIDTH + 2],
  KEYS[GLOBAL_WIDTH + 3]
local cutoff = tonumber(now()) - tonumber(ARGV[2])
local after, most, dry = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'

local positions = {}
for _, position in ipairs(redis.call('HKEYS', described)) do
  local number = tonumber(position)
  if number and number > after then
    positions[#positions + 1] = number
  end
end
table.sort(positions)
local last, removed, bytes = 0, 0, 0
local examined = math.min(most, #positions)
for i = 1, examined do
  local number = positions[i]
  local position = string.format('%d', number)
  local description = redis.call('HGET', described, position) or ''
  local ok, body = pcall(cjson.decode, description)
  if ok and type(body) == 'table' and type(body.set_aside_at) == 'number'
      and body.set_aside_at < cutoff then
    local record = redis.call('HGET', kept, position) or ''
    removed = removed + 1
    bytes = bytes + #description + #record
    if not dry then
      redis.call('HDEL', described, position)
      redis.call('HDEL', kept, position)
      if body.intent_id and redis.call('LINDEX', order, number - 1) == body.intent_id then
        redis.call('LSET', order, number - 1, '')
      end
    end
  end
  last = number
end
local more = 0
if #positions > examined then
  more = 1
end
return {last, more, removed, bytes, examined}
