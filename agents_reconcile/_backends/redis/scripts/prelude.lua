-- Loaded in front of every script of the Redis journal.
--
-- KEYS[1..9] are the journal's global keys (GLOBAL_WIDTH). A session then passes
-- SESSION_WIDTH (three) keys of its own, all sharing the session's hash tag: from KEYS[SESSION_AT]
-- on, and for settle() the deciding session's right after. Scripts touch only the keys they
-- are given.

-- In the order of GLOBAL_KEYS in layout.py.
local GLOBAL = {
  schema = KEYS[1],
  index = KEYS[2],
  settled = KEYS[3],
  seq = KEYS[4],
  log = KEYS[5],
  decided = KEYS[6],
  decision = KEYS[7],
  floor = KEYS[8],
  listing = KEYS[9],
}
local GLOBAL_WIDTH = 9
local SESSION_AT = GLOBAL_WIDTH + 1

-- In the order of SESSION_KEYS in layout.py.
local SESSION_WIDTH = 3
-- The field of a session's write_count hash stamped with when a count was last raised (STAMP in
-- layout.py; no backend identity is empty).
local STAMP = ''

local function session_keys(first)
  return {
    intents = KEYS[first],
    write_count = KEYS[first + 1],
    decisions = KEYS[first + 2],
  }
end

-- Writes go only to a journal laid out by this schema version. An empty journal gets the
-- version with its first write, so data never exists without one.
local function schema_refusal(version)
  local stored = redis.call('GET', GLOBAL.schema)
  if not stored then
    redis.call('SET', GLOBAL.schema, version)
    return nil
  end
  if stored ~= version then
    return redis.error_reply('AGENTS_RECONCILE_SCHEMA ' .. stored)
  end
  return nil
end

-- The reply to a caller that named the wrong session for an intent: the session holding it,
-- if any, so that the caller can try again without asking.
local function moved(holder)
  if holder then
    return {'moved', holder}
  end
  return {'moved'}
end

-- A missing field reads as an empty string: a nil would cut the reply short.
local function field(key, id)
  return redis.call('HGET', key, id) or ''
end

-- The server's time, in seconds: leases are judged on the journal's clock, never a writer's.
-- Read once per script: every stamp one script makes is the same instant.
local clock = nil
local function now()
  if not clock then
    local t = redis.call('TIME')
    clock = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
  end
  return clock
end

-- The journal's floor: the highest write count pruned (0 until one is).
local function floor()
  return redis.call('GET', GLOBAL.floor) or '0'
end

-- A session's write count under a backend, as text: the count stored, or the floor when none
-- is (never counted, or pruned): a count never goes down.
local function count_of(s, backend)
  return redis.call('HGET', s.write_count, backend) or floor()
end

-- Stores a session's count under a backend (a number) and stamps the session's counts with the
-- server's time (their age when idle, for pruning): one command.
local function set_count(s, backend, count)
  redis.call('HSET', s.write_count, backend, string.format('%d', count), STAMP, now())
end

-- Counts a write of a session under a backend: one above its count (count_of). Returns the new
-- count.
local function raise_count(s, backend)
  local raised = tonumber(count_of(s, backend)) + 1
  set_count(s, backend, raised)
  return raised
end

-- An unresolved intent is one field of its session's intents hash (ROW in layout.py): a header
-- line, '<state> <fencing token> <updated> <created_at> <bytes of backend> <bytes of owner>',
-- then the backend, the owner and the record, back to back. The token is empty for an intent
-- recorded by record(); updated is when its state or owner last changed (the server's clock).
local function packed(r)
  return r.state .. ' ' .. r.fence .. ' ' .. r.updated .. ' ' .. r.created .. ' ' .. #r.backend
    .. ' ' .. #r.owner .. '\n' .. r.backend .. r.owner .. r.record
end

-- A stored row as a table of its parts but its record (nil for none): `value` the row, and
-- `record_at` where the record starts in it, so that a reader of the header alone (try_open(),
-- on every append) copies no record. A value that is not a row reads as a row of empty parts
-- holding it all as its record, for the reader to judge.
local function header(value)
  if not value then
    return nil
  end
  local state, fence, updated, created, backend, owner, at =
    string.match(value, '^(%S*) (%S*) (%S*) (%S*) (%d+) (%d+)\n()')
  if not state then
    return {state = '', fence = '', updated = '', created = '', backend = '', owner = '',
      value = value, record_at = 1}
  end
  local owner_at = at + tonumber(backend)
  local record_at = owner_at + tonumber(owner)
  return {
    state = state,
    fence = fence,
    updated = updated,
    created = created,
    backend = string.sub(value, at, owner_at - 1),
    owner = string.sub(value, owner_at, record_at - 1),
    value = value,
    record_at = record_at,
  }
end

-- A row's record, cut from its value once (a header() gets it when first asked).
local function record_of(r)
  if not r.record then
    r.record = string.sub(r.value, r.record_at)
  end
  return r.record
end

-- A stored row as a table of its parts, its record too (packed undone); nil for none.
local function unpacked(value)
  local r = header(value)
  if r then
    record_of(r)
  end
  return r
end

-- The row of a session's unresolved intent (nil: the session holds no such intent).
local function intent_of(s, id)
  return unpacked(redis.call('HGET', s.intents, id))
end

-- Whether string a comes before b in byte order (Lua's < follows the server's locale).
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- A session's unresolved intents, oldest first (by created_at, then id in byte order, as a
-- sorted set would have them), each a row with its id; `headers`: rows without their records
-- cut (record_of() cuts one).
local function held(s, headers)
  local flat = redis.call('HGETALL', s.intents)
  local read = headers and header or unpacked
  local rows = {}
  for i = 1, #flat, 2 do
    local r = read(flat[i + 1])
    r.id = flat[i]
    r.at = tonumber(r.created) or 0
    rows[#rows + 1] = r
  end
  if #rows > 1 then
    table.sort(rows, function(a, b)
      if a.at ~= b.at then
        return a.at < b.at
      end
      return bytes_before(a.id, b.id)
    end)
  end
  return rows
end

-- {id, backend, state, owner, updated_at, record, fencing token, age by the server's clock}.
local function intent_row(id, r)
  local age = ''
  local updated = tonumber(r.updated)
  if updated then
    age = string.format('%.6f', tonumber(now()) - updated)
  end
  return {id, r.backend, r.state, r.owner, r.updated, record_of(r), r.fence, age}
end

-- An unresolved intent's member of GLOBAL.listing (LISTING in layout.py): its session id with
-- every byte 0 written 1 1 and every byte 1 written 1 2, a byte 0, then its id. One member
-- per (session, id), so the listing's byte order is a total order of them.
local function listing_member(session, id)
  return (string.gsub(session, '[%z\1]', {['\0'] = '\1\1', ['\1'] = '\1\2'})) .. '\0' .. id
end

-- Removes the unresolved intent `id` of `session` (whose keys are s) from its session, the
-- index and the listing.
local function remove_intent(s, session, id)
  redis.call('ZREM', GLOBAL.listing, listing_member(session, id))
  redis.call('HDEL', s.intents, id)
  redis.call('HDEL', GLOBAL.index, id)
end

-- ARGV (record and open_intent): version, intent id, session id, backend, state, owner,
-- created_at, (unused: the update time is the server's, now()), record. Stores the intent with
-- its fencing token (fence: the session's count when open_intent opened it; '' for record());
-- the caller counts the write. `indexed`: the index already names the session for the id
-- (try_open() claimed it).
local function store_intent(s, fence, indexed)
  local id = ARGV[2]
  local backend, owner = ARGV[4], ARGV[6]
  -- As packed() makes it, without the table.
  redis.call('HSET', s.intents, id, ARGV[5] .. ' ' .. fence .. ' ' .. now() .. ' ' .. ARGV[7]
    .. ' ' .. #backend .. ' ' .. #owner .. '\n' .. backend .. owner .. ARGV[9])
  if not indexed then
    redis.call('HSET', GLOBAL.index, id, ARGV[3])
  end
  redis.call('ZADD', GLOBAL.listing, 0, listing_member(ARGV[3], id))
end

-- Stores the intent of ARGV (as above), counting a write of its session, unless its id is
-- settled or taken.
local function record_intent(s)
  local id = ARGV[2]
  if redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
    return {'settled'}
  end
  local holder = redis.call('HGET', GLOBAL.index, id)
  if holder then
    if holder == ARGV[3] then
      local r = intent_of(s, id)
      return {'exists', r and r.record or ''}
    end
    return {'taken'}
  end
  store_intent(s, '')
  raise_count(s, ARGV[4])
  return {'recorded'}
end

-- Whether a decision stored on the intent is this very record (a settlement retried after
-- its reply was lost).
local function decided_as(id, record)
  local listed = redis.call('HGET', GLOBAL.decided, id)
  if listed then
    for seq in string.gmatch(listed, '%d+') do
      if redis.call('HGET', GLOBAL.decision, seq) == record then
        return true
      end
    end
  end
  return false
end

-- Appends a decision to the log, to its session's list and to its intent's list.
local function store_decision(s, id, record)
  local seq = redis.call('INCR', GLOBAL.seq)
  redis.call('HSET', GLOBAL.decision, seq, record)
  redis.call('RPUSH', GLOBAL.log, seq)
  redis.call('RPUSH', s.decisions, seq)
  local earlier = redis.call('HGET', GLOBAL.decided, id)
  if earlier then
    redis.call('HSET', GLOBAL.decided, id, earlier .. ' ' .. seq)
  else
    redis.call('HSET', GLOBAL.decided, id, seq)
  end
  return seq
end

-- Whether try_open() cleared the intent of ARGV[11] (open_intent.lua tells a caller that asks).
local cleared = false

-- open_intent()'s checks, shared with open_and_append(): the schema, the clearing of ARGV[11],
-- then the refusals. Returns what opening it needs (the session's keys, the backend and the
-- session's count after the clearing: `opening`), and the reply when the intent is not to be
-- stored (nil when it is); only the schema's refusal, with no opening. The caller ends with
-- finish_open(), which stores the intent and the count.
local function try_open()
  local refusal = schema_refusal(ARGV[1])
  if refusal then
    return nil, refusal
  end
  local s = session_keys(SESSION_AT)
  local id, session, backend = ARGV[2], ARGV[3], ARGV[4]
  local clearing = ARGV[11] or ''
  -- One read of the session's intents: the one to clear, this id's own, and those that block.
  local mine = nil
  local blocking = {}
  for _, r in ipairs(held(s, true)) do
    if r.id == clearing and r.backend == backend and r.state == 'in_flight'
        and r.owner == ARGV[6] then
      remove_intent(s, session, clearing)
      cleared = true
    elseif r.id == id then
      mine = r
    elseif r.backend == backend then
      blocking[#blocking + 1] = r
    end
  end
  local count = tonumber(count_of(s, backend))
  if cleared then
    count = count + 1
  end
  local opening = {s = s, backend = backend, count = count}
  local write_count = string.format('%d', count)
  -- Before the blocking ones, which would list the intent itself: a call retried after its
  -- reply was lost finds what its first attempt recorded.
  if mine then
    return opening, {'held', write_count, mine.fence, intent_row(id, mine)}
  end
  -- Not this session's: another's, if the index names one. Else the index entry is claimed
  -- for this session in the same command (the entry the intent needs when it is stored), and
  -- given up by finish_open() when it is not (`opening.claimed`).
  if redis.call('HSETNX', GLOBAL.index, id, session) == 0 then
    return opening, {'taken'}
  end
  opening.claimed = true
  if #blocking > 0 then
    local rows = {}
    for i, r in ipairs(blocking) do
      rows[i] = intent_row(r.id, r)
    end
    return opening, {'blocked', write_count, rows}
  end
  if redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
    return opening, {'settled'}
  end
  if ARGV[10] ~= '' and tonumber(ARGV[10]) ~= count then
    return opening, {'stale', write_count}
  end
  return opening, nil
end

-- Ends what try_open() began: with `store`, stores the intent of ARGV, its fencing token the
-- session's count, and counts it; else gives up the index entry try_open() claimed, if it did,
-- and keeps the count the clearing raised, if any. The count is written once either way.
local function finish_open(opening, store)
  if store then
    store_intent(opening.s, string.format('%d', opening.count), true)
    set_count(opening.s, opening.backend, opening.count + 1)
    return
  end
  if opening.claimed then
    redis.call('HDEL', GLOBAL.index, ARGV[2])
  end
  if cleared then
    set_count(opening.s, opening.backend, opening.count)
  end
end

-- Effect scripts take the global keys, then the effect index (effect key -> its session), the
-- started effects (a sorted set of the keys without a receipt, scored by when they were
-- begun), then the effect keys of one session, under its hash tag, in the order of
-- EFFECT_KEYS in layout.py, from EFFECT_AT on.
local EFFECT_AT = GLOBAL_WIDTH + 3

local function effect_keys(first)
  first = first or EFFECT_AT
  return {
    index = KEYS[GLOBAL_WIDTH + 1],
    started = KEYS[GLOBAL_WIDTH + 2],
    order = KEYS[first],
    record = KEYS[first + 1],
    state = KEYS[first + 2],
    owner = KEYS[first + 3],
    updated = KEYS[first + 4],
  }
end

-- An effect as effect_rows.lua, begin_effect.lua and finish_effect.lua answer it:
-- {key, state, owner, record, age by the server's clock ('' when it has no stamp)}.
local function effect_row(e, key)
  local updated = tonumber(field(e.updated, key))
  local age = ''
  if updated then
    age = string.format('%.6f', tonumber(now()) - updated)
  end
  return {key, field(e.state, key), field(e.owner, key), field(e.record, key), age}
end
