-- finish_effect(): store an effect's receipt (state done) over its started record, only while
-- that record is started under the receipt's owner. ARGV: version, effect key, session id,
-- owner, (unused: the receipt is stamped with the server's time, which its age for pruning is
-- judged by), record. Replies
--   {'done'}          stored now
--   {'same'}          this very record is stored already (a call retried after its reply was
--                     lost): nothing changed
--   {'finished', row} done already with another record, for the caller to compare (a sealed
--                     output is sealed anew on every encoding); row as effect_row gives it
--   {'other'}         started under another owner
--   {'unknown'}       the key is not this session's
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local e = effect_keys()
local key = ARGV[2]
if redis.call('HGET', e.index, key) ~= ARGV[3] then
  return {'unknown'}
end
local state = field(e.state, key)
if state == 'done' then
  if field(e.record, key) == ARGV[6] then
    return {'same'}
  end
  return {'finished', effect_row(e, key)}
end
if state ~= 'started' or field(e.owner, key) ~= ARGV[4] then
  return {'other'}
end
redis.call('HSET', e.state, key, 'done')
redis.call('HSET', e.updated, key, now())
redis.call('HSET', e.record, key, ARGV[6])
redis.call('ZREM', e.started, key)
return {'done'}
