-- open_and_append(): open_intent() and the revisioned store's compare-and-swap append
-- (scripts/write.lua, kind 'append') as one script, for a journal and a store on
-- one Redis server: the intent is recorded exactly when its batch is appended, in one round
-- trip. ARGV[1..11] and the journal's keys as for open_intent(); the store's four session keys
-- follow them: items, head, writes, ids.
-- ARGV[12] the head the append requires
-- ARGV[13] writer
-- ARGV[14] the count the caller's run accounts for ('' for any): a count past it refuses
-- ARGV[15..] the items (JSON text)
--
-- The write id is the intent id (ARGV[2]). Replies: open_intent()'s when the intent is not to
-- be opened (nothing appended); {'stale_state', write_count, 0} when the count is past ARGV[14];
-- {'head', write_count, head} or {'known', write_count, head} when the store refuses (in each,
-- nothing recorded, nothing appended; the clearing of ARGV[11] stands); {'recorded', write_count, revision}
-- when both were done.
local opening, answer = try_open()
if answer then
  if opening then
    finish_open(opening, false)
  end
  return answer
end
local write_count = string.format('%d', opening.count)

if ARGV[14] ~= '' and opening.count > tonumber(ARGV[14]) then
  finish_open(opening, false)
  return {'stale_state', write_count, 0}
end

local store = SESSION_AT + SESSION_WIDTH
local items_key, head_key = KEYS[store], KEYS[store + 1]
local writes_key, ids_key = KEYS[store + 2], KEYS[store + 3]
local id = ARGV[2]
local head = tonumber(redis.call('GET', head_key) or '0')
if head == nil then
  finish_open(opening, false)
  return redis.error_reply('ERR head of ' .. head_key .. ' is not a revision')
end
if head ~= tonumber(ARGV[12]) then
  finish_open(opening, false)
  return {'head', write_count, head}
end
if redis.call('HEXISTS', ids_key, id) == 1 then
  finish_open(opening, false)
  return {'known', write_count, head}
end

finish_open(opening, true)
local slice = 1000
for first = 15, #ARGV, slice do
  redis.call('RPUSH', items_key, unpack(ARGV, first, math.min(first + slice - 1, #ARGV)))
end
local revision = head + 1
-- The same record as write.lua's: 'at' travels as text (cjson rounds floats); the instant is
-- the one the intent was stamped with.
local record = cjson.encode({
  revision = revision,
  write_id = id,
  writer = ARGV[13],
  kind = 'append',
  count = #ARGV - 14,
  at = now(),
})
redis.call('ZADD', writes_key, revision, record)
redis.call('HSET', ids_key, id, record)
redis.call('SET', head_key, revision)
return {'recorded', write_count, revision}
