//! The sampler: reads `pg_locks` with `pg_stat_activity` every few tens of
//! milliseconds and keeps, from first sight to last, the write-blocking
//! locks the migrating connection holds and the lock waits of the load's
//! statements and of the migration.

use super::super::stats::Samples;
use super::{LOAD_APP, MIGRATE_APP};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// A lock seen by the sampler, from its first sight to its last.
pub(super) struct Seen {
    pub migration: i64,
    pub relation: String,
    pub mode: String,
    first: Instant,
    last: Instant,
}

impl Seen {
    pub(super) fn held(&self) -> Duration {
        self.last - self.first
    }
}

#[derive(Default)]
pub(super) struct Locks {
    /// Write-blocking locks the migrating connection held, by (migration, relation oid, mode).
    pub held: BTreeMap<(i64, i64, String), Seen>,
    /// Lock waits of the load's statements, by (pid, query start): the longest wait seen, and on what.
    pub load_waits: BTreeMap<(i32, String), (f64, String)>,
    /// Lock waits of the migrating connection (what lock_timeout bounds).
    pub migration_waits: BTreeMap<(i32, String), (f64, String)>,
    pub samples: u64,
    pub sample_time: Samples,
}

pub(super) struct Sampler {
    pub current: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<Locks>>,
}

type LockRow = (i32, String, String, bool, i64, Option<String>, String, f64, String);

impl Sampler {
    pub(super) async fn start(url: &str, every_ms: u64) -> anyhow::Result<Sampler> {
        let db = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(url).await?;
        let current = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (current, stop) = (current.clone(), stop.clone());
            baton_worker::supervise::spawn_supervised("bench migrate lock sampler", async move {
                let mut locks = Locks::default();
                let mut tick = tokio::time::interval(Duration::from_millis(every_ms.max(10)));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let t = Instant::now();
                    // A relation created inside the migration's own
                    // transaction has no name the sampler can see: the load
                    // cannot reach it either, so it is left out.
                    let rows: Vec<LockRow> = sqlx::query_as(
                        "SELECT l.pid, a.application_name::text, l.mode::text, l.granted, l.relation::bigint, \
                         c.relname::text, COALESCE(a.query_start::text, ''), \
                         COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - a.query_start) * 1000, 0)::float8, \
                         COALESCE(c.relkind::text, '') \
                         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                         LEFT JOIN pg_class c ON c.oid = l.relation \
                         WHERE l.locktype = 'relation' AND a.datname = current_database() \
                         AND l.pid <> pg_backend_pid() AND a.application_name IN ($1, $2) \
                         AND (NOT l.granted OR l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', \
                         'AccessExclusiveLock'))",
                    )
                    .bind(LOAD_APP)
                    .bind(MIGRATE_APP)
                    .fetch_all(&db)
                    .await?;
                    let at = Instant::now();
                    locks.samples += 1;
                    locks.sample_time.push_duration(at - t);
                    let migration = current.load(Ordering::Relaxed);
                    for (pid, app, mode, granted, oid, relname, query_start, waited_ms, relkind) in rows {
                        let relation = relname.clone().unwrap_or_else(|| format!("oid {oid}"));
                        if !granted {
                            let what = format!("{mode} on {relation}");
                            let waits =
                                if app == LOAD_APP { &mut locks.load_waits } else { &mut locks.migration_waits };
                            let entry = waits.entry((pid, query_start)).or_insert((0.0, what.clone()));
                            if waited_ms > entry.0 {
                                *entry = (waited_ms, what);
                            }
                        } else if app == MIGRATE_APP && relname.is_some() && migration > 0 && is_table(&relkind) {
                            let seen = locks.held.entry((migration, oid, mode.clone())).or_insert(Seen {
                                migration,
                                relation,
                                mode,
                                first: at,
                                last: at,
                            });
                            seen.last = at;
                        }
                    }
                }
                db.close().await;
                Ok(locks)
            })
        };
        Ok(Sampler { current, stop, task })
    }

    pub(super) async fn stop(self) -> Locks {
        self.stop.store(true, Ordering::Relaxed);
        match self.task.await {
            Ok(Ok(locks)) => locks,
            Ok(Err(e)) => {
                println!("  the lock sampler stopped: {e}");
                Locks::default()
            }
            Err(e) => {
                println!("  the lock sampler stopped: {e}");
                Locks::default()
            }
        }
    }
}

/// The longest-held of the locks `which` picks, and every table its
/// migration held a lock of that mode on about as long (within 100 ms).
pub(super) fn longest(locks: &Locks, which: impl Fn(&Seen) -> bool) -> Option<(&Seen, String)> {
    let top = locks.held.values().filter(|s| which(s)).max_by_key(|s| s.held())?;
    let near = Duration::from_millis(100);
    let tables: Vec<&str> = locks
        .held
        .values()
        .filter(|s| s.migration == top.migration && s.mode == top.mode && s.held() + near >= top.held())
        .map(|s| s.relation.as_str())
        .collect();
    Some((top, tables.join(", ")))
}

/// A table or a partitioned table: what the load's statements lock (a lock
/// on one of its indexes comes with one on the table).
fn is_table(relkind: &str) -> bool {
    relkind == "r" || relkind == "p"
}
