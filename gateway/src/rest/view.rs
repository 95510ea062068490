//! JSON projections of the execution record for REST callers.

use crate::json::rfc3339;
use baton_proto::coordinator::v1::{ExecutionView, InputRequestState};
use serde_json::{Value, json};

fn opt_time(ms: Option<i64>) -> Value {
    ms.map(rfc3339).unwrap_or(Value::Null)
}

fn non_empty(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { Value::String(s.to_owned()) }
}

/// What the owner sees: status, timing, deadlines, open input requests. Never payloads.
pub(crate) fn owner(e: &ExecutionView) -> Value {
    let requests: Vec<Value> = e
        .input_requests
        .iter()
        .filter(|r| r.state() == InputRequestState::Open)
        .map(|r| {
            json!({
                "request_key": r.request_key,
                "message": r.message,
                "requested_schema": serde_json::from_str::<Value>(&r.requested_schema_json).unwrap_or(Value::Null),
            })
        })
        .collect();
    json!({
        "execution_id": e.execution_id,
        "status": e.status().name(),
        "tool_name": e.tool_name,
        "toolkit_name": e.toolkit_name,
        "toolkit_version": e.toolkit_version,
        "gateway_id": e.gateway_id,
        "user_id": e.user_id,
        "surface": e.surface().name(),
        "execution_type": e.execution_type().name(),
        "created_at": rfc3339(e.created_at_ms),
        "updated_at": rfc3339(e.updated_at_ms),
        "scheduled_at": opt_time(e.scheduled_at_ms),
        "started_at": opt_time(e.started_at_ms),
        "finished_at": opt_time(e.finished_at_ms),
        "execution_deadline": rfc3339(e.execution_deadline_ms),
        "retention_expires_at": rfc3339(e.retention_expires_at_ms),
        "poll_interval_ms": e.poll_interval_ms,
        "owner_loss_detection_at": opt_time(e.owner_loss_detection_at_ms),
        "failure_reason": non_empty(e.failure_reason_name()),
        "error_message": non_empty(&e.error_message),
        "cancel_state": e.cancel_state().name(),
        "input_requests": requests,
        "progress": crate::execution::progress(e.progress.as_ref()),
    })
}

/// How a read by id ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// At once (no wait), or because what the wait waited for happened.
    Answered,
    /// `wait_ms` passed without it.
    TimedOut,
    /// The gateway is shutting down: reconnect at once.
    Shutdown,
}

/// The owner view answered by `GET …/{id}`: with `timed_out` and `shutdown`,
/// which say why a long poll ended, and `next_cursor`, the `since_cursor` of
/// a wait that must not miss a change after this view.
pub(crate) fn read(e: &ExecutionView, ending: Ending) -> Value {
    let mut view = owner(e);
    view["timed_out"] = (ending == Ending::TimedOut).into();
    view["shutdown"] = (ending == Ending::Shutdown).into();
    view["next_cursor"] = e.cursor.to_string().into();
    view
}
