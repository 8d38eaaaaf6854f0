-- Brings a journal's layout version to this release's (migrate(), and the first use of a
-- journal object). KEYS[1] the version key, KEYS[2] the upgrade time (UPGRADED in layout.py).
-- ARGV[1] this release's version.
--
-- An empty journal gets the version. A journal of layout 1 moves to 2: its counts carry no
-- stamp of when they were last raised, so the server's time now is kept as the stamp they all
-- stand for, and pruning ages them from the upgrade, never from the epoch. Any other version is
-- left as it is, for the caller to judge.
-- Replies {'created'}, {'upgraded', version found} or {'found', version found}.
local stored = redis.call('GET', KEYS[1])
if not stored then
  redis.call('SET', KEYS[1], ARGV[1])
  return {'created'}
end
if stored == '1' and ARGV[1] == '2' then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
  redis.call('SET', KEYS[1], ARGV[1])
  return {'upgraded', stored}
end
return {'found', stored}
