-- Reads the newest decision of each intent named in ARGV, as {intent id, sequence number,
-- record} triples; an intent without a decision is left out. One command, whatever their number.
local out = {}
for i = 1, #ARGV do
  local listed = redis.call('HGET', GLOBAL.decided, ARGV[i])
  if listed then
    local newest = nil
    for seq in string.gmatch(listed, '%d+') do
      newest = seq
    end
    if newest then
      out[#out + 1] = {ARGV[i], newest, redis.call('HGET', GLOBAL.decision, newest) or ''}
    end
  end
end
return out
