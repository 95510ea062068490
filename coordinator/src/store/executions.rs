//! Execution rows: create (with idempotency), read, list, claim, and the one
//! read-modify-write path every other transition takes (`apply`).

use super::records::{
    AttemptRecord, EXECUTION_COLUMNS, ExecutionRecord, NewExecution, attempt_from_row, execution_from_row,
    phase_columns,
};
use super::{Error, Result, Store};
use crate::domain::{self, Effect, Event, FailureReason, Millis, Outcome, Phase, State, Transition};
use sqlx::any::Any;
use sqlx::{AssertSqlSafe, Row, Transaction};

/// Payload and message data that accompanies an event (settlements mostly).
#[derive(Clone, Debug, Default)]
pub struct EventData {
    pub output_ct: Option<Vec<u8>>,
    pub error_message: Option<String>,
    pub error_detail_ct: Option<Vec<u8>>,
    pub summary: Option<String>,
    /// Extra bytes this event adds to the execution's retained payload.
    pub payload_bytes: i64,
    /// With `RemoteTaskRecorded`: the remote task id.
    pub remote_task_id: Option<String>,
    /// With `InputRequested`: (published key, remote key, sealed spec) per request.
    pub new_input_requests: Vec<(String, String, Vec<u8>)>,
}

#[derive(Clone, Debug)]
pub struct Created {
    pub record: ExecutionRecord,
    /// True when an Idempotency-Key matched an existing execution.
    pub replayed: bool,
}

#[derive(Clone, Debug)]
pub struct Applied {
    pub record: ExecutionRecord,
    pub effects: Vec<Effect>,
}

#[derive(Clone, Debug)]
pub struct Claimed {
    pub record: ExecutionRecord,
    pub attempt: u32,
}

/// Whose executions a list shows: an end user's, or those one API key started.
#[derive(Clone, Debug)]
pub enum ListFilter {
    User { project_id: String, user_id: String, gateway_id: Option<String> },
    StartedBy { project_id: String, credential_id: String },
}

fn default_message(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::ToolError => "the tool reported an error",
        FailureReason::DeadlineExceeded => "the execution deadline passed before the tool finished",
        FailureReason::OwnerLost => "the worker running this execution stopped responding",
        FailureReason::UnsupportedInteraction => "the tool requested an interaction Baton does not support",
        FailureReason::InvocationRefused => "the tool's execution policy refused this invocation",
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

impl Store {
    pub async fn create_execution(&self, new: &NewExecution) -> Result<Created> {
        // A concurrent create with the same key loses the unique index race; the
        // second pass then finds the winner's row.
        for _ in 0..2 {
            match self.try_create(new).await {
                Err(Error::Database(e)) if is_unique_violation(&e) => continue,
                other => return other,
            }
        }
        Err(Error::IdempotencyConflict)
    }

    async fn try_create(&self, new: &NewExecution) -> Result<Created> {
        let mut tx = self.pool.begin().await?;
        if let Some(key) = &new.idempotency_key {
            let sql = format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions WHERE project_id = $1 AND user_id = $2 AND idempotency_key = $3{}",
                self.dialect.for_update()
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(&new.project_id)
                .bind(&new.user_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(row) = row {
                let existing = execution_from_row(&row)?;
                if existing.retention_expires_at > new.created_at {
                    tx.commit().await?;
                    return if existing.request_fingerprint == new.request_fingerprint {
                        Ok(Created { record: existing, replayed: true })
                    } else {
                        Err(Error::IdempotencyConflict)
                    };
                }
                // Past retention the record is gone for every reader; free the key.
                delete_execution(&mut tx, &existing.id).await?;
            }
        }
        let (execution_type, not_before, scheduled_at) = match new.run_at {
            Some(at) if at > new.created_at => ("scheduled", at, Some(at)),
            _ => ("immediate", new.created_at, None),
        };
        let state = State::new(not_before, new.execution_deadline, new.max_attempts);
        sqlx::query(
            "INSERT INTO executions (id, org_id, project_id, gateway_id, tool_name, toolkit_name, toolkit_version, \
             user_id, started_by, surface, execution_type, status, not_before, attempts, max_attempts, \
             cancel_requested, created_at, scheduled_at, updated_at, execution_deadline, retention_expires_at, \
             poll_interval_ms, idempotency_key, request_fingerprint, input_ct, payload_bytes, traceparent, version) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, 0, $13, 0, $14, $15, $14, $16, $17, \
             $18, $19, $20, $21, $22, $23, 1)",
        )
        .bind(&new.id)
        .bind(&new.org_id)
        .bind(&new.project_id)
        .bind(&new.gateway_id)
        .bind(&new.tool_name)
        .bind(&new.toolkit_name)
        .bind(&new.toolkit_version)
        .bind(&new.user_id)
        .bind(&new.started_by)
        .bind(&new.surface)
        .bind(execution_type)
        .bind(not_before)
        .bind(i64::from(state.max_attempts))
        .bind(new.created_at)
        .bind(scheduled_at)
        .bind(new.execution_deadline)
        .bind(new.retention_expires_at)
        .bind(new.poll_interval_ms)
        .bind(&new.idempotency_key)
        .bind(&new.request_fingerprint)
        .bind(&new.input_ct)
        .bind(new.payload_bytes)
        .bind(&new.traceparent)
        .execute(&mut *tx)
        .await?;
        insert_event(&mut tx, &new.id, 1, new.created_at, "created", "pending", Some(execution_type)).await?;
        let record = fetch(&mut tx, &new.id, "").await?.ok_or_else(|| Error::Corrupt(new.id.clone()))?;
        tx.commit().await?;
        Ok(Created { record, replayed: false })
    }

    /// The live execution an Idempotency-Key already names, if any.
    pub async fn find_idempotent(
        &self,
        project_id: &str,
        user_id: &str,
        key: &str,
        now: Millis,
    ) -> Result<Option<ExecutionRecord>> {
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE project_id = $1 AND user_id = $2 \
             AND idempotency_key = $3 AND retention_expires_at > $4"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(project_id)
            .bind(user_id)
            .bind(key)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(execution_from_row).transpose()
    }

    pub async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1");
        let row = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(execution_from_row).transpose()
    }

    /// Newest first; `after` is the (created_at, id) of the last row of the previous page.
    pub async fn list_executions(
        &self,
        filter: &ListFilter,
        now: Millis,
        limit: u32,
        after: Option<(Millis, String)>,
    ) -> Result<Vec<ExecutionRecord>> {
        let (scope, a, b, c) = match filter {
            ListFilter::User { project_id, user_id, gateway_id: Some(g) } => {
                ("project_id = $1 AND user_id = $2 AND gateway_id = $3", project_id, user_id, Some(g))
            }
            ListFilter::User { project_id, user_id, gateway_id: None } => {
                ("project_id = $1 AND user_id = $2 AND $3 IS NULL", project_id, user_id, None)
            }
            ListFilter::StartedBy { project_id, credential_id } => {
                ("project_id = $1 AND started_by = $2 AND $3 IS NULL", project_id, credential_id, None)
            }
        };
        let (cursor_at, cursor_id) = after.unwrap_or((i64::MAX, String::new()));
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE {scope} AND retention_expires_at > $4 \
             AND (created_at < $5 OR (created_at = $5 AND id < $6)) ORDER BY created_at DESC, id DESC LIMIT $7"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(a)
            .bind(b)
            .bind(c)
            .bind(now)
            .bind(cursor_at)
            .bind(if cursor_at == i64::MAX { "\u{10FFFF}".to_owned() } else { cursor_id })
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(execution_from_row).collect()
    }

    pub async fn list_attempts(&self, execution_id: &str) -> Result<Vec<AttemptRecord>> {
        let rows = sqlx::query(
            "SELECT attempt, worker_id, started_at, finished_at, success, error_message, output_ct, error_detail_ct \
             FROM attempts WHERE execution_id = $1 ORDER BY attempt",
        )
        .bind(execution_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| attempt_from_row(r, execution_id)).collect()
    }

    /// (execution id, attempt) of every open execution leased to `worker_id`.
    pub async fn leased_to(&self, worker_id: &str) -> Result<Vec<(String, u32)>> {
        let rows = sqlx::query(
            "SELECT id, lease_attempt FROM executions WHERE worker_id = $1 AND status IN ('working', 'input_required')",
        )
        .bind(worker_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let attempt: i64 = r.try_get("lease_attempt")?;
                Ok((r.try_get("id")?, u32::try_from(attempt).unwrap_or(0)))
            })
            .collect()
    }

    /// The event log of one execution: (seq, at, kind, status).
    pub async fn list_events(&self, execution_id: &str) -> Result<Vec<(i64, Millis, String, String)>> {
        let rows =
            sqlx::query("SELECT seq, at, kind, status FROM execution_events WHERE execution_id = $1 ORDER BY seq")
                .bind(execution_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("seq")?, r.try_get("at")?, r.try_get("kind")?, r.try_get("status")?)))
            .collect()
    }

    /// Leases up to `limit` due pending executions of `tools` in `project_id` to
    /// `worker_id`, all in one transaction (one commit for the batch).
    pub async fn claim(
        &self,
        project_id: &str,
        tools: &[String],
        worker_id: &str,
        limit: u32,
        now: Millis,
        lease_until: Millis,
    ) -> Result<Vec<Claimed>> {
        if tools.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (0..tools.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE status = 'pending' AND project_id = $1 \
             AND not_before <= $2 AND execution_deadline > $2 AND cancel_requested = 0 AND tool_name IN ({}) \
             ORDER BY not_before LIMIT $3{}",
            placeholders.join(", "),
            self.dialect.for_update_skip_locked()
        );
        let mut tx = self.pool.begin().await?;
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(project_id).bind(now).bind(i64::from(limit));
        for tool in tools {
            query = query.bind(tool);
        }
        let rows = query.fetch_all(&mut *tx).await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let record = execution_from_row(row)?;
            let event = Event::Claim { worker_id: worker_id.to_owned(), lease_until };
            let Ok(t) = domain::apply(&record.state, &event, now) else { continue };
            let attempt = t.next.attempts;
            let record = persist(&mut tx, &record, &event, &t, &EventData::default(), now).await?;
            claimed.push(Claimed { record, attempt });
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// Applies `event` to one execution: load under a row lock, run the state
    /// machine, write the next state, the event log row and the attempt record in
    /// one transaction. `Ok(None)` when the id is unknown; `Err(Ignored)` inside
    /// `Ok(Some(Err))` when the machine ignored the event.
    pub async fn apply(
        &self,
        id: &str,
        event: &Event,
        data: &EventData,
        now: Millis,
    ) -> Result<Option<Result<Applied, (domain::Ignored, ExecutionRecord)>>> {
        let mut tx = self.pool.begin().await?;
        let Some(record) = fetch(&mut tx, id, self.dialect.for_update()).await? else {
            return Ok(None);
        };
        let t = match domain::apply(&record.state, event, now) {
            Ok(t) => t,
            Err(ignored) => return Ok(Some(Err((ignored, record)))),
        };
        let record = persist(&mut tx, &record, event, &t, data, now).await?;
        tx.commit().await?;
        Ok(Some(Ok(Applied { record, effects: t.effects })))
    }
}

pub(super) async fn fetch(tx: &mut Transaction<'_, Any>, id: &str, lock: &str) -> Result<Option<ExecutionRecord>> {
    let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1{lock}");
    let row = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_optional(&mut **tx).await?;
    row.as_ref().map(execution_from_row).transpose()
}

async fn insert_event(
    tx: &mut Transaction<'_, Any>,
    id: &str,
    seq: i64,
    at: Millis,
    kind: &str,
    status: &str,
    detail: Option<&str>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO execution_events (execution_id, seq, at, kind, status, detail) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(seq)
    .bind(at)
    .bind(kind)
    .bind(status)
    .bind(detail)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn delete_execution(tx: &mut Transaction<'_, Any>, id: &str) -> Result<()> {
    for sql in [
        "DELETE FROM input_requests WHERE execution_id = $1",
        "DELETE FROM execution_events WHERE execution_id = $1",
        "DELETE FROM attempts WHERE execution_id = $1",
        "DELETE FROM executions WHERE id = $1",
    ] {
        sqlx::query(sql).bind(id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Writes a transition computed by the state machine: the row, the event log
/// entry and the attempt bookkeeping, guarded by the row version.
pub(super) async fn persist(
    tx: &mut Transaction<'_, Any>,
    before: &ExecutionRecord,
    event: &Event,
    t: &Transition,
    data: &EventData,
    now: Millis,
) -> Result<ExecutionRecord> {
    let next = &t.next;
    let cols = phase_columns(&next.phase);
    let terminal = next.status().is_terminal();
    let invoked = t.effects.iter().find_map(|e| match e {
        Effect::Invoke { worker_id, attempt } => Some((worker_id.clone(), *attempt)),
        _ => None,
    });
    let error_message = data.error_message.clone().or_else(|| match next.phase {
        Phase::Failed { reason } if reason != FailureReason::ToolError => Some(default_message(reason).to_owned()),
        _ => None,
    });
    let version = before.version + 1;
    let started_now = invoked.is_some();
    let updated = sqlx::query(
        "UPDATE executions SET status = $1, failure_reason = $2, not_before = $3, worker_id = $4, lease_attempt = $5, \
         lease_expires_at = $6, attempts = $7, cancel_requested = $8, owner_loss_detection_at = $9, \
         started_at = COALESCE(started_at, $10), finished_at = $11, updated_at = $12, \
         error_message = COALESCE($13, error_message), summary = COALESCE($14, summary), \
         output_ct = COALESCE($15, output_ct), error_detail_ct = COALESCE($16, error_detail_ct), \
         payload_bytes = payload_bytes + $17, version = $18, execution_deadline = $21, \
         remote_task_id = CASE WHEN $22 = 1 THEN COALESCE($23, remote_task_id) ELSE NULL END \
         WHERE id = $19 AND version = $20",
    )
    .bind(cols.status)
    .bind(cols.failure_reason)
    .bind(cols.not_before)
    .bind(cols.worker_id)
    .bind(cols.lease_attempt)
    .bind(cols.lease_expires_at)
    .bind(i64::from(next.attempts))
    .bind(i64::from(next.cancel_requested))
    .bind(next.owner_loss_detection_at)
    .bind(invoked.as_ref().map(|_| now))
    .bind(terminal.then_some(now))
    .bind(now)
    .bind(&error_message)
    .bind(&data.summary)
    .bind(&data.output_ct)
    .bind(&data.error_detail_ct)
    .bind(data.payload_bytes)
    .bind(version)
    .bind(&before.id)
    .bind(before.version)
    .bind(next.deadline)
    .bind(i64::from(next.remote_task))
    .bind(&data.remote_task_id)
    .execute(&mut **tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Err(Error::Corrupt(format!("concurrent write to execution {}", before.id)));
    }
    // Heartbeats only move the lease; they are not part of the history.
    if !matches!(event, Event::Heartbeat { .. }) {
        insert_event(tx, &before.id, version, now, event.name(), cols.status, None).await?;
    }
    for (key, remote_key, spec_ct) in &data.new_input_requests {
        sqlx::query(
            "INSERT INTO input_requests (execution_id, request_key, remote_key, attempt, spec_ct, state, created_at) \
             VALUES ($1, $2, $3, $4, $5, 'open', $6)",
        )
        .bind(&before.id)
        .bind(key)
        .bind(remote_key)
        .bind(i64::from(next.attempts))
        .bind(spec_ct)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    if let Event::Undelivered { attempt, .. } = event {
        // The tool never ran: this was not an attempt.
        sqlx::query("DELETE FROM attempts WHERE execution_id = $1 AND attempt = $2")
            .bind(&before.id)
            .bind(i64::from(*attempt))
            .execute(&mut **tx)
            .await?;
    }
    if let Some((worker_id, attempt)) = invoked {
        sqlx::query("INSERT INTO attempts (execution_id, attempt, worker_id, started_at) VALUES ($1, $2, $3, $4)")
            .bind(&before.id)
            .bind(i64::from(attempt))
            .bind(worker_id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
    }
    let finished_attempt = match (event, before.state.phase.lease()) {
        (Event::Undelivered { .. }, _) => None,
        (Event::Settle { attempt, outcome }, _) => Some((*attempt, matches!(outcome, Outcome::Success))),
        (_, Some(lease)) if next.phase.lease().is_none() => Some((lease.attempt, false)),
        _ => None,
    };
    if let Some((attempt, success)) = finished_attempt {
        sqlx::query(
            "UPDATE attempts SET finished_at = $1, success = $2, error_message = $3, output_ct = $4, \
             error_detail_ct = $5 WHERE execution_id = $6 AND attempt = $7 AND finished_at IS NULL",
        )
        .bind(now)
        .bind(i64::from(success))
        .bind(&error_message)
        .bind(&data.output_ct)
        .bind(&data.error_detail_ct)
        .bind(&before.id)
        .bind(i64::from(attempt))
        .execute(&mut **tx)
        .await?;
    }
    // The row as just written, without reading it back.
    let mut after = before.clone();
    after.state = next.clone();
    after.execution_deadline = next.deadline;
    if started_now && after.started_at.is_none() {
        after.started_at = Some(now);
    }
    after.finished_at = terminal.then_some(now);
    after.updated_at = now;
    after.error_message = error_message.or(after.error_message);
    after.summary = data.summary.clone().or(after.summary);
    after.output_ct = data.output_ct.clone().or(after.output_ct);
    after.error_detail_ct = data.error_detail_ct.clone().or(after.error_detail_ct);
    after.payload_bytes += data.payload_bytes;
    after.remote_task_id = if next.remote_task { data.remote_task_id.clone().or(after.remote_task_id) } else { None };
    after.version = version;
    Ok(after)
}
