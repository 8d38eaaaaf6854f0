-- Brings a journal's layout version to this release's (migrate(), and the first use of a
-- journal object). KEYS[1] the version key, KEYS[2] the upgrade time (UPGRADED in layout.py),
-- KEYS[3] the intent index, KEYS[4] the listing (LISTING). ARGV[1] this release's version.
--
-- An empty journal gets the version. A journal of layout 1 moves on with step 2: its counts
-- carry no stamp of when they were last raised, so the server's time now is kept as the stamp
-- they all stand for, and pruning ages them from the upgrade, never from the epoch. A journal
-- of layout 1 or 2 moves on with step 3: every intent of the index is put in the listing (one
-- member each, as listing_member() in prelude.lua writes it). Any other version is left as it is, for
-- the caller to judge.
-- Replies {'created'}, {'upgraded', version found} or {'found', version found}.
local stored = redis.call('GET', KEYS[1])
if not stored then
  redis.call('SET', KEYS[1], ARGV[1])
  return {'created'}
end
if (stored == '1' or stored == '2') and ARGV[1] == '3' then
  if stored == '1' then
    local t = redis.call('TIME')
    redis.call('SET', KEYS[2], t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
  end
  local held = redis.call('HGETALL', KEYS[3])
  for i = 1, #held, 2 do
    local id, session = held[i], held[i + 1]
    local escaped = string.gsub(session, '[%z\1]', {['\0'] = '\1\1', ['\1'] = '\1\2'})
    redis.call('ZADD', KEYS[4], 0, escaped .. '\0' .. id)
  end
  redis.call('SET', KEYS[1], ARGV[1])
  return {'upgraded', stored}
end
return {'found', stored}
