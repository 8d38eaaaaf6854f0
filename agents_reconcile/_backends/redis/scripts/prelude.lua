-- Loaded in front of every script of the Redis journal.
--
-- KEYS[1..9] are the journal's global keys (GLOBAL_WIDTH). A session then passes
-- SESSION_WIDTH (nine) keys of its own, all sharing the session's hash tag: from KEYS[SESSION_AT]
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
local SESSION_WIDTH = 9
-- The field of a session's write_count hash stamped with when a count was last raised (STAMP in
-- layout.py; no backend identity is empty).
local STAMP = ''

local function session_keys(first)
  return {
    open = KEYS[first],
    record = KEYS[first + 1],
    backend = KEYS[first + 2],
    state = KEYS[first + 3],
    owner = KEYS[first + 4],
    updated = KEYS[first + 5],
    write_count = KEYS[first + 6],
    decisions = KEYS[first + 7],
    fence = KEYS[first + 8],
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

-- Counts a write of a session under a backend: one above its count (count_of), and stamps the
-- session's counts with the server's time (their age when idle, for pruning). Returns the new
-- count. A stored count is at least 1, so an increment answering 1 found none, and the floor
-- decides.
local function raise_count(s, backend)
  local raised = redis.call('HINCRBY', s.write_count, backend, 1)
  if raised == 1 then
    local above = tonumber(floor()) + 1
    if above > 1 then
      raised = above
      redis.call('HSET', s.write_count, backend, string.format('%d', raised), STAMP, now())
      return raised
    end
  end
  redis.call('HSET', s.write_count, STAMP, now())
  return raised
end

-- {id, backend, state, owner, updated_at, record, fencing token, age by the server's clock}.
local function intent_row(s, id)
  local updated = field(s.updated, id)
  local age = ''
  if updated ~= '' then
    age = string.format('%.6f', tonumber(now()) - tonumber(updated))
  end
  return {
    id,
    field(s.backend, id),
    field(s.state, id),
    field(s.owner, id),
    updated,
    field(s.record, id),
    field(s.fence, id),
    age,
  }
end

-- An unresolved intent's member of GLOBAL.listing (LISTING in layout.py): its session id with
-- every byte 0 written 1 1 and every byte 1 written 1 2, a byte 0, then its id. One member
-- per (session, id), so the listing's byte order is a total order of them.
local function listing_member(session, id)
  return (string.gsub(session, '[%z\1]', {['\0'] = '\1\1', ['\1'] = '\1\2'})) .. '\0' .. id
end

local function remove_intent(s, id)
  local holder = redis.call('HGET', GLOBAL.index, id)
  if holder then
    redis.call('ZREM', GLOBAL.listing, listing_member(holder, id))
  end
  redis.call('ZREM', s.open, id)
  redis.call('HDEL', s.record, id)
  redis.call('HDEL', s.backend, id)
  redis.call('HDEL', s.state, id)
  redis.call('HDEL', s.owner, id)
  redis.call('HDEL', s.updated, id)
  redis.call('HDEL', s.fence, id)
  redis.call('HDEL', GLOBAL.index, id)
end

-- ARGV (record and open_intent): version, intent id, session id, backend, state, owner,
-- created_at, (unused: the update time is the server's, now()), record. Stores the intent and
-- counts it as a write of its session; seq is the count before it when open_intent opened it,
-- nil for record().
local function store_intent(s, seq)
  local id, backend = ARGV[2], ARGV[4]
  redis.call('ZADD', s.open, ARGV[7], id)
  redis.call('HSET', s.record, id, ARGV[9])
  redis.call('HSET', s.backend, id, backend)
  redis.call('HSET', s.state, id, ARGV[5])
  redis.call('HSET', s.owner, id, ARGV[6])
  redis.call('HSET', s.updated, id, now())
  if seq then
    redis.call('HSET', s.fence, id, seq)
  end
  redis.call('HSET', GLOBAL.index, id, ARGV[3])
  redis.call('ZADD', GLOBAL.listing, 0, listing_member(ARGV[3], id))
  raise_count(s, backend)
end

-- Stores the intent of ARGV (as above) unless its id is settled or taken.
local function record_intent(s)
  local id = ARGV[2]
  if redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
    return {'settled'}
  end
  local holder = redis.call('HGET', GLOBAL.index, id)
  if holder then
    if holder == ARGV[3] then
      return {'exists', field(s.record, id)}
    end
    return {'taken'}
  end
  store_intent(s, nil)
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
-- then the refusals. Returns the session's keys and count, and the reply when the intent is not
-- to be stored (nil when it is).
local function try_open()
  local refusal = schema_refusal(ARGV[1])
  if refusal then
    return nil, nil, refusal
  end
  local s = session_keys(SESSION_AT)
  local id, backend = ARGV[2], ARGV[4]
  local clearing = ARGV[11]
  local write_count
  if clearing and clearing ~= '' and redis.call('HGET', GLOBAL.index, clearing) == ARGV[3]
    and redis.call('HGET', s.backend, clearing) == backend
    and redis.call('HGET', s.state, clearing) == 'in_flight'
    and redis.call('HGET', s.owner, clearing) == ARGV[6] then
    remove_intent(s, clearing)
    cleared = true
    write_count = string.format('%d', raise_count(s, backend))
  else
    write_count = count_of(s, backend)
  end
  -- Before the scan, which would list the intent itself as blocking: a call retried after its
  -- reply was lost finds what its first attempt recorded.
  local holder = redis.call('HGET', GLOBAL.index, id)
  if holder then
    if holder ~= ARGV[3] then
      return s, write_count, {'taken'}
    end
    return s, write_count, {'held', write_count, field(s.fence, id), intent_row(s, id)}
  end
  local blocking = {}
  for _, other in ipairs(redis.call('ZRANGE', s.open, 0, -1)) do
    if redis.call('HGET', s.backend, other) == backend then
      blocking[#blocking + 1] = intent_row(s, other)
    end
  end
  if #blocking > 0 then
    return s, write_count, {'blocked', write_count, blocking}
  end
  if redis.call('SISMEMBER', GLOBAL.settled, id) == 1 then
    return s, write_count, {'settled'}
  end
  if ARGV[10] ~= '' and tonumber(ARGV[10]) ~= tonumber(write_count) then
    return s, write_count, {'stale', write_count}
  end
  return s, write_count, nil
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
