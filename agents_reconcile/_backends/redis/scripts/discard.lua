-- discard(): forget an unresolved intent without a decision, counting a write of its session
-- (an acknowledged write has landed: a tail read while it was in flight is out of date).
-- ARGV: version, intent id, session expected to hold it, then '1' when the caller must still
-- hold it in flight, that owner, and its fencing token ('' for any). Replies 1, {'lost'} (held
-- otherwise, or, for a caller that must hold it, settled: taken over and closed by another;
-- nothing changed), or {'moved', holder} ({'moved'} when no session holds the id) when the id
-- is not that session's.
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
local holder = redis.call('HGET', GLOBAL.index, id)
if holder ~= ARGV[3] then
  -- Marked settled where its session is (a settlement from another bucket marks it here too).
  if not holder and ARGV[4] == '1' and redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
    return {'lost'}
  end
  return moved(holder)
end
local s = session_keys(SESSION_AT)
if ARGV[4] == '1' and (field(s.state, id) ~= 'in_flight' or field(s.owner, id) ~= ARGV[5]
    or (ARGV[6] ~= '' and field(s.fence, id) ~= ARGV[6])) then
  return {'lost'}
end
local backend = redis.call('HGET', s.backend, id)
remove_intent(s, id)
if backend then
  raise_count(s, backend)
end
return 1
