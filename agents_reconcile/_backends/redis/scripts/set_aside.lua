-- set_aside(): move a damaged intent aside, only while its row still holds the very record,
-- state and owner the operator read: remove the intent, settle it with the decision (counting
-- a write of its session under the row's backend), and keep its bytes beside their
-- description. The session's keys are those of the session holding the intent; the three keys
-- after them (ASIDE_KEYS) map a number to a description, the same number to the bytes, and list
-- the intent ids in the order they were set aside (the number is the position).
-- ARGV: version, intent id, session id, record, state, owner, backend, decision record,
-- description, update time (as read: a renewal since the read leaves the row where it is).
-- Replies {'done'} or {'changed'} (the row is gone, moved or no longer the one read).
local refusal = schema_refusal(ARGV[1])
if refusal then
  return refusal
end
local id = ARGV[2]
local s = session_keys(SESSION_AT)
local r = intent_of(s, id)
if not r or r.record ~= ARGV[4] or r.state ~= ARGV[5] or r.owner ~= ARGV[6]
    or r.backend ~= ARGV[7] or r.updated ~= ARGV[10] then
  return {'changed'}
end
remove_intent(s, ARGV[3], id)
redis.call('SADD', GLOBAL.settled, id)
raise_count(s, ARGV[7])
store_decision(s, id, ARGV[8])
local aside = SESSION_AT + SESSION_WIDTH
local number = redis.call('RPUSH', KEYS[aside + 2], id)
redis.call('HSET', KEYS[aside], number, ARGV[9])
redis.call('HSET', KEYS[aside + 1], number, ARGV[4])
return {'done'}
