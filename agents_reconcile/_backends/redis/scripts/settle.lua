-- settle(): close an intent and store the decision that closed it, counting a write of the
-- decision's session. The first session's keys belong to the session holding the intent (the
-- deciding session's when none does), the second's to the deciding session.
-- ARGV: version, intent id, '1' when a session is expected to hold the intent, that session,
-- '1' when fenced by an owner, that owner, the reconciling state, backend, decision record,
-- the owner's fencing token ('' for any).
-- Replies {'done'} (also when this very decision settled it before: a retried call),
-- {'settled'} (settled before, otherwise), {'unclaimed'} (the owner lost the claim)
-- or {'moved', holder} (the intent's holder is not the one expected; {'moved'} when none
-- holds it).
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
if redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
  if decided_as(id, ARGV[9]) then
    return {'done'}
  end
  return {'settled'}
end
local holder = redis.call('HGET', GLOBAL.index, id)
if ARGV[3] == '1' then
  if holder ~= ARGV[4] then
    return moved(holder)
  end
elseif holder then
  return moved(holder)
end
if holder then
  local s = session_keys(SESSION_AT)
  local r = intent_of(s, id)
  if ARGV[5] == '1' and (not r or r.state ~= ARGV[7] or r.owner ~= ARGV[6]
      or (ARGV[10] ~= '' and r.fence ~= ARGV[10])) then
    return {'unclaimed'}
  end
  remove_intent(s, holder, id)
end
local d = session_keys(SESSION_AT + SESSION_WIDTH)
redis.call('SADD', GLOBAL.settled, id)
raise_count(d, ARGV[8])
store_decision(d, id, ARGV[9])
return {'done'}
