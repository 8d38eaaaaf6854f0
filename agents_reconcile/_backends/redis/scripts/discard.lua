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
local s = session_keys(SESSION_AT)
local r = intent_of(s, id)
if not r then
  local holder = redis.call('HGET', GLOBAL.index, id)
  -- Marked settled where its session is (a settlement from another bucket marks it here too).
  if not holder and ARGV[4] == '1' and redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
    return {'lost'}
  end
  return moved(holder)
end
if ARGV[4] == '1' and (r.state ~= 'in_flight' or r.owner ~= ARGV[5]
    or (ARGV[6] ~= '' and r.fence ~= ARGV[6])) then
  return {'lost'}
end
remove_intent(s, ARGV[3], id)
if r.backend ~= '' then
  raise_count(s, r.backend)
end
return 1
