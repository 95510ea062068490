//! Time-driven transitions: deadlines, lease lapses, owner loss, and deletion past
//! retention. Each kind is swept in batches whose rows are locked with `SKIP
//! LOCKED`, so replicas sweeping at once take disjoint rows (three replicas
//! sweep about three times as fast as one) and a row another replica already
//! moved is simply ignored by the state machine. One bad row never stops a pass:
//! it is logged and skipped, and what was committed is always returned, so its
//! effects run.

use super::executions::{Applied, delete_execution};
use super::history_counts::{DeletedRun, forget_deleted, key_columns};
use super::partitions::ended_day_condition;
use super::records::{EXECUTION_COLUMNS, execution_from_row};
use super::write::{EventData, Pending, persist_many};
use super::{Dialect, Result, Store};
use crate::domain::{self, Event, ExecutionId, Millis};
use sqlx::{AssertSqlSafe, Row};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub(crate) deadline_exceeded: usize,
    pub(crate) lease_lapsed: usize,
    pub(crate) owner_lost: usize,
    pub deleted: usize,
    /// Idempotency-Keys of expired runs deleted (their rows are not partitioned).
    pub keys_deleted: usize,
    /// Days of history dropped whole (Postgres partitions).
    pub days_dropped: usize,
    /// Rows that could not be read or written this pass (logged, retried next pass).
    pub failed: usize,
}

/// A non-terminal execution as admission sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenExecution {
    pub(crate) id: String,
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) user_id: String,
    /// The payload bytes its record keeps (sealed input, and whatever was
    /// stored since).
    pub(crate) payload_bytes: u64,
    pub execution_deadline: Millis,
    pub(crate) retention_expires_at: Millis,
    /// Left the backlog: claimed at least once.
    pub(crate) started: bool,
}

/// A sweep batch written, or the error and the ids to try one by one.
type BatchOutcome = std::result::Result<Vec<Applied>, (super::Error, Vec<ExecutionId>)>;

#[derive(Clone, Copy)]
enum Kind {
    Deadline,
    OwnerLoss,
    Lapsed,
}

/// The time-driven transitions, each with the rows it applies to (`$1` = now).
const KINDS: [(&str, Kind); 3] = [
    ("status IN ('pending', 'working', 'input_required') AND execution_deadline <= $1", Kind::Deadline),
    (
        "status IN ('working', 'input_required') AND owner_loss_detection_at IS NOT NULL \
         AND owner_loss_detection_at <= $1",
        Kind::OwnerLoss,
    ),
    (
        "status IN ('working', 'input_required') AND owner_loss_detection_at IS NULL AND lease_expires_at <= $1",
        Kind::Lapsed,
    ),
];
const OPEN: &str = "status IN ('pending', 'working', 'input_required')";

impl Store {
    /// Every non-terminal execution, with what admission counts of it.
    pub async fn open_executions(&self) -> Result<Vec<OpenExecution>> {
        let sql = format!(
            "SELECT id, org_id, project_id, user_id, execution_deadline, retention_expires_at, started_at, \
             payload_bytes FROM executions WHERE {OPEN}"
        );
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let started: Option<i64> = r.try_get("started_at")?;
                let bytes: i64 = r.try_get("payload_bytes")?;
                Ok(OpenExecution {
                    id: r.try_get("id")?,
                    org_id: r.try_get("org_id")?,
                    project_id: r.try_get("project_id")?,
                    user_id: r.try_get("user_id")?,
                    payload_bytes: u64::try_from(bytes).unwrap_or(0),
                    execution_deadline: r.try_get("execution_deadline")?,
                    retention_expires_at: r.try_get("retention_expires_at")?,
                    started: started.is_some(),
                })
            })
            .collect()
    }

    /// The payload bytes retained executions keep, per project and retention
    /// hour (`admission::retention_bucket`): the byte totals a rebuild after
    /// a loss starts from. A scan of every retained record.
    pub(crate) async fn retained_bytes(&self, now: Millis) -> Result<Vec<crate::admission::RetainedBytes>> {
        // The hour's end in SQL, as `retention_bucket` computes it (times are positive).
        let rows = sqlx::query(
            "SELECT org_id, project_id, (retention_expires_at / 3600000 + 1) * 3600000 AS bucket, \
             CAST(SUM(payload_bytes) AS BIGINT) AS bytes FROM executions WHERE retention_expires_at > $1 \
             GROUP BY org_id, project_id, bucket",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let bytes: i64 = r.try_get("bytes")?;
                Ok(crate::admission::RetainedBytes {
                    org_id: r.try_get("org_id")?,
                    project_id: r.try_get("project_id")?,
                    bucket: r.try_get("bucket")?,
                    bytes: u64::try_from(bytes).unwrap_or(0),
                })
            })
            .collect()
    }

    /// One pass over the rows matching `condition` (with `$1` = now): up to
    /// `limit` of them, locked, decided and written in one commit. If the batch
    /// cannot be written, each row is tried alone.
    async fn sweep_kind(
        &self,
        condition: &str,
        event: &Event,
        now: Millis,
        limit: u32,
        report: &mut SweepReport,
    ) -> Vec<Applied> {
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE {condition} LIMIT $2{}",
            self.dialect.for_update_skip_locked()
        );
        let batch = async {
            let mut tx = self.begin().await?;
            let rows = sqlx::query(AssertSqlSafe(sql)).bind(now).bind(i64::from(limit)).fetch_all(&mut *tx).await?;
            let mut decided = Vec::with_capacity(rows.len());
            for row in &rows {
                match execution_from_row(row) {
                    Ok(record) => {
                        if let Ok(t) = domain::apply(&record.state, event, now) {
                            decided.push((record, t));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "sweep skipped an unreadable execution row");
                        report.failed += 1;
                    }
                }
            }
            let no_data = EventData::default();
            let pending: Vec<Pending> =
                decided.iter().map(|(before, t)| Pending { before, event, transition: t, data: &no_data }).collect();
            match persist_many(&mut tx, &pending, now).await {
                Ok(written) => {
                    self.commit(tx).await?;
                    let effects = decided.into_iter().map(|(_, t)| t.effects);
                    let deliveries_queued = written.deliveries_queued;
                    Ok(Ok(written
                        .records
                        .into_iter()
                        .zip(effects)
                        .map(|(record, effects)| Applied { record, effects, deliveries_queued })
                        .collect()))
                }
                Err(e) => Ok(Err((e, decided.into_iter().map(|(r, _)| r.id).collect::<Vec<_>>()))),
            }
        };
        let batch: Result<BatchOutcome> = batch.await;
        let ids: Vec<ExecutionId> = match batch {
            Ok(Ok(applied)) => return applied,
            Ok(Err((e, ids))) => {
                tracing::warn!(error = %e, rows = ids.len(), "sweep batch not written; trying each row alone");
                ids
            }
            Err(e) => {
                tracing::warn!(error = %e, "sweep pass failed");
                report.failed += 1;
                return Vec::new();
            }
        };
        let mut applied = Vec::new();
        for id in ids {
            match self.apply(&id, event, &EventData::default(), now).await {
                Ok(Some(Ok(a))) => applied.push(a),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, execution_id = %id, "sweep skipped an execution");
                    report.failed += 1;
                }
            }
        }
        applied
    }

    /// How many executions wait for a worker, per project.
    pub(crate) async fn pending_by_project(&self) -> Result<std::collections::HashMap<String, i64>> {
        let rows = sqlx::query(
            "SELECT project_id, COUNT(*) AS n FROM executions WHERE status = 'pending' GROUP BY project_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("project_id")?, r.try_get("n")?))).collect()
    }

    /// Deletes up to `limit` executions past retention, rows locked with `SKIP
    /// LOCKED`: on Postgres only those in the default partition (the others
    /// leave with their day, store/partitions.rs), on SQLite every one. Then
    /// up to `limit` Idempotency-Keys whose runs have expired.
    async fn delete_expired(&self, now: Millis, limit: u32, report: &mut SweepReport) -> Result<()> {
        let table = match self.dialect {
            Dialect::Postgres => "executions_default",
            Dialect::Sqlite => "executions",
        };
        let sql = format!(
            "SELECT id, org_id, project_id, created_at, {} FROM {table} WHERE retention_expires_at <= $1 LIMIT $2{}",
            key_columns(),
            self.dialect.for_update_skip_locked()
        );
        let mut tx = self.begin().await?;
        let rows = sqlx::query(AssertSqlSafe(sql)).bind(now).bind(i64::from(limit)).fetch_all(&mut *tx).await?;
        let runs = rows.iter().map(DeletedRun::from_row).collect::<Result<Vec<_>>>()?;
        for run in &runs {
            delete_execution(&mut tx, &run.id).await?;
        }
        forget_deleted(&mut tx, self.dialect, &runs).await?;
        self.commit(tx).await?;
        report.deleted += runs.len();
        // Key rows are narrow (two indexes): ten times the runs' batch.
        let keys = sqlx::query(
            "DELETE FROM execution_keys WHERE (org_id, project_id, user_id, idempotency_key) IN \
             (SELECT org_id, project_id, user_id, idempotency_key FROM execution_keys \
             WHERE retention_expires_at <= $1 LIMIT $2)",
        )
        .bind(now)
        .bind(i64::from(limit.saturating_mul(10)))
        .execute(&self.pool)
        .await?;
        report.keys_deleted += usize::try_from(keys.rows_affected()).unwrap_or(usize::MAX);
        report.days_dropped += self.drop_expired_partitions(now).await?;
        Ok(())
    }

    /// What a pass would find, in one read: a pass with nothing due costs this
    /// one statement instead of a locked transaction per kind. Which of
    /// [deadline, owner loss, lapsed lease, expired runs, keys or days].
    async fn due(&self, now: Millis) -> Result<[bool; 4]> {
        let any = |from: &str, condition: &str| {
            format!("(SELECT COUNT(*) FROM (SELECT 1 FROM {from} WHERE {condition} LIMIT 1) d)")
        };
        let (runs, days) = match self.dialect {
            // A day partition whose day has ended is dropped whole.
            Dialect::Postgres => (
                "executions_default",
                format!(
                    " + {}",
                    any(
                        "pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent",
                        &ended_day_condition()
                    )
                ),
            ),
            Dialect::Sqlite => ("executions", String::new()),
        };
        let [deadline, owner_loss, lapsed] = KINDS.map(|(condition, _)| any("executions", condition));
        let sql = format!(
            "SELECT {deadline} AS deadline, {owner_loss} AS owner_loss, {lapsed} AS lapsed, \
             {} + {}{days} AS expired",
            any(runs, "retention_expires_at <= $1"),
            any("execution_keys", "retention_expires_at <= $1"),
        );
        let row = sqlx::query(AssertSqlSafe(sql)).bind(now).fetch_one(&self.pool).await?;
        let found = |column: &str| -> Result<bool> { Ok(row.try_get::<i64, _>(column)? > 0) };
        Ok([found("deadline")?, found("owner_loss")?, found("lapsed")?, found("expired")?])
    }

    /// One sweep pass: the transitions it committed (their effects still to
    /// run) and what it did. Never fails as a whole.
    pub async fn sweep(&self, now: Millis, owner_loss_grace_ms: i64, limit: u32) -> (SweepReport, Vec<Applied>) {
        let mut report = SweepReport::default();
        let mut applied = Vec::new();
        let due = match self.due(now).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "sweep pass failed");
                report.failed += 1;
                return (report, applied);
            }
        };
        let detect_at = now.saturating_add(owner_loss_grace_ms);
        for ((condition, kind), due) in KINDS.into_iter().zip(due) {
            if !due {
                continue;
            }
            let event = match kind {
                Kind::Deadline => Event::DeadlinePassed,
                Kind::OwnerLoss => Event::OwnerLossDue,
                Kind::Lapsed => Event::LeaseLapsed { detect_at },
            };
            let done = self.sweep_kind(condition, &event, now, limit, &mut report).await;
            let count = match kind {
                Kind::Deadline => &mut report.deadline_exceeded,
                Kind::OwnerLoss => &mut report.owner_lost,
                Kind::Lapsed => &mut report.lease_lapsed,
            };
            *count += done.len();
            applied.extend(done);
        }
        if !due[3] {
            return (report, applied);
        }
        if let Err(e) = self.delete_expired(now, limit, &mut report).await {
            tracing::warn!(error = %e, "deleting expired executions failed; retried next pass");
            report.deleted = 0;
            report.failed += 1;
        }
        (report, applied)
    }
}
