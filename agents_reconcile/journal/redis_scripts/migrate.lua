-- migrate(): bring the journal's schema version to this release's. A Redis step adds keys
-- and rewrites nothing, so an older version is raised in place; a newer one, or a value that
-- is no version, is left alone for the caller to refuse. ARGV: this release's version.
-- Replies {'created'} (there was none), {'current'}, {'upgraded', older version} or
-- {'found', stored value}.
local stored = redis.call('GET', GLOBAL.schema)
if not stored then
  redis.call('SET', GLOBAL.schema, ARGV[1])
  return {'created'}
end
if stored == ARGV[1] then
  return {'current'}
end
if string.match(stored, '^%d+$') then
  local found = tonumber(stored)
  if found >= 1 and found < tonumber(ARGV[1]) then
    redis.call('SET', GLOBAL.schema, ARGV[1])
    return {'upgraded', stored}
  end
end
return {'found', stored}
