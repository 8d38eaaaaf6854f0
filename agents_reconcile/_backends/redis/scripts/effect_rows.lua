-- Reads a session's effects as rows {key, state, owner, record} (effect_row).
-- ARGV: session id, then 'one' and an effect key (the reply is empty when the key is not this
-- session's), 'some' and effect keys (those of them that are this session's and started, in
-- the order given), or 'all' (every effect of the session, oldest first).
local e = effect_keys()
if ARGV[2] == 'some' then
  local rows = {}
  for i = 3, #ARGV do
    local key = ARGV[i]
    if redis.call('HGET', e.index, key) == ARGV[1] and field(e.state, key) == 'started' then
      rows[#rows + 1] = effect_row(e, key)
    end
  end
  return rows
end
if ARGV[2] == 'one' then
  local key = ARGV[3]
  if redis.call('HGET', e.index, key) ~= ARGV[1] then
    return {}
  end
  return {effect_row(e, key)}
end
local rows = {}
for _, key in ipairs(redis.call('LRANGE', e.order, 0, -1)) do
  rows[#rows + 1] = effect_row(e, key)
end
return rows
