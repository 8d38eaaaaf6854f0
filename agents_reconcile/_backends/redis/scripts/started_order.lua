-- Where a page of started effects (started_effects_page) begins, from effect_started (scored
-- by begin time; members of one score in byte order). Read only; compares no strings, which
-- the caller does.
--
-- KEYS: the global keys, the effect index, the started effects. ARGV[1] 'session': every
-- started effect, as {key, score, session} triples, for the caller to keep one session's.
-- ARGV[1] 'page', then the limit, the cursor's score ('' from the first), the overdue time
-- ('' for none): replies {same, next, following, overdue}: the triples of the cursor's score
-- (all of them), those of higher scores (the first `limit`), how many have a higher score,
-- and how many of those were begun before the overdue time.
local index, started = KEYS[GLOBAL_WIDTH + 1], KEYS[GLOBAL_WIDTH + 2]

local function triples(flat)
  local out = {}
  for i = 1, #flat, 2 do
    out[#out + 1] = {flat[i], flat[i + 1], redis.call('HGET', index, flat[i]) or ''}
  end
  return out
end

if ARGV[1] == 'session' then
  return triples(redis.call('ZRANGE', started, 0, -1, 'WITHSCORES'))
end
local limit, score, overdue = tonumber(ARGV[2]), ARGV[3], ARGV[4]
local same, above = {}, '-inf'
if score ~= '' then
  same = triples(redis.call('ZRANGEBYSCORE', started, score, score, 'WITHSCORES'))
  above = '(' .. score
end
local later = triples(
  redis.call('ZRANGEBYSCORE', started, above, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
)
local late = 0
if overdue ~= '' then
  late = redis.call('ZCOUNT', started, above, '(' .. overdue)
end
return {same, later, redis.call('ZCOUNT', started, above, '+inf'), late}
