//! The periodic sweep (deadlines, owner loss, retention, history sums) and this replica's
//! entry in the coordinator directory. Safe on every replica at once: each step
//! is a locked read-modify-write through the state machine.

use super::Engine;
use crate::admission::Ticket;
use crate::admission::redis::{Publish, RedisAdmission};
use crate::store::{OpenExecution, SweepReport};
use baton_proto::clock::now_ms;
use std::sync::Arc;
use std::time::Duration;

/// How often the backlog gauge is re-counted (one grouped index scan).
const BACKLOG_EVERY: Duration = Duration::from_secs(5);
/// How often the history's day partitions are created ahead.
const PARTITIONS_EVERY: Duration = Duration::from_secs(60);
/// How often finished runs are summed for history counts (each pass reads
/// only the runs created since the last).
const SEAL_EVERY: Duration = Duration::from_secs(60);
/// How often audit rows past their year are let go (a minute late is nothing
/// to a year, and an idle pass should not write).
const AUDIT_EVERY: Duration = Duration::from_secs(60);
const AUDIT_BATCH: u32 = 500;

pub(super) async fn run(engine: Arc<Engine>) {
    let interval = Duration::from_millis(engine.options.sweep_interval_ms.max(50));
    let mut backlog_read = None;
    let mut sealed = None;
    let mut partitioned = None;
    let mut audited = None;
    loop {
        let now = now_ms();
        if let Err(e) = engine.store.upsert_coordinator(&engine.options.id, &engine.options.advertise_url, now).await {
            tracing::warn!(error = %e, "coordinator directory update failed");
        }
        // While this replica seals with its key, no rewrap may retire it.
        if let Err(e) = engine.store.note_payload_key(engine.options.key_ring.sealing_key_id(), now).await {
            tracing::warn!(error = %e, "noting the payload key in use failed");
        }
        engine.sweep_once(now).await;
        if backlog_read.is_none_or(|at: tokio::time::Instant| at.elapsed() >= BACKLOG_EVERY) {
            backlog_read = Some(tokio::time::Instant::now());
            match engine.store.pending_by_project().await {
                Ok(counts) => engine.metrics.set_backlog(counts),
                Err(e) => tracing::warn!(error = %e, "counting the backlog failed"),
            }
        }
        if partitioned.is_none_or(|at: tokio::time::Instant| at.elapsed() >= PARTITIONS_EVERY) {
            partitioned = Some(tokio::time::Instant::now());
            ensure_partitions(&engine, now).await;
        }
        if sealed.is_none_or(|at: tokio::time::Instant| at.elapsed() >= SEAL_EVERY) {
            sealed = Some(tokio::time::Instant::now());
            if let Err(e) = engine.store.seal_histories(now).await {
                tracing::warn!(error = %e, "sealing history counts failed; retried next pass");
            }
        }
        if audited.is_none_or(|at: tokio::time::Instant| at.elapsed() >= AUDIT_EVERY) {
            audited = Some(tokio::time::Instant::now());
            let audit_cutoff = now.saturating_sub(crate::audit::RETENTION_MS);
            match engine.store.delete_audit_before(audit_cutoff, AUDIT_BATCH).await {
                // A full batch: more may wait, so the next pass deletes again.
                Ok(n) if n >= u64::from(AUDIT_BATCH) => audited = None,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "deleting audit rows past retention failed; retried next pass"),
            }
        }
        tokio::select! {
            _ = engine.shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// What each open execution holds in admission, and whether it left the backlog.
fn open_tickets(open: Vec<OpenExecution>) -> Vec<(Ticket, bool)> {
    open.into_iter()
        .map(|o| {
            let ticket = Ticket {
                execution_id: o.id,
                org_id: o.org_id,
                project_id: o.project_id,
                user_id: o.user_id,
                payload_bytes: o.payload_bytes,
                expires_at_ms: o.execution_deadline,
                retained_until_ms: o.retention_expires_at,
            };
            (ticket, o.started)
        })
        .collect()
}

/// Admission kept in this process's memory starts from the open executions
/// (a restarted coordinator would otherwise admit a full bound on top of them).
pub(super) async fn restore_admission(engine: &Engine) -> super::Result<usize> {
    let now = now_ms();
    let open = open_tickets(engine.store.open_executions().await?);
    let retained = engine.store.retained_bytes(now).await?;
    engine.admission.restore(&open, &retained, now).await?;
    Ok(open.len())
}

impl Engine {
    /// One pass of the sweeper's checks of open executions (lapsed leases,
    /// owners lost, deadlines), with the transitions' effects. The sweeper
    /// loops on it; the deterministic simulation calls it as one of its steps.
    pub async fn sweep_once(&self, now: i64) -> SweepReport {
        let (report, applied) = self.store.sweep(now, self.options.owner_loss_grace_ms, 500).await;
        for a in &applied {
            self.after_commit(a).await;
        }
        if report != Default::default() {
            tracing::info!(?report, "sweep");
        }
        self.metrics.swept(report.lease_lapsed, report.owner_lost);
        report
    }
}

/// Creates the history's partitions for every day a run created now may
/// expire on (with the windows as they are set now).
async fn ensure_partitions(engine: &Engine, now: i64) {
    let lifetime = &engine.options.lifetime;
    let created = match engine.store.retention_horizon(now, lifetime.max_ttl_ms, lifetime.retention_ms).await {
        Ok(until) => engine.store.ensure_partitions(now, until).await,
        Err(e) => Err(e),
    };
    match created {
        Ok(0) => {}
        Ok(n) => tracing::info!(days = n, "history partitions created ahead"),
        Err(e) => tracing::warn!(error = %e, "creating history partitions failed; retried next pass"),
    }
    if let Err(e) = engine.store.ensure_audit_partitions(now).await {
        tracing::warn!(error = %e, "creating audit log partitions failed; retried next pass");
    }
}

/// Keeps Redis admission equal to the durable truth: a rebuild before the
/// coordinator serves, every `admission_rebuild_ms`, and as soon as a shard's
/// epoch shows a loss (a flush, a restarted Redis, a failover; until the
/// rebuild is done, admission refuses with 503). Safe on every replica at
/// once: one rebuilds at a time, the others try again on their next look.
pub(super) async fn reconcile_admission(engine: Arc<Engine>) {
    let Some(redis) = engine.cluster_admission.clone() else { return };
    let period = Duration::from_millis(engine.options.admission_rebuild_ms.max(1_000));
    let mut last = Some(tokio::time::Instant::now());
    loop {
        tokio::select! {
            _ = engine.shutdown.cancelled() => return,
            // An admission refused because its shard lost its state: at once.
            _ = redis.loss_seen() => {}
            // Otherwise look once a second (one small script per shard), so
            // the bounds are whole again before the next burst arrives.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let due = last.is_none_or(|t| t.elapsed() >= period);
        let flushed = matches!(redis.epoch().await, Ok(None));
        if (due || flushed) && rebuild_admission(&engine, &redis).await {
            last = Some(tokio::time::Instant::now());
        }
    }
}

/// One rebuild of Redis admission from the open executions; true when done
/// (false when it failed, or another replica is rebuilding).
///
/// When Redis lost its state (its epoch is not Postgres' admission generation),
/// the generation moves on first (store/fence.rs): that waits out every create
/// admitted before the loss that is being inserted, and turns away the ones
/// not yet inserted, so the open executions read next hold every create the
/// bounds must count. The rebuild then publishes the new generation.
pub(super) async fn rebuild_admission(engine: &Engine, redis: &RedisAdmission) -> bool {
    let lock = match redis.lock_rebuild().await {
        Ok(Some(lock)) => lock,
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(error = %e, "admission rebuild failed");
            return false;
        }
    };
    let mut flushed = false;
    let rebuilt = async {
        let epoch = redis.epoch().await.map_err(|e| e.to_string())?;
        let current = engine.store.admission_fence().await.map_err(|e| e.to_string())?;
        let generation = if epoch == Some(current) {
            None
        } else {
            flushed = true;
            Some(engine.store.advance_admission_fence().await.map_err(|e| e.to_string())?)
        };
        let open = engine.store.open_executions().await.map_err(|e| e.to_string())?;
        let retained = match generation {
            Some(_) => engine.store.retained_bytes(now_ms()).await.map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        let open = open_tickets(open);
        let publish = generation.map(|generation| Publish { generation, retained: &retained });
        redis.rebuild(&lock, &open, now_ms(), publish).await.map_err(|e| e.to_string())
    }
    .await;
    redis.unlock_rebuild(lock).await;
    match rebuilt {
        Ok(report) => {
            if flushed || report.removed > 0 {
                tracing::info!(
                    open = report.open,
                    removed = report.removed,
                    flushed,
                    "admission rebuilt from postgres"
                );
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "admission rebuild failed");
            false
        }
    }
}

/// Decides, twice a second, whether heavy reads may use the read replica
/// (store/replica.rs); logs when that changes. Returns at once without one.
pub(super) async fn measure_read_replica(engine: Arc<Engine>) {
    use crate::store::ReplicaState;
    let mut was_fresh = None;
    loop {
        let Some(state) = engine.store.measure_replica(now_ms()).await else { return };
        let fresh = matches!(state, ReplicaState::Fresh { .. });
        if was_fresh != Some(fresh) {
            match state {
                ReplicaState::Fresh { lag_ms } => tracing::info!(lag_ms, "heavy reads use the read replica"),
                ReplicaState::Behind { lag_ms } => {
                    tracing::warn!(lag_ms, "read replica is behind; heavy reads use the primary")
                }
                ReplicaState::Down => tracing::warn!("read replica unreachable; heavy reads use the primary"),
            }
            was_fresh = Some(fresh);
        }
        tokio::select! {
            _ = engine.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}
