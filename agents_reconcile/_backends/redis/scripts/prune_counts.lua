-- prune(): remove a session's write counts when the session was last counted (the stamp of its
-- counts, STAMP) longer than ARGV[2] seconds before the server's time, each only while the
-- session has no unresolved intent under its backend, and raise the journal's floor to the
-- highest removed: a session without a count reads as the floor, so its count never goes down.
-- The stamp goes with the last count. KEYS: the global keys, then the session's keys (the sweep
-- found its counts). ARGV: version, seconds kept, '1' for a dry run (count, remove nothing).
-- Counts without a stamp are kept. Replies {removed, bytes}.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local s = session_keys(SESSION_AT)
local cutoff = tonumber(now()) - tonumber(ARGV[2])
local dry = ARGV[3] == '1'

local counted = tonumber(redis.call('HGET', s.write_count, STAMP))
if not counted or counted >= cutoff then
  return {0, 0}
end
local busy = {}
for _, value in ipairs(redis.call('HVALS', s.intents)) do
  local backend = unpacked(value).backend
  if backend ~= '' then
    busy[backend] = true
  end
end
local counts = redis.call('HGETALL', s.write_count)
local before = tonumber(floor())
local highest = before
local removed, bytes, kept = 0, 0, 0
for i = 1, #counts, 2 do
  local backend, count = counts[i], counts[i + 1]
  if backend ~= STAMP then
    if busy[backend] then
      kept = kept + 1
    else
      removed = removed + 1
      bytes = bytes + #backend + #count
      if not dry then
        redis.call('HDEL', s.write_count, backend)
        highest = math.max(highest, tonumber(count) or 0)
      end
    end
  end
end
if not dry and kept == 0 then
  redis.call('HDEL', s.write_count, STAMP)
end
if highest > before then
  redis.call('SET', GLOBAL.floor, string.format('%d', highest))
end
return {removed, bytes}
