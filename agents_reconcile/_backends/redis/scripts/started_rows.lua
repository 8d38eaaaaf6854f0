-- Reads the started effects of a page (started_effects_page) with the newest decision of
-- each. Read only.
--
-- KEYS: the global keys, the effect index, the started effects, then the five effect keys of
-- each session named in ARGV (EFFECT_KEYS order). ARGV[1]: how many sessions; then for each,
-- its id, how many effect keys and the keys. Replies for each session {id, rows, newest}:
-- rows {key, state, owner, record} of the keys that are still the session's and started,
-- newest {key, number, record} triples.
local index = KEYS[GLOBAL_WIDTH + 1]
local sessions = {}
local at = 2
for n = 1, tonumber(ARGV[1]) do
  local e = effect_keys(EFFECT_AT + (n - 1) * 5)
  local session, asked = ARGV[at], tonumber(ARGV[at + 1])
  local rows, newest = {}, {}
  for i = 1, asked do
    local key = ARGV[at + 1 + i]
    if redis.call('HGET', index, key) == session and field(e.state, key) == 'started' then
      rows[#rows + 1] = effect_row(e, key)
      local listed = redis.call('HGET', GLOBAL.decided, key)
      local seq = listed and string.match(listed, '(%d+)%s*$')
      if seq then
        newest[#newest + 1] = {key, seq, redis.call('HGET', GLOBAL.decision, seq) or ''}
      end
    end
  end
  at = at + 2 + asked
  sessions[#sessions + 1] = {session, rows, newest}
end
return sessions
