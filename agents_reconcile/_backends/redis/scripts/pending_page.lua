-- Reads a page of unresolved intents (pending_page) with the newest decision of each, and
-- counts which of the intents that follow the page wait for an operator. Read only.
--
-- KEYS: the global keys, then SESSION_WIDTH keys for each session named in ARGV, in order.
-- ARGV[1]: how many sessions; then for each, its id, how many of its intents are asked for
-- ('all': every one it holds) and their ids; then the ids of the intents that follow the page.
-- Replies {sessions, waiting}: for each session {id, rows, newest}, rows as entries.lua gives
-- them (an intent no longer the session's is left out), newest {intent id, number, record}
-- triples; waiting, how many of the following intents have a newest decision that denied
-- them or left them pending (or one that cannot be read: a person should look at it).
local function newest_of(id)
  local listed = redis.call('HGET', GLOBAL.decided, id)
  if not listed then
    return nil
  end
  local seq = string.match(listed, '(%d+)%s*$')
  if not seq then
    return nil
  end
  return seq, redis.call('HGET', GLOBAL.decision, seq) or ''
end

local sessions = {}
local at = 2
for n = 1, tonumber(ARGV[1]) do
  local s = session_keys(SESSION_AT + (n - 1) * SESSION_WIDTH)
  local session, asked = ARGV[at], ARGV[at + 1]
  local found = {}
  if asked == 'all' then
    found = held(s)
    at = at + 2
  else
    for i = 1, tonumber(asked) do
      local id = ARGV[at + 1 + i]
      local r = intent_of(s, id)
      if r then
        r.id = id
        found[#found + 1] = r
      end
    end
    at = at + 2 + tonumber(asked)
  end
  local rows, newest = {}, {}
  for _, r in ipairs(found) do
    local id = r.id
    rows[#rows + 1] = intent_row(id, r)
    local seq, record = newest_of(id)
    if seq then
      newest[#newest + 1] = {id, seq, record}
    end
  end
  sessions[#sessions + 1] = {session, rows, newest}
end

local waiting = 0
for i = at, #ARGV do
  local seq, record = newest_of(ARGV[i])
  if seq then
    local ok, body = pcall(cjson.decode, record)
    if not ok or type(body) ~= 'table' or body.action == 'denied'
        or body.action == 'left_pending' then
      waiting = waiting + 1
    end
  end
end
return {sessions, waiting}
