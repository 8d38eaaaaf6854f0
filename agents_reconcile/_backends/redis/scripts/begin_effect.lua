-- begin_effect(): record an effect's intent unless its key is known (set if absent).
-- ARGV: version, effect key, session id, state, owner, (unused: the effect is stamped, and
-- scored among the started ones, with the server's time, by which its lease is judged),
-- record.
-- Replies {'recorded', row} (stored now), {'exists', row} (the key was this session's
-- already; row is what is stored) or {'elsewhere', holder} (the key belongs to the session
-- holder, whose keys this script was not given). Rows as effect_row gives them.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local e = effect_keys()
local key, session = ARGV[2], ARGV[3]
local holder = redis.call('HGET', e.index, key)
if holder then
  if holder ~= session then
    return {'elsewhere', holder}
  end
  return {'exists', effect_row(e, key)}
end
redis.call('HSET', e.index, key, session)
redis.call('RPUSH', e.order, key)
redis.call('HSET', e.state, key, ARGV[4])
redis.call('HSET', e.owner, key, ARGV[5])
redis.call('HSET', e.updated, key, now())
redis.call('HSET', e.record, key, ARGV[7])
if ARGV[4] == 'started' then
  redis.call('ZADD', e.started, now(), key)
end
return {'recorded', effect_row(e, key)}
