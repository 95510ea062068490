//! Row types and their mapping to and from the domain state.

use super::{Error, Result};
use crate::domain::{ExecutionId, FailureReason, Lease, Millis, Phase, State, Status};
use sqlx::Row;
use sqlx::any::AnyRow;

/// Everything needed to create an execution; payloads already sealed.
#[derive(Clone, Debug)]
pub struct NewExecution {
    pub id: ExecutionId,
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: String,
    pub tool_name: String,
    pub toolkit_name: String,
    pub toolkit_version: String,
    pub user_id: String,
    pub started_by: String,
    pub surface: String,
    pub created_at: Millis,
    /// Some when the caller asked for a later start.
    pub run_at: Option<Millis>,
    pub execution_deadline: Millis,
    pub retention_expires_at: Millis,
    pub poll_interval_ms: i64,
    pub max_attempts: u32,
    pub idempotency_key: Option<String>,
    pub request_fingerprint: Option<String>,
    pub input_ct: Vec<u8>,
    pub payload_bytes: i64,
    pub traceparent: Option<String>,
    /// The admission generation it was admitted under (store/fence.rs); None
    /// when admission cannot lose its state.
    pub admission_fence: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionRecord {
    pub id: ExecutionId,
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) gateway_id: String,
    pub(crate) tool_name: String,
    pub(crate) toolkit_name: String,
    pub(crate) toolkit_version: String,
    pub(crate) user_id: String,
    pub(crate) started_by: String,
    pub(crate) surface: String,
    pub(crate) execution_type: String,
    pub state: State,
    pub(crate) error_message: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) created_at: Millis,
    pub(crate) scheduled_at: Option<Millis>,
    pub(crate) started_at: Option<Millis>,
    pub(crate) finished_at: Option<Millis>,
    pub(crate) updated_at: Millis,
    pub(crate) execution_deadline: Millis,
    pub(crate) retention_expires_at: Millis,
    pub(crate) poll_interval_ms: i64,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) request_fingerprint: Option<String>,
    pub(crate) input_ct: Option<Vec<u8>>,
    pub output_ct: Option<Vec<u8>>,
    pub(crate) error_detail_ct: Option<Vec<u8>>,
    pub(crate) payload_bytes: i64,
    pub(crate) traceparent: Option<String>,
    pub(crate) remote_task_id: Option<String>,
    pub(crate) version: i64,
    /// The version of the latest change a caller can see (a heartbeat is
    /// none): what a wait's cursor names.
    pub(crate) changed_version: i64,
    /// The latest progress the running tool reported (`Store::record_progress`).
    pub(crate) progress: Option<ProgressRecord>,
}

/// A tool's latest account of how far it is, kept on the execution row and
/// overwritten per report, never in the event log.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressRecord {
    /// Finite and non-negative (`Store::record_progress` keeps it so).
    pub(crate) current: f64,
    /// 0 = unknown.
    pub(crate) total: f64,
    pub(crate) message: String,
    pub(crate) at: Millis,
}

// Only finite numbers are stored, so equality is an equivalence.
impl Eq for ProgressRecord {}

impl ExecutionRecord {
    pub fn status(&self) -> Status {
        self.state.status()
    }

    pub fn failure_reason(&self) -> Option<FailureReason> {
        match self.state.phase {
            Phase::Failed { reason } => Some(reason),
            _ => None,
        }
    }
}

pub(super) const EXECUTION_COLUMNS: &str = "id, org_id, project_id, gateway_id, tool_name, toolkit_name, toolkit_version, \
    user_id, started_by, surface, execution_type, status, failure_reason, error_message, summary, not_before, \
    worker_id, lease_attempt, lease_expires_at, attempts, max_attempts, cancel_requested, owner_loss_detection_at, \
    created_at, scheduled_at, started_at, finished_at, updated_at, execution_deadline, retention_expires_at, \
    poll_interval_ms, idempotency_key, request_fingerprint, input_ct, output_ct, error_detail_ct, payload_bytes, traceparent, remote_task_id, version, \
    changed_version, progress_current, progress_total, progress_message, progress_at";

/// An id read back from the store; one of another shape is corruption.
pub(super) fn parse_id(id: String) -> Result<ExecutionId> {
    ExecutionId::parse(&id).ok_or_else(|| corrupt("id", &id))
}

fn corrupt(what: &str, id: &str) -> Error {
    Error::Corrupt(format!("{what} of execution {id}"))
}

fn to_u32(v: i64, what: &str, id: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| corrupt(what, id))
}

/// The columns that encode `Phase` (status, reason, pending and lease data).
pub(super) struct PhaseColumns {
    pub(crate) status: &'static str,
    pub(crate) failure_reason: Option<&'static str>,
    pub(crate) not_before: Option<Millis>,
    pub(crate) worker_id: Option<String>,
    pub(crate) lease_attempt: Option<i64>,
    pub(crate) lease_expires_at: Option<Millis>,
}

pub(super) fn phase_columns(phase: &Phase) -> PhaseColumns {
    let mut cols = PhaseColumns {
        status: phase.status().as_str(),
        failure_reason: None,
        not_before: None,
        worker_id: None,
        lease_attempt: None,
        lease_expires_at: None,
    };
    match phase {
        Phase::Pending { not_before } => cols.not_before = Some(*not_before),
        Phase::Working { lease } | Phase::InputRequired { lease } => {
            cols.worker_id = Some(lease.worker_id.clone());
            cols.lease_attempt = Some(i64::from(lease.attempt));
            cols.lease_expires_at = Some(lease.expires_at);
        }
        Phase::Failed { reason } => cols.failure_reason = Some(reason.as_str()),
        Phase::Completed | Phase::Cancelled => {}
    }
    cols
}

pub(super) fn execution_from_row(row: &AnyRow) -> Result<ExecutionRecord> {
    let id: String = row.try_get("id")?;
    let status: String = row.try_get("status")?;
    let status = Status::parse(&status).ok_or_else(|| corrupt("status", &id))?;
    let lease = || -> Result<Lease> {
        let worker_id: Option<String> = row.try_get("worker_id")?;
        let attempt: Option<i64> = row.try_get("lease_attempt")?;
        let expires_at: Option<i64> = row.try_get("lease_expires_at")?;
        match (worker_id, attempt, expires_at) {
            (Some(worker_id), Some(attempt), Some(expires_at)) => {
                Ok(Lease { worker_id, attempt: to_u32(attempt, "lease attempt", &id)?, expires_at })
            }
            _ => Err(corrupt("lease", &id)),
        }
    };
    let phase = match status {
        Status::Pending => {
            let not_before: Option<i64> = row.try_get("not_before")?;
            Phase::Pending { not_before: not_before.unwrap_or(0) }
        }
        Status::Working => Phase::Working { lease: lease()? },
        Status::InputRequired => Phase::InputRequired { lease: lease()? },
        Status::Completed => Phase::Completed,
        Status::Cancelled => Phase::Cancelled,
        Status::Failed => {
            let reason: Option<String> = row.try_get("failure_reason")?;
            let reason =
                reason.as_deref().and_then(FailureReason::parse).ok_or_else(|| corrupt("failure reason", &id))?;
            Phase::Failed { reason }
        }
    };
    let cancel_requested: i64 = row.try_get("cancel_requested")?;
    let remote_task_id: Option<String> = row.try_get("remote_task_id")?;
    let state = State {
        phase,
        attempts: to_u32(row.try_get("attempts")?, "attempts", &id)?,
        max_attempts: to_u32(row.try_get("max_attempts")?, "max attempts", &id)?,
        deadline: row.try_get("execution_deadline")?,
        cancel_requested: cancel_requested != 0,
        owner_loss_detection_at: row.try_get("owner_loss_detection_at")?,
        remote_task: remote_task_id.is_some(),
    };
    Ok(ExecutionRecord {
        org_id: row.try_get("org_id")?,
        project_id: row.try_get("project_id")?,
        gateway_id: row.try_get("gateway_id")?,
        tool_name: row.try_get("tool_name")?,
        toolkit_name: row.try_get("toolkit_name")?,
        toolkit_version: row.try_get("toolkit_version")?,
        user_id: row.try_get("user_id")?,
        started_by: row.try_get("started_by")?,
        surface: row.try_get("surface")?,
        execution_type: row.try_get("execution_type")?,
        state,
        error_message: row.try_get("error_message")?,
        summary: row.try_get("summary")?,
        created_at: row.try_get("created_at")?,
        scheduled_at: row.try_get("scheduled_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        updated_at: row.try_get("updated_at")?,
        execution_deadline: row.try_get("execution_deadline")?,
        retention_expires_at: row.try_get("retention_expires_at")?,
        poll_interval_ms: row.try_get("poll_interval_ms")?,
        idempotency_key: row.try_get("idempotency_key")?,
        request_fingerprint: row.try_get("request_fingerprint")?,
        input_ct: row.try_get("input_ct")?,
        output_ct: row.try_get("output_ct")?,
        error_detail_ct: row.try_get("error_detail_ct")?,
        payload_bytes: row.try_get("payload_bytes")?,
        traceparent: row.try_get("traceparent")?,
        remote_task_id: row.try_get("remote_task_id")?,
        version: row.try_get("version")?,
        changed_version: row.try_get("changed_version")?,
        progress: progress_from_row(row),
        id: parse_id(id)?,
    })
}

/// The progress columns, when the statement read them and a report exists:
/// a display-only value, so a statement without them reads as "none".
fn progress_from_row(row: &AnyRow) -> Option<ProgressRecord> {
    let at: i64 = row.try_get::<Option<i64>, _>("progress_at").ok().flatten()?;
    Some(ProgressRecord {
        current: row.try_get::<Option<f64>, _>("progress_current").ok().flatten().unwrap_or(0.0),
        total: row.try_get::<Option<f64>, _>("progress_total").ok().flatten().unwrap_or(0.0),
        message: row.try_get::<Option<String>, _>("progress_message").ok().flatten().unwrap_or_default(),
        at,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRecord {
    pub(crate) attempt: u32,
    pub(crate) worker_id: String,
    pub(crate) started_at: Millis,
    pub(crate) finished_at: Option<Millis>,
    pub(crate) success: Option<bool>,
    pub(crate) error_message: Option<String>,
    pub(crate) output_ct: Option<Vec<u8>>,
    pub(crate) error_detail_ct: Option<Vec<u8>>,
}

pub(super) fn attempt_from_row(row: &AnyRow, execution_id: &ExecutionId) -> Result<AttemptRecord> {
    let success: Option<i64> = row.try_get("success")?;
    Ok(AttemptRecord {
        attempt: to_u32(row.try_get("attempt")?, "attempt number", execution_id.as_str())?,
        worker_id: row.try_get("worker_id")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        success: success.map(|s| s != 0),
        error_message: row.try_get("error_message")?,
        output_ct: row.try_get("output_ct")?,
        error_detail_ct: row.try_get("error_detail_ct")?,
    })
}
