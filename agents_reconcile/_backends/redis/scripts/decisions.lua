-- Reads stored decisions, newest first, as pairs {sequence number, record}.
-- ARGV: '1' to read one intent's decisions (all of them), that intent id, the limit, '1' to
-- read the session of the keys after the global ones (otherwise the whole log).
local seqs = {}
if ARGV[1] == '1' then
  local listed = redis.call('HGET', GLOBAL.decided, ARGV[2])
  if listed then
    for seq in string.gmatch(listed, '%d+') do
      table.insert(seqs, 1, seq)
    end
  end
else
  local source = GLOBAL.log
  if ARGV[4] == '1' then
    source = session_keys(SESSION_AT).decisions
  end
  local listed = redis.call('LRANGE', source, -tonumber(ARGV[3]), -1)
  for i = #listed, 1, -1 do
    seqs[#seqs + 1] = listed[i]
  end
end
local out = {}
for i, seq in ipairs(seqs) do
  out[i] = {seq, redis.call('HGET', GLOBAL.decision, seq) or ''}
end
return out
