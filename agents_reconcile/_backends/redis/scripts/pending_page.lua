-- Reads unresolved intents with the newest decision of each (pending_page). Read only.
--
-- KEYS: the global keys, then SESSION_WIDTH keys for each session named in ARGV, in order.
--
-- ARGV[1] 'page': a page of the listing, from the sessions its first step found (in byte
-- order); ARGV[2] '1' when there is a cursor, ARGV[3] and ARGV[4] its session and intent id,
-- ARGV[5] how many rows (limit), ARGV[6] how many intents in all (the page and those that
-- follow it that are counted), then the session ids. Goes through the sessions' intents after
-- the cursor in (session, id) byte order, up to ARGV[6] of them: the first ARGV[5] as rows,
-- the others only named, with whether each waits for an operator (its newest decision denied
-- it or left it pending, or cannot be read: a person should look at it). Replies {sessions,
-- following}: sessions as below for the rows; following {session, id, 1 or 0} triples.
--
-- Else ARGV[1] is how many sessions; then for each, its id and 'all' (every intent it holds).
-- Replies {sessions, 0}: for each session {id, rows, newest}, rows as entries.lua gives them,
-- newest {intent id, number, record} triples.
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

local function waits(id)
  local seq, record = newest_of(id)
  if not seq then
    return 0
  end
  local ok, body = pcall(cjson.decode, record)
  if not ok or type(body) ~= 'table' or body.action == 'denied'
      or body.action == 'left_pending' then
    return 1
  end
  return 0
end

-- One session's reply: {id, rows, newest} for the rows found.
local function session_reply(session, found)
  local rows, newest = {}, {}
  for _, r in ipairs(found) do
    local id = r.id
    rows[#rows + 1] = intent_row(id, r)
    local seq, record = newest_of(id)
    if seq then
      newest[#newest + 1] = {id, seq, record}
    end
  end
  return {session, rows, newest}
end

if ARGV[1] ~= 'page' then
  local sessions = {}
  for n = 1, tonumber(ARGV[1]) do
    local s = session_keys(SESSION_AT + (n - 1) * SESSION_WIDTH)
    sessions[#sessions + 1] = session_reply(ARGV[2 * n], held(s))
  end
  return {sessions, 0}
end

local has_cursor, after_session, after_id = ARGV[2] == '1', ARGV[3], ARGV[4]
local limit, wanted = tonumber(ARGV[5]), tonumber(ARGV[6])
local sessions, following = {}, {}
local seen = 0
for n = 7, #ARGV do
  if seen >= wanted then
    break
  end
  local session = ARGV[n]
  local s = session_keys(SESSION_AT + (n - 7) * SESSION_WIDTH)
  local ids = redis.call('HKEYS', s.intents)
  if #ids > 1 then
    table.sort(ids, bytes_before)
  end
  local found = {}
  for _, id in ipairs(ids) do
    if seen >= wanted then
      break
    end
    if not (has_cursor and session == after_session and not bytes_before(after_id, id)) then
      seen = seen + 1
      if seen <= limit then
        local r = intent_of(s, id)
        r.id = id
        found[#found + 1] = r
      else
        following[#following + 1] = {session, id, waits(id)}
      end
    end
  end
  if #found > 0 then
    sessions[#sessions + 1] = session_reply(session, found)
  end
end
return {sessions, following}
