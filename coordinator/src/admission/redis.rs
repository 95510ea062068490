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

use super::redis_scripts::{ADMIT, EPOCH, FENCED, LOCK, PUBLISH, READD, RELEASE, RETAINED, UNLOCK, script};
use super::{Admission, Admitted, Bounds, Error, Rejection, RetainedBytes, Scope, Ticket, retry_after_from_hold};
use redis::Script;
use redis::aio::ConnectionManager;
use std::collections::HashMap;
use std::sync::Mutex;

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
