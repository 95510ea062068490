//! Writing transitions. Every transition — one or a batch — is written with a
//! fixed number of statements (one row update, one event insert, one attempt
//! insert, one attempt update), whatever the batch size: a batch of claims or
//! settlements costs a handful of round trips and one commit, not several per
//! execution. Rows are guarded by their version. The statements' text varies
//! with the batch size, so they are not kept as prepared statements (that would
//! churn every connection's statement cache).

use super::executions::EventData;
use super::records::{ExecutionRecord, phase_columns};
use super::{Error, Result};
use crate::domain::{Effect, Event, FailureReason, Millis, Outcome, Phase, Transition};
use sqlx::any::{Any, AnyArguments};
use sqlx::{Arguments, AssertSqlSafe, Transaction};

/// One transition to write.
pub struct Pending<'a> {
    pub before: &'a ExecutionRecord,
    pub event: &'a Event,
    pub transition: &'a Transition,
    pub data: &'a EventData,
}

pub fn default_message(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::ToolError => "the tool reported an error",
        FailureReason::DeadlineExceeded => "the execution deadline passed before the tool finished",
        FailureReason::OwnerLost => "the worker running this execution stopped responding",
        FailureReason::UnsupportedInteraction => "the tool requested an interaction Baton does not support",
        FailureReason::InvocationRefused => "the tool's execution policy refused this invocation",
    }
}

/// `($1, $2, …), ($k, …)` for `rows` rows of `width` placeholders.
fn placeholders(rows: usize, width: usize) -> String {
    (0..rows)
        .map(|r| {
            let cells: Vec<String> = (1..=width).map(|c| format!("${}", r * width + c)).collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn add<'t, T>(args: &mut AnyArguments, v: T) -> Result<()>
where
    T: sqlx::Encode<'t, Any> + sqlx::Type<Any>,
{
    args.add(v).map_err(|e| Error::Database(sqlx::Error::Encode(e)))
}

const ROW_COLUMNS: &str = "id, old_version, status, failure_reason, not_before, worker_id, lease_attempt, \
    lease_expires_at, attempts, cancel_requested, owner_loss_detection_at, started_at, finished_at, updated_at, \
    error_message, summary, output_ct, error_detail_ct, payload_add, version, deadline, remote_task, remote_task_id";
const ROW_WIDTH: usize = 23;

/// Writes the transitions (distinct executions) and returns the rows as written.
pub async fn persist_many(
    tx: &mut Transaction<'_, Any>,
    items: &[Pending<'_>],
    now: Millis,
) -> Result<Vec<ExecutionRecord>> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows = AnyArguments::default();
    let mut events = AnyArguments::default();
    let mut event_rows = 0;
    let mut started = AnyArguments::default();
    let mut started_rows = 0;
    let mut finished = AnyArguments::default();
    let mut finished_rows = 0;
    let mut written = Vec::with_capacity(items.len());
    for p in items {
        let (before, next) = (p.before, &p.transition.next);
        let cols = phase_columns(&next.phase);
        let terminal = next.status().is_terminal();
        let invoked = p.transition.effects.iter().find_map(|e| match e {
            Effect::Invoke { worker_id, attempt } => Some((worker_id.clone(), *attempt)),
            _ => None,
        });
        let error_message = p.data.error_message.clone().or_else(|| match next.phase {
            Phase::Failed { reason } if reason != FailureReason::ToolError => Some(default_message(reason).to_owned()),
            _ => None,
        });
        let version = before.version + 1;
        add(&mut rows, before.id.clone())?;
        add(&mut rows, before.version)?;
        add(&mut rows, cols.status)?;
        add(&mut rows, cols.failure_reason)?;
        add(&mut rows, cols.not_before)?;
        add(&mut rows, cols.worker_id.clone())?;
        add(&mut rows, cols.lease_attempt)?;
        add(&mut rows, cols.lease_expires_at)?;
        add(&mut rows, i64::from(next.attempts))?;
        add(&mut rows, i64::from(next.cancel_requested))?;
        add(&mut rows, next.owner_loss_detection_at)?;
        add(&mut rows, invoked.as_ref().map(|_| now))?;
        add(&mut rows, terminal.then_some(now))?;
        add(&mut rows, now)?;
        add(&mut rows, error_message.clone())?;
        add(&mut rows, p.data.summary.clone())?;
        add(&mut rows, p.data.output_ct.clone())?;
        add(&mut rows, p.data.error_detail_ct.clone())?;
        add(&mut rows, p.data.payload_bytes)?;
        add(&mut rows, version)?;
        add(&mut rows, next.deadline)?;
        add(&mut rows, i64::from(next.remote_task))?;
        add(&mut rows, p.data.remote_task_id.clone())?;
        // Heartbeats only move the lease; they are not part of the history.
        if !matches!(p.event, Event::Heartbeat { .. }) {
            add(&mut events, before.id.clone())?;
            add(&mut events, version)?;
            add(&mut events, now)?;
            add(&mut events, p.event.name())?;
            add(&mut events, cols.status)?;
            event_rows += 1;
        }
        if let Some((worker_id, attempt)) = &invoked {
            add(&mut started, before.id.clone())?;
            add(&mut started, i64::from(*attempt))?;
            add(&mut started, worker_id.clone())?;
            add(&mut started, now)?;
            started_rows += 1;
        }
        let finished_attempt = match (p.event, before.state.phase.lease()) {
            (Event::Undelivered { .. }, _) => None,
            (Event::Settle { attempt, outcome, .. }, _) => Some((*attempt, matches!(outcome, Outcome::Success))),
            (_, Some(lease)) if next.phase.lease().is_none() => Some((lease.attempt, false)),
            _ => None,
        };
        if let Some((attempt, success)) = finished_attempt {
            add(&mut finished, before.id.clone())?;
            add(&mut finished, i64::from(attempt))?;
            add(&mut finished, i64::from(success))?;
            add(&mut finished, error_message.clone())?;
            add(&mut finished, p.data.output_ct.clone())?;
            add(&mut finished, p.data.error_detail_ct.clone())?;
            finished_rows += 1;
        }
        written.push(after(before, p, error_message, invoked.is_some(), terminal, version, now));
    }

    let sql = format!(
        "WITH v({ROW_COLUMNS}) AS (VALUES {}) \
         UPDATE executions SET status = v.status, failure_reason = v.failure_reason, not_before = v.not_before, \
         worker_id = v.worker_id, lease_attempt = v.lease_attempt, lease_expires_at = v.lease_expires_at, \
         attempts = v.attempts, cancel_requested = v.cancel_requested, \
         owner_loss_detection_at = v.owner_loss_detection_at, \
         started_at = COALESCE(executions.started_at, v.started_at), finished_at = v.finished_at, \
         updated_at = v.updated_at, error_message = COALESCE(v.error_message, executions.error_message), \
         summary = COALESCE(v.summary, executions.summary), output_ct = COALESCE(v.output_ct, executions.output_ct), \
         error_detail_ct = COALESCE(v.error_detail_ct, executions.error_detail_ct), \
         payload_bytes = executions.payload_bytes + v.payload_add, version = v.version, \
         execution_deadline = v.deadline, \
         remote_task_id = CASE WHEN v.remote_task = 1 THEN COALESCE(v.remote_task_id, executions.remote_task_id) \
         ELSE NULL END \
         FROM v WHERE executions.id = v.id AND executions.version = v.old_version",
        placeholders(items.len(), ROW_WIDTH)
    );
    let updated = sqlx::query_with(AssertSqlSafe(sql), rows).persistent(false).execute(&mut **tx).await?;
    if updated.rows_affected() != items.len() as u64 {
        return Err(Error::Corrupt("concurrent write to an execution in a batch".into()));
    }
    if event_rows > 0 {
        let sql = format!(
            "INSERT INTO execution_events (execution_id, seq, at, kind, status) VALUES {}",
            placeholders(event_rows, 5)
        );
        sqlx::query_with(AssertSqlSafe(sql), events).persistent(false).execute(&mut **tx).await?;
    }
    if started_rows > 0 {
        let sql = format!(
            "INSERT INTO attempts (execution_id, attempt, worker_id, started_at) VALUES {}",
            placeholders(started_rows, 4)
        );
        sqlx::query_with(AssertSqlSafe(sql), started).persistent(false).execute(&mut **tx).await?;
    }
    if finished_rows > 0 {
        let mut sql = format!(
            "WITH v(execution_id, attempt, success, error_message, output_ct, error_detail_ct) AS (VALUES {}) \
             UPDATE attempts SET finished_at = $FINISHED, success = v.success, error_message = v.error_message, \
             output_ct = v.output_ct, error_detail_ct = v.error_detail_ct FROM v \
             WHERE attempts.execution_id = v.execution_id AND attempts.attempt = v.attempt \
             AND attempts.finished_at IS NULL",
            placeholders(finished_rows, 6)
        );
        sql = sql.replace("$FINISHED", &format!("${}", finished_rows * 6 + 1));
        add(&mut finished, now)?;
        sqlx::query_with(AssertSqlSafe(sql), finished).persistent(false).execute(&mut **tx).await?;
    }
    for p in items {
        extras(tx, p, now).await?;
    }
    Ok(written)
}

/// The rare per-transition writes: published input requests, undelivered attempts.
async fn extras(tx: &mut Transaction<'_, Any>, p: &Pending<'_>, now: Millis) -> Result<()> {
    for (key, remote_key, spec_ct) in &p.data.new_input_requests {
        sqlx::query(
            "INSERT INTO input_requests (execution_id, request_key, remote_key, attempt, spec_ct, state, created_at) \
             VALUES ($1, $2, $3, $4, $5, 'open', $6)",
        )
        .bind(&p.before.id)
        .bind(key)
        .bind(remote_key)
        .bind(i64::from(p.transition.next.attempts))
        .bind(spec_ct)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    if let Event::Undelivered { attempt, .. } = p.event {
        // The tool never ran: this was not an attempt.
        sqlx::query("DELETE FROM attempts WHERE execution_id = $1 AND attempt = $2")
            .bind(&p.before.id)
            .bind(i64::from(*attempt))
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// The row as written, computed instead of read back.
fn after(
    before: &ExecutionRecord,
    p: &Pending<'_>,
    error_message: Option<String>,
    started_now: bool,
    terminal: bool,
    version: i64,
    now: Millis,
) -> ExecutionRecord {
    let next = &p.transition.next;
    let mut after = before.clone();
    after.state = next.clone();
    after.execution_deadline = next.deadline;
    if started_now && after.started_at.is_none() {
        after.started_at = Some(now);
    }
    after.finished_at = terminal.then_some(now);
    after.updated_at = now;
    after.error_message = error_message.or(after.error_message);
    after.summary = p.data.summary.clone().or(after.summary);
    after.output_ct = p.data.output_ct.clone().or(after.output_ct);
    after.error_detail_ct = p.data.error_detail_ct.clone().or(after.error_detail_ct);
    after.payload_bytes += p.data.payload_bytes;
    after.remote_task_id = if next.remote_task { p.data.remote_task_id.clone().or(after.remote_task_id) } else { None };
    after.version = version;
    after
}
