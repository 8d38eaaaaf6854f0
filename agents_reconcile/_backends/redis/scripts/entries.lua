-- Reads a session's unresolved intents, oldest first, as rows of
-- {id, backend, state, owner, updated_at, record, fencing token, age by the server's clock}.
-- ARGV: session id, 'one' or 'all', then for 'one' the intent id (the reply is empty when
-- the id is not this session's), for 'all' '1' when filtering by backend and that backend.
local s = session_keys(SESSION_AT)
if ARGV[2] == 'one' then
  local r = intent_of(s, ARGV[3])
  if not r then
    return {}
  end
  return {intent_row(ARGV[3], r)}
end
local rows = {}
for _, r in ipairs(held(s)) do
  if ARGV[3] ~= '1' or r.backend == ARGV[4] then
    rows[#rows + 1] = intent_row(r.id, r)
  end
end
return rows
