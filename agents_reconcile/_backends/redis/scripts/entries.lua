-- Reads a session's unresolved intents, oldest first, as rows of
-- {id, backend, state, owner, updated_at, record, fencing token, age by the server's clock}.
-- ARGV: session id, 'one' or 'all', then for 'one' the intent id (the reply is empty when
-- the id is not this session's), for 'all' '1' when filtering by backend and that backend.
local s = session_keys(SESSION_AT)
if ARGV[2] == 'one' then
  local id = ARGV[3]
  if redis.call('HGET', GLOBAL.index, id) ~= ARGV[1] then
    return {}
  end
  return {intent_row(s, id)}
end
local rows = {}
for _, id in ipairs(redis.call('ZRANGE', s.open, 0, -1)) do
  if ARGV[3] ~= '1' or redis.call('HGET', s.backend, id) == ARGV[4] then
    rows[#rows + 1] = intent_row(s, id)
  end
end
return rows
