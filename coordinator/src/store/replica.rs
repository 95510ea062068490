//! A streaming read replica for the heavy reads: history lists, counts and
//! timelines, and the audit log. Everything else (authorization, owner
//! lifecycle reads, `tasks/get`, whatever a caller just wrote) reads the
//! primary.
//!
//! A replica is used only while it is fresh: `measure` compares the
//! primary's WAL position with what the replica has replayed, keeping the
//! primary's positions of the last moments, so the lag is a time even when
//! nothing is being written (a replay timestamp would grow on an idle
//! primary). Over `max_lag_ms`, unreachable, or failing a read, the reads go
//! to the primary until a later measure finds the replica fresh again.

use super::{Error, Result, Store};
use crate::domain::Millis;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge};
use sqlx::AnyPool;
use sqlx::Row;
use sqlx::any::AnyPoolOptions;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long one look at either server may take before the replica counts as down.
const LOOK_TIMEOUT: Duration = Duration::from_secs(1);

pub(super) struct Replica {
    pool: AnyPool,
    max_lag_ms: i64,
    fresh: AtomicBool,
    /// The primary's WAL positions as measured, oldest first.
    positions: Mutex<VecDeque<(Millis, i64)>>,
    reads: Counter<u64>,
    lag: Gauge<f64>,
}

/// What one measure found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ReplicaState {
    /// Behind the primary by at most this long: heavy reads go to it.
    Fresh { lag_ms: i64 },
    /// Further behind than the bound allows.
    Behind { lag_ms: i64 },
    /// It did not answer.
    Down,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("fresh", &self.fresh).field("max_lag_ms", &self.max_lag_ms).finish()
    }
}

impl Replica {
    pub(super) fn connect(url: &str, max_connections: u32, max_lag_ms: i64) -> Result<Replica> {
        // Lazily: a replica that is down at start must not keep the coordinator from serving.
        let pool = AnyPoolOptions::new()
            .acquire_timeout(LOOK_TIMEOUT)
            .max_connections(max_connections.max(2))
            .connect_lazy(url)
            .map_err(Error::Unavailable)?;
        let meter = baton_telemetry::meter();
        Ok(Replica {
            pool,
            max_lag_ms,
            fresh: AtomicBool::new(false),
            positions: Mutex::new(VecDeque::new()),
            reads: meter
                .u64_counter("baton.history.reads")
                .with_description("Heavy reads (history, audit log), by the server that answered (replica, primary)")
                .build(),
            lag: meter
                .f64_gauge("baton.read_replica.lag")
                .with_unit("s")
                .with_description("How far the read replica is behind the primary, as last measured")
                .build(),
        })
    }

    fn stale(&self) {
        self.fresh.store(false, Ordering::Relaxed);
    }
}

async fn wal_position(pool: &AnyPool, sql: &'static str) -> Result<Option<i64>> {
    let row = tokio::time::timeout(LOOK_TIMEOUT, sqlx::query(sql).fetch_one(pool))
        .await
        .map_err(|_| Error::Unavailable(sqlx::Error::PoolTimedOut))??;
    Ok(row.try_get::<Option<i64>, _>("lsn")?)
}

impl Store {
    /// Heavy reads go to `url` while it keeps within `max_lag_ms` of this store.
    pub(crate) fn with_read_replica(mut self, url: &str, max_connections: u32, max_lag_ms: i64) -> Result<Store> {
        if self.dialect != super::Dialect::Postgres
            || !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return Err(Error::UnsupportedUrl);
        }
        self.replica = Some(std::sync::Arc::new(Replica::connect(url, max_connections, max_lag_ms)?));
        Ok(self)
    }

    /// Measures the replica's lag and decides whether heavy reads use it;
    /// None without a replica. Called about twice a second.
    pub(crate) async fn measure_replica(&self, now: Millis) -> Option<ReplicaState> {
        let replica = self.replica.as_ref()?;
        let primary = wal_position(&self.pool, "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS lsn").await;
        let replayed =
            wal_position(&replica.pool, "SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS lsn").await;
        let state = match (primary, replayed) {
            (Ok(Some(written)), Ok(replayed)) => {
                let mut positions = replica.positions.lock().unwrap_or_else(|p| p.into_inner());
                positions.push_back((now, written));
                // Older positions cannot decide anything the bound does not already.
                while positions.front().is_some_and(|(at, _)| now - at > replica.max_lag_ms.saturating_mul(2)) {
                    positions.pop_front();
                }
                // Not in recovery (pointed at a primary): nothing to wait for.
                let lag_ms = match replayed {
                    None => 0,
                    Some(replayed) => positions.iter().find(|(_, lsn)| *lsn > replayed).map_or(0, |(at, _)| now - at),
                };
                if lag_ms <= replica.max_lag_ms {
                    ReplicaState::Fresh { lag_ms }
                } else {
                    ReplicaState::Behind { lag_ms }
                }
            }
            _ => ReplicaState::Down,
        };
        match state {
            ReplicaState::Fresh { lag_ms } | ReplicaState::Behind { lag_ms } => {
                replica.lag.record(lag_ms as f64 / 1_000.0, &[]);
            }
            ReplicaState::Down => {}
        }
        replica.fresh.store(matches!(state, ReplicaState::Fresh { .. }), Ordering::Relaxed);
        Some(state)
    }

    /// Runs the heavy read `read` on the replica while it is fresh, else on the
    /// primary; a read the replica fails is run again on the primary (and the
    /// replica is set aside until it measures fresh again).
    pub(super) async fn heavy_read<T, F, Fut>(&self, read: F) -> Result<T>
    where
        F: Fn(AnyPool) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if let Some(replica) = self.replica.as_ref().filter(|r| r.fresh.load(Ordering::Relaxed)) {
            match read(replica.pool.clone()).await {
                Ok(v) => {
                    replica.reads.add(1, &[KeyValue::new("target", "replica")]);
                    return Ok(v);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "read replica failed a read; reading the primary");
                    replica.stale();
                }
            }
        }
        let v = read(self.pool.clone()).await?;
        if let Some(replica) = &self.replica {
            replica.reads.add(1, &[KeyValue::new("target", "primary")]);
        }
        Ok(v)
    }
}
