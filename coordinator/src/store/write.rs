//! Writing transitions. Every transition — one or a batch — is written with a
//! fixed number of statements (one row update, one event insert, one attempt
//! insert, one attempt update), whatever the batch size: a batch of claims or
//! settlements costs a handful of round trips and one commit, not several per
//! execution. Rows are guarded by their version. The statements' text varies
//! with the batch size, so they are not kept as prepared statements (that would
//! churn every connection's statement cache).

use super::records::{ExecutionRecord, phase_columns};
use super::{Error, Result};
use crate::domain::{Effect, Event, FailureReason, Millis, Phase, Transition};
use sqlx::any::{Any, AnyArguments};
use sqlx::{Arguments, AssertSqlSafe, Transaction};

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
    /// With `InputRequested`: the requests to publish.
    pub new_input_requests: Vec<PublishedRequest>,
}

/// An input request a remote server made, published under a key Baton minted.
#[derive(Clone, Debug)]
pub struct PublishedRequest {
    pub request_key: String,
    /// The remote server's own identifier for it.
    pub remote_key: String,
    /// The sealed `{"message", "requested_schema"}`.
    pub spec_ct: Vec<u8>,
}

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
    error_message, summary, output_ct, error_detail_ct, payload_bytes, version, deadline, remote_task_id";
const ROW_WIDTH: usize = 22;

/// The error this transition reports: the tool's own message, or a system
/// message for failures the tool did not report itself.
fn reported_error(p: &Pending<'_>) -> Option<String> {
    p.data.error_message.clone().or_else(|| match p.transition.next.phase {
        Phase::Failed { reason } if reason != FailureReason::ToolError => Some(default_message(reason).to_owned()),
        _ => None,
    })
}

/// The execution row after `p`: the one place that decides every column, used
/// both for the statement's values and for the record handed back.
pub fn next_row(p: &Pending<'_>, now: Millis) -> ExecutionRecord {
    let (before, next) = (p.before, &p.transition.next);
    let started_now = p.transition.effects.iter().any(|e| matches!(e, Effect::Invoke { .. }));
    let mut after = before.clone();
    after.state = next.clone();
    after.execution_deadline = next.deadline;
    if started_now && after.started_at.is_none() {
        after.started_at = Some(now);
    }
    after.finished_at = next.status().is_terminal().then_some(now);
    after.updated_at = now;
    after.error_message = reported_error(p).or(after.error_message);
    after.summary = p.data.summary.clone().or(after.summary);
    after.output_ct = p.data.output_ct.clone().or(after.output_ct);
    after.error_detail_ct = p.data.error_detail_ct.clone().or(after.error_detail_ct);
    after.payload_bytes += p.data.payload_bytes;
    after.remote_task_id = if next.remote_task { p.data.remote_task_id.clone().or(after.remote_task_id) } else { None };
    after.version = before.version + 1;
    after
}

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
    // The outbox: signals are written with the transitions that cause them.
    let mut signals = Vec::new();
    for p in items {
        let after = next_row(p, now);
        signals.extend(crate::webhooks::signal::of_transition(p.before, &after));
        let cols = phase_columns(&after.state.phase);
        add(&mut rows, after.id.clone())?;
        add(&mut rows, p.before.version)?;
        add(&mut rows, cols.status)?;
        add(&mut rows, cols.failure_reason)?;
        add(&mut rows, cols.not_before)?;
        add(&mut rows, cols.worker_id.clone())?;
        add(&mut rows, cols.lease_attempt)?;
        add(&mut rows, cols.lease_expires_at)?;
        add(&mut rows, i64::from(after.state.attempts))?;
        add(&mut rows, i64::from(after.state.cancel_requested))?;
        add(&mut rows, after.state.owner_loss_detection_at)?;
        add(&mut rows, after.started_at)?;
        add(&mut rows, after.finished_at)?;
        add(&mut rows, after.updated_at)?;
        add(&mut rows, after.error_message.clone())?;
        add(&mut rows, after.summary.clone())?;
        add(&mut rows, after.output_ct.clone())?;
        add(&mut rows, after.error_detail_ct.clone())?;
        add(&mut rows, after.payload_bytes)?;
        add(&mut rows, after.version)?;
        add(&mut rows, after.execution_deadline)?;
        add(&mut rows, after.remote_task_id.clone())?;
        // Heartbeats only move the lease; they are not part of the history.
        if !matches!(p.event, Event::Heartbeat { .. }) {
            add(&mut events, after.id.clone())?;
            add(&mut events, after.version)?;
            add(&mut events, now)?;
            add(&mut events, p.event.name())?;
            add(&mut events, cols.status)?;
            event_rows += 1;
        }
        for effect in &p.transition.effects {
            match effect {
                Effect::Invoke { worker_id, attempt } => {
                    add(&mut started, after.id.clone())?;
                    add(&mut started, i64::from(*attempt))?;
                    add(&mut started, worker_id.clone())?;
                    add(&mut started, now)?;
                    started_rows += 1;
                }
                Effect::AttemptFinished { attempt, success } => {
                    add(&mut finished, after.id.clone())?;
                    add(&mut finished, i64::from(*attempt))?;
                    add(&mut finished, i64::from(*success))?;
                    // What this attempt reported, not what an earlier one did.
                    add(&mut finished, reported_error(p))?;
                    add(&mut finished, p.data.output_ct.clone())?;
                    add(&mut finished, p.data.error_detail_ct.clone())?;
                    finished_rows += 1;
                }
                _ => {}
            }
        }
        written.push(after);
    }

    let sql = format!(
        "WITH v({ROW_COLUMNS}) AS (VALUES {}) \
         UPDATE executions SET status = v.status, failure_reason = v.failure_reason, not_before = v.not_before, \
         worker_id = v.worker_id, lease_attempt = v.lease_attempt, lease_expires_at = v.lease_expires_at, \
         attempts = v.attempts, cancel_requested = v.cancel_requested, \
         owner_loss_detection_at = v.owner_loss_detection_at, started_at = v.started_at, \
         finished_at = v.finished_at, updated_at = v.updated_at, error_message = v.error_message, \
         summary = v.summary, output_ct = v.output_ct, error_detail_ct = v.error_detail_ct, \
         payload_bytes = v.payload_bytes, version = v.version, execution_deadline = v.deadline, \
         remote_task_id = v.remote_task_id \
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
    super::webhooks::enqueue(tx, &signals, now).await?;
    for p in items {
        extras(tx, p, now).await?;
    }
    Ok(written)
}

/// The rare per-transition writes: published input requests, undelivered attempts.
async fn extras(tx: &mut Transaction<'_, Any>, p: &Pending<'_>, now: Millis) -> Result<()> {
    for PublishedRequest { request_key: key, remote_key, spec_ct } in &p.data.new_input_requests {
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
    for effect in &p.transition.effects {
        if let Effect::AttemptVoided { attempt } = effect {
            sqlx::query("DELETE FROM attempts WHERE execution_id = $1 AND attempt = $2")
                .bind(&p.before.id)
                .bind(i64::from(*attempt))
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}
