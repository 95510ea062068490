//! Cluster-wide admission in Redis. One sorted set per scope, members are
//! execution ids scored by their expiry (the execution's deadline), so an entry
//! a crashed coordinator never released still leaves at the deadline. A Lua
//! script checks every scope and adds the id to all of them in one atomic step,
//! or names the full scope; admitting an id twice is a no-op. Retained payload
//! bytes are a per-project counter kept in step with a hash of per-id sizes.
//! Concurrent steps (admissions, starts, releases, withdrawals) go to Redis
//! together, one script call per shard (`redis_batch`).
//! The keys of one decision share a hash tag (`redis_keys`), so the same
//! scripts run on one node and on a Redis Cluster.
//!
//! Redis is not the truth: `rebuild` re-derives every set from Postgres (at start,
//! periodically, and when an epoch key shows Redis lost writes: it is gone
//! after a flush or an empty restart, and it names another server run after a
//! restart from a snapshot or append-only file, or a failover to a replica).
//! Each shard has its own epoch, on the node that holds the shard's slot, so a
//! cluster failover that loses one master's recent writes is seen there.
//! If Redis is unreachable, admission fails closed. The epoch keys hold the
//! admission generation (store/fence.rs): an admission answers the generation
//! it was granted under, and its create is inserted only while Postgres still
//! holds it. One rebuild runs at a time, under a lock in every shard whose
//! token every write of the rebuild checks: a flush deletes the lock, so a
//! rebuild that straddles a flush writes nothing more and never publishes an
//! epoch there.

use super::redis_batch::{Batcher, Kind, unavailable};
use super::redis_keys::{SHARDS, Shard, shard_of};
use super::redis_scripts::{EPOCH, FENCED, LOCK, PUBLISH, READD, RETAINED, UNLOCK, script};
use super::{Admission, Admitted, Bounds, Error, Rejection, RetainedBytes, Scope, Ticket, retry_after_from_hold};
use crate::redis_link::{Link, Target};
use redis::Script;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tokio::sync::Notify;

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

/// The right to write a rebuild, held by one replica at a time: the lock of
/// every shard, each the random token and the run of the node it was taken on.
pub(crate) struct RebuildLock {
    held: Vec<String>,
}

pub struct RedisAdmission {
    con: Link,
    prefix: String,
    /// Admissions, starts, releases and withdrawals, gathered per shard.
    pub(super) ops: Batcher,
    readd: Script,
    fenced: Script,
    unlock: Script,
    lock: Script,
    publish: Script,
    epoch: Script,
    retained: Script,
    /// Average hold time per scope kind, observed on this replica's releases.
    avg_hold_ms: Mutex<HashMap<Scope, f64>>,
    /// Woken when an admission finds a shard that lost its state, so the
    /// rebuild starts at once rather than on the next look.
    lost: Notify,
}

fn lost_lock() -> Error {
    Error::Unavailable(
        "the admission rebuild lost its lock (Redis lost its state, or the rebuild took too long)".into(),
    )
}

fn shards(prefix: &str) -> impl Iterator<Item = (usize, Shard)> + '_ {
    (0..SHARDS).map(move |n| (n as usize, Shard::new(prefix, n)))
}

impl RedisAdmission {
    pub async fn connect(target: &Target, prefix: &str, bounds: Bounds) -> Result<Self, Error> {
        if prefix.contains(['{', '}']) {
            // A brace would make the prefix the hash tag of every key.
            return Err(Error::Unavailable("the redis key prefix may not contain '{' or '}'".into()));
        }
        let con = Link::connect(target).await.map_err(unavailable)?;
        Ok(RedisAdmission {
            ops: Batcher::start(con.clone(), prefix, bounds),
            con,
            prefix: prefix.to_owned(),
            readd: script(READD),
            fenced: script(FENCED),
            unlock: script(UNLOCK),
            lock: script(LOCK),
            publish: script(PUBLISH),
            epoch: script(EPOCH),
            retained: script(RETAINED),
            avg_hold_ms: Mutex::new(HashMap::new()),
            lost: Notify::new(),
        })
    }

    fn shard(&self, org_id: &str) -> (usize, Shard) {
        let n = shard_of(org_id);
        (n as usize, Shard::new(&self.prefix, n))
    }

    /// Resolves when an admission found a shard that lost its state.
    pub(crate) async fn loss_seen(&self) {
        self.lost.notified().await
    }

    /// Whether `id` was admitted less than `RECENT_ADMISSION_MS` ago: its row
    /// may not be committed yet, so a rebuild must not drop it.
    async fn admitted_recently(&self, con: &mut Link, shard: &Shard, id: &str, now_ms: i64) -> Result<bool, Error> {
        let admitted_at: Option<i64> =
            redis::cmd("HGET").arg(shard.meta(id)).arg("admitted_at").query_async(con).await.map_err(unavailable)?;
        Ok(admitted_at.is_some_and(|at| now_ms - at < RECENT_ADMISSION_MS))
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

    /// The generation the last rebuild published, when every shard holds it;
    /// None when Redis may have lost admissions since in any shard: a flush,
    /// a restart (empty, or from a snapshot or its append-only file), a
    /// failover to a replica.
    pub(crate) async fn epoch(&self) -> Result<Option<i64>, Error> {
        let looks = shards(&self.prefix).map(|(_, shard)| {
            let mut con = self.con.clone();
            async move {
                let value: Option<String> = self
                    .epoch
                    .key(shard.epoch())
                    .key(shard.epoch_run())
                    .invoke_async(&mut con)
                    .await
                    .map_err(unavailable)?;
                // A value this version cannot read counts as lost: the rebuild replaces it.
                Ok::<_, Error>(value.and_then(|v| v.parse::<i64>().ok()))
            }
        });
        let epochs = futures_util::future::try_join_all(looks).await?;
        let first = epochs.first().copied().flatten();
        Ok(first.filter(|g| epochs.iter().all(|e| *e == Some(*g))))
    }

    /// Takes the rebuild lock of every shard, in order; None while another
    /// replica holds one of them (then none is kept).
    pub(crate) async fn lock_rebuild(&self) -> Result<Option<RebuildLock>, Error> {
        let mut con = self.con.clone();
        let token = crate::domain::id::random_id("rb_", 96);
        let mut held = Vec::with_capacity(SHARDS as usize);
        for (_, shard) in shards(&self.prefix) {
            let taken: Result<Option<String>, Error> = self
                .lock
                .key(shard.lock())
                .arg(&token)
                .arg(REBUILD_LOCK_MS)
                .invoke_async(&mut con)
                .await
                .map_err(unavailable);
            match taken {
                Ok(Some(value)) => held.push(value),
                Ok(None) | Err(_) => {
                    self.unlock_rebuild(RebuildLock { held }).await;
                    return taken.map(|_| None);
                }
            }
        }
        Ok(Some(RebuildLock { held }))
    }

    /// Gives the locks back, unless lost meanwhile (then they are another's).
    pub(crate) async fn unlock_rebuild(&self, lock: RebuildLock) {
        let mut con = self.con.clone();
        for ((_, shard), value) in shards(&self.prefix).zip(&lock.held) {
            let unlocked: Result<i64, _> = self.unlock.key(shard.lock()).arg(value).invoke_async(&mut con).await;
            if let Err(e) = unlocked {
                // It expires on its own.
                tracing::warn!(error = %e, "admission rebuild lock not released");
            }
        }
    }

    /// `command key args…` as a write of the rebuild holding `lock` on the
    /// key's shard; an error once the lock is lost (a flush, or the rebuild
    /// outlived it).
    async fn write_fenced(
        &self,
        con: &mut Link,
        (shard, held): (&Shard, &str),
        command: &str,
        key: &str,
        args: &[&str],
    ) -> Result<(), Error> {
        let mut inv = self.fenced.prepare_invoke();
        inv.key(shard.lock()).key(key).arg(held).arg(command);
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
    /// by writing the generation to every shard's epoch key, which opens
    /// admission again. (Byte totals are left alone otherwise: their truth is
    /// a scan of every retained record, too heavy to run every period.)
    pub(crate) async fn rebuild(
        &self,
        lock: &RebuildLock,
        open: &[(Ticket, bool)],
        now_ms: i64,
        publish: Option<Publish<'_>>,
    ) -> Result<RebuildReport, Error> {
        let mut con = self.con.clone();
        let mut report = RebuildReport::default();
        let live: HashSet<&str> = open.iter().map(|(t, _)| t.execution_id.as_str()).collect();
        let held = |n: usize| lock.held.get(n).map(String::as_str).ok_or_else(lost_lock);
        let mut indexed: Vec<Vec<String>> = Vec::with_capacity(SHARDS as usize);
        for (n, shard) in shards(&self.prefix) {
            let keys = self.prune_shard(&mut con, (&shard, held(n)?), &live, now_ms, &mut report).await?;
            indexed.push(keys);
        }
        // Re-add every open execution (idempotent), bypassing the bounds: it was
        // admitted once. One released since the snapshot was read stays out.
        for (t, started) in open {
            let (n, shard) = self.shard(&t.org_id);
            let mut inv = self.readd.prepare_invoke();
            for k in shard.ticket_keys(t) {
                inv.key(k);
            }
            inv.key(shard.lock()).key(shard.index());
            inv.arg(&t.execution_id).arg(t.expires_at_ms).arg(t.payload_bytes).arg(if *started { "1" } else { "0" });
            inv.arg(held(n)?);
            let added: i64 = inv.invoke_async(&mut con).await.map_err(unavailable)?;
            match added {
                0 => report.skipped_released += 1,
                n if n < 0 => return Err(lost_lock()),
                _ => {}
            }
        }
        if let Some(p) = publish {
            self.publish(&mut con, lock, p, &indexed).await?;
        }
        report.open = open.len();
        Ok(report)
    }

    /// One shard's part of a rebuild before the open executions are added
    /// back: members no open execution names are removed from the scope sets
    /// and from what open executions hold, and keys that are gone leave the
    /// index. Answers the keys the index still names.
    async fn prune_shard(
        &self,
        con: &mut Link,
        (shard, held): (&Shard, &str),
        live: &HashSet<&str>,
        now_ms: i64,
        report: &mut RebuildReport,
    ) -> Result<Vec<String>, Error> {
        let index = shard.index();
        let keys: Vec<String> = redis::cmd("SMEMBERS").arg(&index).query_async(con).await.map_err(unavailable)?;
        let mut kept = Vec::with_capacity(keys.len());
        for key in keys {
            let members: Vec<String> = if shard.is_scope_set(&key) {
                redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).query_async(con).await.map_err(unavailable)?
            } else if shard.is_retained_open(&key) {
                redis::cmd("HKEYS").arg(&key).query_async(con).await.map_err(unavailable)?
            } else {
                Vec::new()
            };
            let remove = if shard.is_scope_set(&key) { "ZREM" } else { "HDEL" };
            for id in members.iter().filter(|id| !live.contains(id.as_str())) {
                if self.admitted_recently(con, shard, id, now_ms).await? {
                    continue;
                }
                self.write_fenced(con, (shard, held), remove, &key, &[id]).await?;
                if remove == "ZREM" {
                    report.removed += 1;
                }
            }
            let exists: bool = redis::cmd("EXISTS").arg(&key).query_async(con).await.map_err(unavailable)?;
            if exists {
                kept.push(key);
            } else {
                self.write_fenced(con, (shard, held), "SREM", &index, &[&key]).await?;
            }
        }
        Ok(kept)
    }

    /// The end of a rebuild after a loss: each project's retained bytes as
    /// Postgres holds them (zero for projects Redis counted that retain
    /// nothing now), then the generation in every shard.
    async fn publish(
        &self,
        con: &mut Link,
        lock: &RebuildLock,
        p: Publish<'_>,
        indexed: &[Vec<String>],
    ) -> Result<(), Error> {
        // Per (shard, project), the hours Postgres retains bytes in.
        let mut by_project: HashMap<(usize, &str), Vec<(i64, u64)>> = HashMap::new();
        for r in p.retained {
            by_project.entry((self.shard(&r.org_id).0, r.project_id.as_str())).or_default().push((r.bucket, r.bytes));
        }
        for ((n, shard), keys) in shards(&self.prefix).zip(indexed) {
            for project in keys.iter().filter_map(|k| shard.project_of_total(k)) {
                by_project.entry((n, project)).or_default();
            }
        }
        for ((n, project), hours) in by_project {
            let shard = Shard::new(&self.prefix, n as u32);
            let [due, total, _, hour] = shard.retained(project);
            let mut inv = self.retained.prepare_invoke();
            inv.key(shard.lock()).key(hour).key(due).key(total).key(shard.index());
            inv.arg(lock.held.get(n).ok_or_else(lost_lock)?);
            for (bucket, bytes) in hours {
                inv.arg(bucket).arg(bytes);
            }
            let written: i64 = inv.invoke_async(con).await.map_err(unavailable)?;
            if written < 0 {
                return Err(lost_lock());
            }
        }
        for ((_, shard), held) in shards(&self.prefix).zip(&lock.held) {
            let published: i64 = self
                .publish
                .key(shard.lock())
                .key(shard.epoch())
                .key(shard.epoch_run())
                .arg(held)
                .arg(p.generation)
                .invoke_async(con)
                .await
                .map_err(unavailable)?;
            if published < 0 {
                return Err(lost_lock());
            }
        }
        Ok(())
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
    pub(crate) async fn wipe_for_tests(&self) {
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
    pub(crate) async fn pretend_restarted_for_tests(&self, lock: Option<&RebuildLock>) -> Option<RebuildLock> {
        let mut con = self.con.clone();
        let other_run = "0".repeat(40);
        for (_, shard) in shards(&self.prefix) {
            let _: Result<(), _> = redis::cmd("SET").arg(shard.epoch_run()).arg(&other_run).query_async(&mut con).await;
        }
        let lock = lock?;
        let mut held = Vec::new();
        for ((_, shard), value) in shards(&self.prefix).zip(&lock.held) {
            let (token, _) = value.rsplit_once(':')?;
            let restored = format!("{token}:{other_run}");
            let _: Result<(), _> = redis::cmd("SET").arg(shard.lock()).arg(&restored).query_async(&mut con).await;
            held.push(restored);
        }
        Some(RebuildLock { held })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    pub(crate) open: usize,
    pub(crate) removed: usize,
    /// Open in the snapshot, but released before the rebuild reached them.
    pub(crate) skipped_released: usize,
}

#[tonic::async_trait]
impl Admission for RedisAdmission {
    async fn admit(&self, t: &Ticket, now_ms: i64) -> Result<Result<Admitted, Rejection>, Error> {
        let answer = self.ops.call(Kind::Admit, t, now_ms).await?.unwrap_or_default();
        if let Some(epoch) = answer.strip_prefix("ok:") {
            // An epoch this version cannot read is never published by a rebuild
            // of it; such an admission fails its insert and is retried.
            return Ok(Ok(Admitted { fence: Some(epoch.parse().unwrap_or(-1)) }));
        }
        let scope = match answer.as_str() {
            "rebuilding" => {
                self.lost.notify_one();
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

    async fn started(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.ops.call(Kind::Started, t, now_ms).await.map(|_| ())
    }

    async fn release(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        let admitted_at = self.ops.call(Kind::Release, t, now_ms).await?;
        if let Some(at) = admitted_at.and_then(|at| at.parse::<i64>().ok()) {
            self.observe((now_ms - at) as f64);
        }
        Ok(())
    }

    async fn withdraw(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.ops.call(Kind::Withdraw, t, now_ms).await.map(|_| ())
    }
}
