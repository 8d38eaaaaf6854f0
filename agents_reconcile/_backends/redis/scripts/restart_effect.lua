-- restart_effect(): compare-and-set of a started effect's owner and record, for another run
-- of its body. ARGV: version, effect key, session id, owner expected, new owner, (unused: the
-- takeover is stamped with the server's time, from which the new owner's lease runs), new
-- record. Replies 1 (replaced), or 0 (nothing changed: the key is not this session's, is
-- done, or is started under another owner).
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local e = effect_keys()
local key = ARGV[2]
if redis.call('HGET', e.index, key) ~= ARGV[3] then
  return 0
end
if field(e.state, key) ~= 'started' or field(e.owner, key) ~= ARGV[4] then
  return 0
end
redis.call('HSET', e.owner, key, ARGV[5])
redis.call('HSET', e.updated, key, now())
redis.call('HSET', e.record, key, ARGV[7])
return 1
