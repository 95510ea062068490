//! The Lua scripts of Redis admission (`super::redis`): each runs atomically
//! on the server, so a decision and its writes cannot interleave with
//! another's. `PRELUDE` is put in front of each.

use redis::Script;

pub(super) const ADMIT: &str = r#"
-- KEYS: 1 principal, 2 project, 3 org, 4 backlog, 5 retained-due, 6 retained-total, 7 retained-open,
-- 8 meta, 9 retained-hour, 10 epoch, 11 epoch-run, 12 the shard's index of keys
-- ARGV: 1 id, 2 now, 3 expires_at, 4 payload bytes, 5..9 bounds (principal, project, org, backlog, bytes),
-- 10 meta ttl ms, 11 retention bucket
local id, now = ARGV[1], tonumber(ARGV[2])
-- KEYS[10] is the epoch a rebuild writes: without it Redis lost its state (a
-- restart, a flush) and counts nothing yet, so nothing is admitted until the
-- rebuild from the durable truth is done. Its value is the generation the
-- admission is granted under. KEYS[11] names the server run that rebuild
-- wrote to: a server restarted from an older snapshot or its append-only file,
-- or a replica promoted after a failover, has the epoch but may have lost
-- the admissions after it, so it counts as having lost its state too.
local epoch = redis.call('GET', KEYS[10])
if not epoch or redis.call('GET', KEYS[11]) ~= RUN_ID() then return 'rebuilding' end
if redis.call('EXISTS', KEYS[8]) == 1 then return 'ok:' .. epoch end
for i = 1, 4 do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
-- Retention hours that ended take their bytes with them.
for _, hour in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now)) do
  redis.call('DECRBY', KEYS[6], tonumber(redis.call('HGET', KEYS[9], hour) or '0'))
  redis.call('HDEL', KEYS[9], hour)
  redis.call('ZREM', KEYS[5], hour)
end
local names = {'principal', 'project', 'organization', 'backlog'}
for i = 1, 4 do
  if redis.call('ZSCORE', KEYS[i], id) == false and redis.call('ZCARD', KEYS[i]) + 1 > tonumber(ARGV[4 + i]) then
    return names[i]
  end
end
local bytes = tonumber(ARGV[4])
local total = tonumber(redis.call('GET', KEYS[6]) or '0')
if total + bytes > tonumber(ARGV[9]) then return 'retained_payload_bytes' end
for i = 1, 4 do redis.call('ZADD', KEYS[i], ARGV[3], id) end
redis.call('SADD', KEYS[12], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7])
redis.call('HSET', KEYS[7], id, bytes)
redis.call('HINCRBY', KEYS[9], ARGV[11], bytes)
redis.call('ZADD', KEYS[5], ARGV[11], ARGV[11])
redis.call('INCRBY', KEYS[6], bytes)
redis.call('HSET', KEYS[8], 'admitted_at', now)
redis.call('PEXPIRE', KEYS[8], ARGV[10])
return 'ok:' .. epoch
"#;

pub(super) const RELEASE: &str = r#"
-- KEYS: as ADMIT (1..9); ARGV: 1 id, 2 'all' (terminal) or 'withdraw' (never created),
-- 3 tombstone ms, 4 the bytes the record keeps, 5 retention bucket
local id = ARGV[1]
redis.call('ZREM', KEYS[4], id)
if redis.call('HEXISTS', KEYS[8], 'released') == 1 then return false end
for i = 1, 3 do redis.call('ZREM', KEYS[i], id) end
local held = redis.call('HGET', KEYS[7], id)
redis.call('HDEL', KEYS[7], id)
local keep = 0
if ARGV[2] == 'all' then keep = tonumber(ARGV[4]) end
-- What was held since admission becomes what is kept. Without a record of
-- what was held (Redis lost it and a rebuild counted the row as it was then),
-- all of it is added: counting some twice errs on the side of the bound.
local delta = keep - tonumber(held or '0')
if delta ~= 0 then
  redis.call('HINCRBY', KEYS[9], ARGV[5], delta)
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[5])
  redis.call('INCRBY', KEYS[6], delta)
end
local at = redis.call('HGET', KEYS[8], 'admitted_at')
-- A tombstone, so that a rebuild working from an older snapshot of the open
-- executions cannot add this one back, and a second release changes nothing.
redis.call('DEL', KEYS[8])
redis.call('HSET', KEYS[8], 'released', 1)
redis.call('PEXPIRE', KEYS[8], ARGV[3])
return at
"#;

pub(super) const READD: &str = r#"
-- KEYS: as ADMIT (1..9), 10 the rebuild lock, 11 the shard's index of keys; ARGV: 1 id, 2 expires_at, 3 payload bytes,
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
