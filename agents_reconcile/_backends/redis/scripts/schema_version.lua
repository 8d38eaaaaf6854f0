-- Stores a schema version when there is none, and tells what is there otherwise.
-- KEYS[1] the version key. ARGV[1] the version to store.
-- Replies {'created'} or {'found', stored version}.
local stored = redis.call('GET', KEYS[1])
if stored then
  return {'found', stored}
end
redis.call('SET', KEYS[1], ARGV[1])
return {'created'}
