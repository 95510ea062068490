//! Cluster-wide admission in Redis. One sorted set per scope, members are
//! execution ids scored by their expiry (the execution's deadline), so an entry
//! a crashed coordinator never released still leaves at the deadline. A Lua
//! script checks every scope and adds the id to all of them in one atomic step,
//! or names the full scope; admitting an id twice is a no-op. Retained payload
//! bytes are a per-project counter kept in step with a hash of per-id sizes.
//!
//! Redis is not the truth: `rebuild` re-derives every set from Postgres (at start,
//! periodically, and when the epoch key shows Redis lost writes: it is gone
//! after a flush or an empty restart, and it names another server run after a
//! restart from a snapshot or append-only file, or a failover to a replica).
//! If Redis is unreachable, admission fails closed. The epoch key holds the
//! admission generation (store/fence.rs): an admission answers the generation
//! it was granted under, and its create is inserted only while Postgres still
//! holds it. One rebuild runs at a time, under a lock whose token every write
//! of the rebuild checks: a flush deletes the lock, so a rebuild that straddles
//! a flush writes nothing more and never publishes an epoch.
//!
//! All keys of one decision share the prefix; a Redis Cluster deployment would
//! need hash tags (not supported yet).

use super::{Admission, Admitted, Bounds, Error, Rejection, RetainedBytes, Scope, Ticket, retry_after_from_hold};
use redis::Script;
use redis::aio::ConnectionManager;
use std::collections::HashMap;
use std::sync::Mutex;

const ADMIT: &str = r#"
-- KEYS: 1 principal, 2 project, 3 org, 4 backlog, 5 retained-due, 6 retained-total, 7 retained-open,
-- 8 meta, 9 retained-hour, 10 epoch, 11 epoch-run
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
redis.call('HSET', KEYS[7], id, bytes)
redis.call('HINCRBY', KEYS[9], ARGV[11], bytes)
redis.call('ZADD', KEYS[5], ARGV[11], ARGV[11])
redis.call('INCRBY', KEYS[6], bytes)
redis.call('HSET', KEYS[8], 'admitted_at', now)
redis.call('PEXPIRE', KEYS[8], ARGV[10])
return 'ok:' .. epoch
"#;

const RELEASE: &str = r#"
-- KEYS: as ADMIT (1..9); ARGV: 1 id, 2 'backlog', 'all' (terminal) or 'withdraw' (never created),
-- 3 tombstone ms, 4 the bytes the record keeps, 5 retention bucket
local id = ARGV[1]
redis.call('ZREM', KEYS[4], id)
if ARGV[2] == 'backlog' then return false end
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

const READD: &str = r#"
-- KEYS: as ADMIT (1..9), 10 the rebuild lock; ARGV: 1 id, 2 expires_at, 3 payload bytes,
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
return 1
"#;

/// A project's retained bytes as Postgres holds them, written by a rebuild
/// after a loss in place of whatever Redis kept.
const RETAINED: &str = r#"
-- KEYS: 1 the rebuild lock, 2 retained-hour, 3 retained-due, 4 retained-total;
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
return 1
"#;

/// One write of a rebuild, made only while the rebuild still holds the lock
/// on the server run it took it on.
const FENCED: &str = r#"
-- KEYS: 1 the rebuild lock, 2 the key written; ARGV: 1 lock token, 2 command, 3.. its arguments
if not HOLDS(KEYS[1], ARGV[1]) then return -1 end
redis.call(ARGV[2], KEYS[2], unpack(ARGV, 3))
return 1
"#;

/// The rebuild lock, taken on this server run: its value is a random token
/// and the run id, so a server restarted from a snapshot that holds the lock
/// still refuses the rest of that rebuild. Such a leftover of another run
/// binds nobody: it is taken over at once rather than waited out.
const LOCK: &str = r#"
-- KEYS: 1 the rebuild lock; ARGV: 1 random token, 2 lock ms
local run = RUN_ID()
local value = ARGV[1] .. ':' .. run
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, -40) == run then return false end
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return value
"#;

/// The end of a rebuild: the generation, and the server run it holds on.
const PUBLISH: &str = r#"
-- KEYS: 1 the rebuild lock, 2 epoch, 3 epoch-run; ARGV: 1 lock token, 2 generation
if not HOLDS(KEYS[1], ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], RUN_ID())
return 1
"#;

/// The published generation, or nothing when this server run is not the one
/// it was published on.
const EPOCH: &str = r#"
-- KEYS: 1 epoch, 2 epoch-run
if redis.call('GET', KEYS[2]) ~= RUN_ID() then return false end
return redis.call('GET', KEYS[1])
"#;

/// Helpers every script may use: the server's run id (new on every start,
/// and different on a promoted replica), and whether a rebuild lock is held
/// by `token` on this run.
const PRELUDE: &str = r#"
local function RUN_ID()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end
local function HOLDS(lock, token)
  local value = redis.call('GET', lock)
  return value == token and string.sub(value, -40) == RUN_ID()
end
"#;

fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

const UNLOCK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#;

/// How long a released execution's tombstone outlives it: longer than any
/// rebuild takes from reading its snapshot to writing it back.
const TOMBSTONE_MS: i64 = 120_000;

/// A member admitted this recently is kept by a rebuild even when the open
/// executions it read lack it: its row may not be committed yet.
const RECENT_ADMISSION_MS: i64 = 60_000;

/// How long a rebuild may hold the lock; one that takes longer loses it and
/// stops writing (the next one starts over).
const REBUILD_LOCK_MS: i64 = 60_000;

/// What a rebuild after a loss publishes: the new generation, and the
/// retained bytes Postgres holds, per project and retention hour.
#[derive(Clone, Copy, Debug)]
pub struct Publish<'a> {
    pub generation: i64,
    pub retained: &'a [RetainedBytes],
}

/// The right to write a rebuild, held by one replica at a time.
pub struct RebuildLock {
    token: String,
}

pub struct RedisAdmission {
    con: ConnectionManager,
    prefix: String,
    bounds: Bounds,
    admit: Script,
    release: Script,
    readd: Script,
    fenced: Script,
    unlock: Script,
    lock: Script,
    publish: Script,
    epoch: Script,
    retained: Script,
    /// Average hold time per scope kind, observed on this replica's releases.
    avg_hold_ms: Mutex<HashMap<Scope, f64>>,
}

fn lost_lock() -> Error {
    Error::Unavailable(
        "the admission rebuild lost its lock (Redis lost its state, or the rebuild took too long)".into(),
    )
}

fn unavailable(e: redis::RedisError) -> Error {
    crate::engine::metrics::redis_error("admission");
    Error::Unavailable(e.to_string())
}

impl RedisAdmission {
    pub async fn connect(url: &str, prefix: &str, bounds: Bounds) -> Result<Self, Error> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(std::time::Duration::from_secs(2)))
            .set_response_timeout(Some(std::time::Duration::from_secs(2)));
        let con = ConnectionManager::new_with_config(client, config).await.map_err(unavailable)?;
        Ok(RedisAdmission {
            con,
            prefix: format!("{prefix}:adm"),
            bounds,
            admit: script(ADMIT),
            release: script(RELEASE),
            readd: script(READD),
            fenced: script(FENCED),
            unlock: script(UNLOCK),
            lock: script(LOCK),
            publish: script(PUBLISH),
            epoch: script(EPOCH),
            retained: script(RETAINED),
            avg_hold_ms: Mutex::new(HashMap::new()),
        })
    }

    fn keys(&self, t: &Ticket) -> [String; 9] {
        let p = &self.prefix;
        let [due, total, open, hour] = self.retained_keys(&t.project_id);
        [
            format!("{p}:principal:{}:{}", t.project_id, t.user_id),
            format!("{p}:project:{}", t.project_id),
            format!("{p}:org:{}", t.org_id),
            format!("{p}:backlog:{}", t.project_id),
            due,
            total,
            open,
            format!("{p}:e:{}", t.execution_id),
            hour,
        ]
    }

    /// A project's retained bytes: the retention hours still counted (a set
    /// scored by the hour), the total, the bytes each open execution holds,
    /// and the bytes per hour.
    fn retained_keys(&self, project_id: &str) -> [String; 4] {
        let p = &self.prefix;
        ["due", "total", "open", "hour"].map(|k| format!("{p}:retained-{k}:{project_id}"))
    }

    /// Runs the release script in `mode` (`backlog`, `all` or `withdraw`);
    /// the other two answer when the ticket was admitted.
    async fn run_release(&self, t: &Ticket, mode: &str) -> Result<Option<i64>, Error> {
        let mut con = self.con.clone();
        let mut inv = self.release.prepare_invoke();
        for k in self.keys(t) {
            inv.key(k);
        }
        inv.arg(&t.execution_id).arg(mode).arg(TOMBSTONE_MS);
        inv.arg(t.payload_bytes).arg(super::retention_bucket(t.retained_until_ms));
        inv.invoke_async(&mut con).await.map_err(unavailable)
    }

    /// Whether `id` was admitted less than `RECENT_ADMISSION_MS` ago: its row
    /// may not be committed yet, so a rebuild must not drop it.
    async fn admitted_recently(&self, con: &mut ConnectionManager, id: &str, now_ms: i64) -> Result<bool, Error> {
        let admitted_at: Option<i64> = redis::cmd("HGET")
            .arg(format!("{}:e:{id}", self.prefix))
            .arg("admitted_at")
            .query_async(con)
            .await
            .map_err(unavailable)?;
        Ok(admitted_at.is_some_and(|at| now_ms - at < RECENT_ADMISSION_MS))
    }

    fn epoch_key(&self) -> String {
        format!("{}:epoch", self.prefix)
    }

    fn epoch_run_key(&self) -> String {
        format!("{}:epoch-run", self.prefix)
    }

    fn lock_key(&self) -> String {
        format!("{}:rebuild-lock", self.prefix)
    }

    fn observe(&self, held_ms: f64) {
        if let Ok(mut avg) = self.avg_hold_ms.lock() {
            for s in
                [Scope::Principal, Scope::Project, Scope::Organization, Scope::RetainedPayloadBytes, Scope::Backlog]
            {
                let a = avg.entry(s).or_insert(held_ms);
                *a = *a * 0.8 + held_ms * 0.2;
            }
        }
    }

    /// The generation the last rebuild published; None when Redis may have
    /// lost admissions since: a flush, a restart (empty, or from a snapshot or
    /// its append-only file), a failover to a replica.
    pub async fn epoch(&self) -> Result<Option<i64>, Error> {
        let mut con = self.con.clone();
        let value: Option<String> = self
            .epoch
            .key(self.epoch_key())
            .key(self.epoch_run_key())
            .invoke_async(&mut con)
            .await
            .map_err(unavailable)?;
        // A value this version cannot read counts as lost: the rebuild replaces it.
        Ok(value.and_then(|v| v.parse().ok()))
    }

    /// Takes the rebuild lock; None while another replica holds it.
    pub async fn lock_rebuild(&self) -> Result<Option<RebuildLock>, Error> {
        let mut con = self.con.clone();
        let token = crate::domain::id::random_id("rb_", 96);
        let taken: Option<String> = self
            .lock
            .key(self.lock_key())
            .arg(&token)
            .arg(REBUILD_LOCK_MS)
            .invoke_async(&mut con)
            .await
            .map_err(unavailable)?;
        Ok(taken.map(|token| RebuildLock { token }))
    }

    /// Gives the lock back, unless it was lost meanwhile (then it is another's).
    pub async fn unlock_rebuild(&self, lock: RebuildLock) {
        let mut con = self.con.clone();
        let unlocked: Result<i64, _> = self.unlock.key(self.lock_key()).arg(&lock.token).invoke_async(&mut con).await;
        if let Err(e) = unlocked {
            // It expires on its own.
            tracing::warn!(error = %e, "admission rebuild lock not released");
        }
    }

    /// `command key args…` as a write of the rebuild holding `lock`; an error
    /// once the lock is lost (a flush, or the rebuild outlived it).
    async fn write_fenced(
        &self,
        con: &mut ConnectionManager,
        lock: &RebuildLock,
        command: &str,
        key: &str,
        args: &[&str],
    ) -> Result<(), Error> {
        let mut inv = self.fenced.prepare_invoke();
        inv.key(self.lock_key()).key(key).arg(&lock.token).arg(command);
        for a in args {
            inv.arg(*a);
        }
        let written: i64 = inv.invoke_async(con).await.map_err(unavailable)?;
        if written < 0 { Err(lost_lock()) } else { Ok(()) }
    }

    /// Re-derives the sets from the durable truth, as the holder of `lock`.
    /// `open` holds every non-terminal execution and whether it started;
    /// members Redis holds that are not open are removed unless admitted in
    /// the last `RECENT_ADMISSION_MS`. With `publish`, after Redis lost its
    /// state, the retained bytes are set from Postgres' and the rebuild ends
    /// by writing the generation to the epoch key, which opens admission
    /// again. (Byte totals are left alone otherwise: their truth is a scan
    /// of every retained record, too heavy to run every period.)
    pub async fn rebuild(
        &self,
        lock: &RebuildLock,
        open: &[(Ticket, bool)],
        now_ms: i64,
        publish: Option<Publish<'_>>,
    ) -> Result<RebuildReport, Error> {
        let mut con = self.con.clone();
        let mut report = RebuildReport::default();
        let live: std::collections::HashSet<&str> = open.iter().map(|(t, _)| t.execution_id.as_str()).collect();
        // Remove stale members from every scope set we know of.
        let pattern = format!("{}:*", self.prefix);
        let mut keys: Vec<String> = Vec::new();
        {
            let mut iter: redis::AsyncIter<String> = redis::cmd("SCAN")
                .cursor_arg(0)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .clone()
                .iter_async(&mut con)
                .await
                .map_err(unavailable)?;
            while let Some(k) = futures_util::StreamExt::next(&mut iter).await {
                keys.push(k.map_err(unavailable)?);
            }
        }
        for key in keys.iter().filter(|k| {
            ["principal", "project", "org", "backlog"].iter().any(|s| k.starts_with(&format!("{}:{s}:", self.prefix)))
        }) {
            let members: Vec<String> =
                redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).query_async(&mut con).await.map_err(unavailable)?;
            for id in members {
                if live.contains(id.as_str()) {
                    continue;
                }
                if self.admitted_recently(&mut con, id.as_str(), now_ms).await? {
                    continue;
                }
                self.write_fenced(&mut con, lock, "ZREM", key, &[&id]).await?;
                report.removed += 1;
            }
        }
        // Re-add every open execution (idempotent), bypassing the bounds: it was
        // admitted once. One released since the snapshot was read stays out.
        for (t, started) in open {
            let mut inv = self.readd.prepare_invoke();
            for k in self.keys(t) {
                inv.key(k);
            }
            inv.key(self.lock_key());
            inv.arg(&t.execution_id).arg(t.expires_at_ms).arg(t.payload_bytes).arg(if *started { "1" } else { "0" });
            inv.arg(&lock.token);
            let added: i64 = inv.invoke_async(&mut con).await.map_err(unavailable)?;
            match added {
                0 => report.skipped_released += 1,
                n if n < 0 => return Err(lost_lock()),
                _ => {}
            }
        }
        // What each open execution holds: forgotten for those no longer open.
        let open_prefix = format!("{}:retained-open:", self.prefix);
        for key in keys.iter().filter(|k| k.starts_with(&open_prefix)) {
            let ids: Vec<String> = redis::cmd("HKEYS").arg(key).query_async(&mut con).await.map_err(unavailable)?;
            for id in ids.iter().filter(|id| !live.contains(id.as_str())) {
                if !self.admitted_recently(&mut con, id.as_str(), now_ms).await? {
                    self.write_fenced(&mut con, lock, "HDEL", key, &[id]).await?;
                }
            }
        }
        if let Some(p) = publish {
            let mut by_project: HashMap<&str, Vec<(i64, u64)>> = HashMap::new();
            for r in p.retained {
                by_project.entry(r.project_id.as_str()).or_default().push((r.bucket, r.bytes));
            }
            // Projects Redis counts bytes for that retain nothing now start from zero.
            let total_prefix = format!("{}:retained-total:", self.prefix);
            for project in keys.iter().filter_map(|k| k.strip_prefix(&total_prefix)) {
                by_project.entry(project).or_default();
            }
            for (project, hours) in by_project {
                let [due, total, _, hour] = self.retained_keys(project);
                let mut inv = self.retained.prepare_invoke();
                inv.key(self.lock_key()).key(hour).key(due).key(total).arg(&lock.token);
                for (bucket, bytes) in hours {
                    inv.arg(bucket).arg(bytes);
                }
                let written: i64 = inv.invoke_async(&mut con).await.map_err(unavailable)?;
                if written < 0 {
                    return Err(lost_lock());
                }
            }
            let published: i64 = self
                .publish
                .key(self.lock_key())
                .key(self.epoch_key())
                .key(self.epoch_run_key())
                .arg(&lock.token)
                .arg(p.generation)
                .invoke_async(&mut con)
                .await
                .map_err(unavailable)?;
            if published < 0 {
                return Err(lost_lock());
            }
        }
        report.open = open.len();
        Ok(report)
    }

    /// A whole rebuild under the lock, publishing `publish` when given: what
    /// a prefix of its own needs before it admits (benches, tests).
    pub async fn rebuild_alone(
        &self,
        open: &[(Ticket, bool)],
        now_ms: i64,
        publish: Option<Publish<'_>>,
    ) -> Result<RebuildReport, Error> {
        let lock = self.lock_rebuild().await?.ok_or_else(lost_lock)?;
        let report = self.rebuild(&lock, open, now_ms, publish).await;
        self.unlock_rebuild(lock).await;
        report
    }
}

#[cfg(test)]
impl RedisAdmission {
    /// Deletes every key under this instance's prefix, as a flush would.
    pub async fn wipe_for_tests(&self) {
        let mut con = self.con.clone();
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("{}:*", self.prefix)).query_async(&mut con).await.unwrap_or_default();
        for k in keys {
            let _: Result<i64, _> = redis::cmd("DEL").arg(k).query_async(&mut con).await;
        }
    }

    /// What a restart from a snapshot leaves: every key as it was, but
    /// written by another server run than the one now answering. Returns the
    /// lock as the snapshot holds it.
    pub async fn pretend_restarted_for_tests(&self, lock: Option<&RebuildLock>) -> Option<RebuildLock> {
        let mut con = self.con.clone();
        let other_run = "0".repeat(40);
        let _: Result<(), _> = redis::cmd("SET").arg(self.epoch_run_key()).arg(&other_run).query_async(&mut con).await;
        let lock = lock?;
        let (token, _) = lock.token.rsplit_once(':')?;
        let restored = format!("{token}:{other_run}");
        let _: Result<(), _> = redis::cmd("SET").arg(self.lock_key()).arg(&restored).query_async(&mut con).await;
        Some(RebuildLock { token: restored })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    pub open: usize,
    pub removed: usize,
    /// Open in the snapshot, but released before the rebuild reached them.
    pub skipped_released: usize,
}

#[tonic::async_trait]
impl Admission for RedisAdmission {
    async fn admit(&self, t: &Ticket, now_ms: i64) -> Result<Result<Admitted, Rejection>, Error> {
        let b = &self.bounds;
        let mut con = self.con.clone();
        let mut inv = self.admit.prepare_invoke();
        for k in self.keys(t) {
            inv.key(k);
        }
        inv.key(self.epoch_key()).key(self.epoch_run_key());
        let meta_ttl = (t.expires_at_ms - now_ms).max(1_000);
        inv.arg(&t.execution_id).arg(now_ms).arg(t.expires_at_ms).arg(t.payload_bytes);
        inv.arg(b.principal_concurrency).arg(b.project_concurrency).arg(b.organization_concurrency);
        inv.arg(b.backlog).arg(b.retained_payload_bytes).arg(meta_ttl);
        inv.arg(super::retention_bucket(t.retained_until_ms));
        let answer: String = inv.invoke_async(&mut con).await.map_err(unavailable)?;
        if let Some(epoch) = answer.strip_prefix("ok:") {
            // An epoch this version cannot read is never published by a rebuild
            // of it; such an admission fails its insert and is retried.
            return Ok(Ok(Admitted { fence: Some(epoch.parse().unwrap_or(-1)) }));
        }
        let scope = match answer.as_str() {
            "rebuilding" => {
                return Err(Error::Unavailable("admission state is being rebuilt from the database".into()));
            }
            "principal" => Scope::Principal,
            "project" => Scope::Project,
            "organization" => Scope::Organization,
            "backlog" => Scope::Backlog,
            _ => Scope::RetainedPayloadBytes,
        };
        let avg = self.avg_hold_ms.lock().ok().and_then(|m| m.get(&scope).copied());
        Ok(Err(Rejection { scope, retry_after_ms: retry_after_from_hold(avg) }))
    }

    async fn started(&self, t: &Ticket, _now_ms: i64) -> Result<(), Error> {
        self.run_release(t, "backlog").await.map(|_| ())
    }

    async fn release(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        if let Some(at) = self.run_release(t, "all").await? {
            self.observe((now_ms - at) as f64);
        }
        Ok(())
    }

    async fn withdraw(&self, t: &Ticket, _now_ms: i64) -> Result<(), Error> {
        self.run_release(t, "withdraw").await.map(|_| ())
    }
}
