-- One write to a revisioned session: check, store, record, move the head, all or nothing.
-- Redis runs a script without interleaving any other command, so no other writer can slip
-- between the head check and the head move.
--
-- KEYS[1] items   list of the session's items, JSON text, oldest first
-- KEYS[2] head    the session's head revision (absent = 0)
-- KEYS[3] writes  sorted set of write records (JSON), scored by revision
-- KEYS[4] ids     hash write id -> the same record
--
-- ARGV[1] kind      'append', 'pop' or 'clear'
-- ARGV[2] expected  the head the caller requires, or '' for whatever it is
-- ARGV[3] write_id
-- ARGV[4] writer
-- ARGV[5..] the items to append (JSON text), for 'append'
--
-- Replies: {'ok', revision} ('append', 'clear'), {'ok', revision, item} ('pop'),
-- {'empty', head} (a pop on an empty list: nothing recorded),
-- {'head', head} (the head is not the expected one: nothing written),
-- {'known', head} (the write id is already recorded: nothing written).
--
-- The time recorded is the server's (TIME), so writers on different hosts share one clock.
-- open_and_append.lua writes the same record for an append made
-- together with its intent: keep the two alike.

local items_key, head_key, writes_key, ids_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kind, expected, write_id, writer = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local head = tonumber(redis.call('GET', head_key) or '0')
if head == nil then
  return redis.error_reply('ERR head of ' .. head_key .. ' is not a revision')
end
if expected ~= '' and head ~= tonumber(expected) then
  return {'head', head}
end
if redis.call('HEXISTS', ids_key, write_id) == 1 then
  return {'known', head}
end

local count = 0
local popped = nil
if kind == 'append' then
  -- unpack() is bounded by the Lua stack: push in slices.
  local slice = 1000
  for first = 5, #ARGV, slice do
    redis.call('RPUSH', items_key, unpack(ARGV, first, math.min(first + slice - 1, #ARGV)))
  end
  count = #ARGV - 4
elseif kind == 'pop' then
  popped = redis.call('RPOP', items_key)
  if not popped then
    return {'empty', head}
  end
  count = 1
elseif kind == 'clear' then
  count = redis.call('LLEN', items_key)
  redis.call('DEL', items_key)
else
  return redis.error_reply('ERR unknown write kind ' .. kind)
end

local revision = head + 1
local now = redis.call('TIME')
-- 'at' travels as text: cjson would round a float to 14 significant digits.
local record = cjson.encode({
  revision = revision,
  write_id = write_id,
  writer = writer,
  kind = kind,
  count = count,
  at = now[1] .. '.' .. string.format('%06d', tonumber(now[2])),
})
redis.call('ZADD', writes_key, revision, record)
redis.call('HSET', ids_key, write_id, record)
redis.call('SET', head_key, revision)
if popped then
  return {'ok', revision, popped}
end
return {'ok', revision}
