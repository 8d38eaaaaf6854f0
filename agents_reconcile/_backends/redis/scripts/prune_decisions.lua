-- prune(): the decisions due for pruning, walked oldest first along the log (whose numbers
-- ascend), and their removal. A decision is due once decided (its record's decided_at) longer
-- than ARGV[3] seconds before the server's time, unless its intent is unresolved.
--
-- ARGV: version, 'find' or 'remove', seconds kept, then
--   'find'    the number the walk resumes after ('0': from the oldest), how many to examine.
--             KEYS: the global keys. Replies {last, more, due, examined}: the number of the
--             last decision examined (0 when none was), 1 when the log goes on after it (else
--             0), each due decision as {number, session id, intent id, bytes stored}, and how
--             many were examined. Changes nothing.
--   'remove'  how many sessions, then for each its id, how many numbers and the numbers.
--             KEYS: the global keys, then SESSION_WIDTH keys for each session, in order.
--             Removes each decision still due and still that session's, from the decisions,
--             the log, the session's list and its intent's list; an intent left without a
--             decision is no longer settled. Replies {removed, bytes}.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local cutoff = tonumber(now()) - tonumber(ARGV[3])

-- The record of decision `seq` read, when it is due (else nil).
local function due(seq)
  local record = redis.call('HGET', GLOBAL.decision, seq)
  if not record then
    return nil
  end
  local ok, body = pcall(cjson.decode, record)
  if not ok or type(body) ~= 'table' or type(body.decided_at) ~= 'number'
      or type(body.intent_id) ~= 'string' or type(body.session_id) ~= 'string' then
    return nil
  end
  if body.decided_at >= cutoff or redis.call('HEXISTS', GLOBAL.index, body.intent_id) == 1 then
    return nil
  end
  return body, record
end

if ARGV[2] == 'find' then
  local after, most = tonumber(ARGV[4]), tonumber(ARGV[5])
  local size = redis.call('LLEN', GLOBAL.log)
  -- The first position holding a number above `after`.
  local low, high = 0, size
  if after > 0 then
    while low < high do
      local middle = math.floor((low + high) / 2)
      if tonumber(redis.call('LINDEX', GLOBAL.log, middle)) <= after then
        low = middle + 1
      else
        high = middle
      end
    end
  end
  local numbers = redis.call('LRANGE', GLOBAL.log, low, low + most - 1)
  local found = {}
  for _, seq in ipairs(numbers) do
    local body, record = due(seq)
    if body then
      found[#found + 1] = {seq, body.session_id, body.intent_id, #seq + #record}
    end
  end
  local more = 0
  if low + #numbers < size then
    more = 1
  end
  return {numbers[#numbers] or 0, more, found, #numbers}
end

local removed, bytes = 0, 0
local at = 5
for n = 1, tonumber(ARGV[4]) do
  local s = session_keys(SESSION_AT + (n - 1) * SESSION_WIDTH)
  local session, asked = ARGV[at], tonumber(ARGV[at + 1])
  for i = 1, asked do
    local seq = ARGV[at + 1 + i]
    local body, record = due(seq)
    if body and body.session_id == session then
      local id = body.intent_id
      redis.call('HDEL', GLOBAL.decision, seq)
      redis.call('LREM', GLOBAL.log, 1, seq)
      redis.call('LREM', s.decisions, 1, seq)
      local left = {}
      for other in string.gmatch(redis.call('HGET', GLOBAL.decided, id) or '', '%d+') do
        if other ~= seq then
          left[#left + 1] = other
        end
      end
      if #left > 0 then
        redis.call('HSET', GLOBAL.decided, id, table.concat(left, ' '))
      else
        redis.call('HDEL', GLOBAL.decided, id)
        redis.call('SREM', GLOBAL.settled, id)
      end
      removed = removed + 1
      bytes = bytes + #seq + #record
    end
  end
  at = at + 2 + asked
end
return {removed, bytes}
