-- migrate(): store the schema version when there is none. ARGV: version.
-- Replies {'created'} or {'found', stored version}.
local stored = redis.call('GET', GLOBAL.schema)
if stored then
  return {'found', stored}
end
redis.call('SET', GLOBAL.schema, ARGV[1])
return {'created'}
