//! The Lua scripts of Redis admission (`super::redis`): each runs atomically
//! on the server, so a decision and its writes cannot interleave with
//! another's. `PRELUDE` is put in front of each.

use redis::Script;

/// Admissions, starts, releases and withdrawals of one shard, in the order
/// given, as one atomic step: the same decisions as one call each, for one
/// round trip and one look at the epoch. What two steps would each ask of a
/// key they share (pruning what expired, a set's size, the bytes a project
/// holds, indexing the key) is asked once and kept in step with the writes.
pub(super) const OPS: &str = r#"
-- KEYS: 1 epoch, 2 epoch-run, 3 the shard's index of keys; then each op's keys in turn: one (its
-- backlog) for a start, nine for the others: 1 principal, 2 project, 3 org, 4 backlog, 5 retained-due,
-- 6 retained-total, 7 retained-open, 8 meta, 9 retained-hour
-- ARGV: 1..5 bounds (principal, project, org, backlog, bytes), 6 tombstone ms; then seven per op:
-- kind ('a' admit, 's' started, 'r' release, 'w' withdraw), id, now, expires_at, payload bytes
-- (admitted, or kept by a released record), meta ttl ms, retention bucket
local bound = {tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])}
local max_bytes, tombstone_ms = tonumber(ARGV[5]), ARGV[6]
local names = {'principal', 'project', 'organization', 'backlog'}
-- What this call already asked or did, by key: every write below keeps it true.
local pruned, indexed, size, total, hours = {}, {}, {}, {}, {}
-- KEYS[1] is the epoch a rebuild writes: without it Redis lost its state (a
-- restart, a flush) and counts nothing yet, so nothing is admitted until the
-- rebuild from the durable truth is done. Its value is the generation the
-- admission is granted under. KEYS[2] names the server run that rebuild
-- wrote to: a server restarted from an older snapshot or its append-only file,
-- or a replica promoted after a failover, has the epoch but may have lost
-- the admissions after it, so it counts as having lost its state too.
local epoch
local function open_epoch()
  if epoch == nil then
    epoch = redis.call('GET', KEYS[1])
    if epoch and redis.call('GET', KEYS[2]) ~= RUN_ID() then epoch = false end
  end
  return epoch
end

local function zadd(key, score, id)
  local added = redis.call('ZADD', key, score, id)
  if size[key] then size[key] = size[key] + added end
end

local function zrem(key, id)
  local removed = redis.call('ZREM', key, id)
  if size[key] then size[key] = size[key] - removed end
end

local function zcard(key)
  if not size[key] then size[key] = redis.call('ZCARD', key) end
  return size[key]
end

local function add_bytes(K, bucket, delta)
  redis.call('HINCRBY', K[9], bucket, delta)
  if not hours[K[5] .. ' ' .. bucket] then
    hours[K[5] .. ' ' .. bucket] = true
    redis.call('ZADD', K[5], bucket, bucket)
  end
  total[K[6]] = redis.call('INCRBY', K[6], delta)
end

local function prune(K, now)
  for i = 1, 4 do
    if not pruned[K[i]] then
      pruned[K[i]] = true
      size[K[i]] = nil
      redis.call('ZREMRANGEBYSCORE', K[i], '-inf', now)
    end
  end
  if pruned[K[5]] then return end
  pruned[K[5]] = true
  -- Retention hours that ended take their bytes with them.
  for _, hour in ipairs(redis.call('ZRANGEBYSCORE', K[5], '-inf', now)) do
    total[K[6]] = redis.call('DECRBY', K[6], tonumber(redis.call('HGET', K[9], hour) or '0'))
    redis.call('HDEL', K[9], hour)
    redis.call('ZREM', K[5], hour)
    hours[K[5] .. ' ' .. hour] = nil
  end
end

local function admit(K, id, now, expires_at, bytes, meta_ttl, bucket)
  local e = open_epoch()
  if not e then return 'rebuilding' end
  if redis.call('EXISTS', K[8]) == 1 then return 'ok:' .. e end
  prune(K, now)
  for i = 1, 4 do
    if zcard(K[i]) + 1 > bound[i] and redis.call('ZSCORE', K[i], id) == false then
      return names[i]
    end
  end
  if not total[K[6]] then total[K[6]] = tonumber(redis.call('GET', K[6]) or '0') end
  if total[K[6]] + bytes > max_bytes then return 'retained_payload_bytes' end
  for i = 1, 4 do zadd(K[i], expires_at, id) end
  local fresh = {}
  for _, i in ipairs({1, 2, 3, 4, 6, 7}) do
    if not indexed[K[i]] then
      indexed[K[i]] = true
      fresh[#fresh + 1] = K[i]
    end
  end
  if #fresh > 0 then redis.call('SADD', KEYS[3], unpack(fresh)) end
  redis.call('HSET', K[7], id, bytes)
  add_bytes(K, bucket, bytes)
  redis.call('HSET', K[8], 'admitted_at', now)
  redis.call('PEXPIRE', K[8], meta_ttl)
  return 'ok:' .. e
end

-- Answers when the execution was admitted; false when it was released already.
local function release(K, id, kind, kept, bucket)
  zrem(K[4], id)
  local meta = redis.call('HMGET', K[8], 'released', 'admitted_at')
  if meta[1] then return false end
  for i = 1, 3 do zrem(K[i], id) end
  local held = redis.call('HGET', K[7], id)
  redis.call('HDEL', K[7], id)
  local keep = 0
  if kind == 'r' then keep = kept end
  -- What was held since admission becomes what is kept. Without a record of
  -- what was held (Redis lost it and a rebuild counted the row as it was then),
  -- all of it is added: counting some twice errs on the side of the bound.
  local delta = keep - tonumber(held or '0')
  if delta ~= 0 then add_bytes(K, bucket, delta) end
  -- A tombstone, so that a rebuild working from an older snapshot of the open
  -- executions cannot add this one back, and a second release changes nothing.
  redis.call('HSET', K[8], 'released', 1)
  redis.call('PEXPIRE', K[8], tombstone_ms)
  return meta[2]
end

local out, k = {}, 3
for a = 7, #ARGV, 7 do
  local kind, id = ARGV[a], ARGV[a + 1]
  if kind == 's' then
    zrem(KEYS[k + 1], id)
    out[#out + 1] = 'ok'
    k = k + 1
  else
    local K = {unpack(KEYS, k + 1, k + 9)}
    k = k + 9
    local now, bytes, bucket = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 4]), ARGV[a + 6]
    if kind == 'a' then
      out[#out + 1] = admit(K, id, now, ARGV[a + 3], bytes, ARGV[a + 5], bucket)
    else
      out[#out + 1] = release(K, id, kind, bytes, bucket)
    end
  end
end
return out
"#;

pub(super) const READD: &str = r#"
-- KEYS: as `Shard::ticket_keys` (1..9), 10 the rebuild lock, 11 the shard's index of keys; ARGV: 1 id, 2 expires_at, 3 payload bytes,
-- 4 started ('1' or '0'), 5 the rebuild's lock token
-- A rebuild adding back an open execution, bypassing the bounds (it was
-- admitted once), unless it was released since the snapshot was read.
local id = ARGV[1]
if not HOLDS(KEYS[10], ARGV[5]) then return -1 end
if redis.call('HEXISTS', KEYS[8], 'released') == 1 then return 0 end
for i = 1, 3 do redis.call('ZADD', KEYS[i], 'NX', ARGV[2], id) end
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[4], id)
else
  redis.call('ZADD', KEYS[4], 'NX', ARGV[2], id)
end
redis.call('HSETNX', KEYS[7], id, ARGV[3])
redis.call('SADD', KEYS[11], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7])
return 1
"#;

/// A project's retained bytes as Postgres holds them, written by a rebuild
/// after a loss in place of whatever Redis kept.
pub(super) const RETAINED: &str = r#"
-- KEYS: 1 the rebuild lock, 2 retained-hour, 3 retained-due, 4 retained-total, 5 the shard's index;
-- ARGV: 1 lock token, then pairs of (retention bucket, bytes)
if not HOLDS(KEYS[1], ARGV[1]) then return -1 end
redis.call('DEL', KEYS[2], KEYS[3])
local total = 0
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i])
  total = total + tonumber(ARGV[i + 1])
end
redis.call('SET', KEYS[4], total)
redis.call('SADD', KEYS[5], KEYS[4])
return 1
"#;

/// One write of a rebuild, made only while the rebuild still holds the lock
/// on the server run it took it on.
pub(super) const FENCED: &str = r#"
-- KEYS: 1 the rebuild lock, 2 the key written; ARGV: 1 lock token, 2 command, 3.. its arguments
if not HOLDS(KEYS[1], ARGV[1]) then return -1 end
redis.call(ARGV[2], KEYS[2], unpack(ARGV, 3))
return 1
"#;

/// The rebuild lock, taken on this server run: its value is a random token
/// and the run id, so a server restarted from a snapshot that holds the lock
/// still refuses the rest of that rebuild. Such a leftover of another run
/// binds nobody: it is taken over at once rather than waited out.
pub(super) const LOCK: &str = r#"
-- KEYS: 1 the rebuild lock; ARGV: 1 random token, 2 lock ms
local run = RUN_ID()
local value = ARGV[1] .. ':' .. run
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, -40) == run then return false end
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return value
"#;

/// The end of a rebuild: the generation, and the server run it holds on.
pub(super) const PUBLISH: &str = r#"
-- KEYS: 1 the rebuild lock, 2 epoch, 3 epoch-run; ARGV: 1 lock token, 2 generation
if not HOLDS(KEYS[1], ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], RUN_ID())
return 1
"#;

/// The published generation, or nothing when this server run is not the one
/// it was published on.
pub(super) const EPOCH: &str = r#"
-- KEYS: 1 epoch, 2 epoch-run
if redis.call('GET', KEYS[2]) ~= RUN_ID() then return false end
return redis.call('GET', KEYS[1])
"#;

/// Helpers every script may use: the server's run id (new on every start,
/// and different on a promoted replica), and whether a rebuild lock is held
/// by `token` on this run.
pub(super) const PRELUDE: &str = r#"
local function RUN_ID()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end
local function HOLDS(lock, token)
  local value = redis.call('GET', lock)
  return value == token and string.sub(value, -40) == RUN_ID()
end
"#;

pub(super) fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

pub(super) const UNLOCK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#;
