//! How an execution looks as an MCP task in each dialect: the 2025-11-25 `Task`
//! (ttl/pollInterval, `isError:true` → failed, a requested cancel → cancelled)
//! and the 2026-07-28 `DetailedTask` (ttlMs/pollIntervalMs, result, error or
//! inputRequests inline, `isError:true` → completed). Also the outcome a
//! finished execution gives its original `tools/call`. Pure shaping, no I/O
//! besides `snapshot`.
//!
//! The MCP tools spec keeps two kinds of failure apart, and so does this
//! module: the tool's own failure (`tool_error`) is a tool result with
//! `isError: true`, which the model reads and can correct itself by; a
//! failure of the system around the tool (deadline, lost owner, revoked
//! policy) or the caller's own cancel is a JSON-RPC error (README, "When a
//! tool fails").

use super::context::Caller;
use super::error::{INTERNAL_ERROR, RpcError};
use crate::json::rfc3339;
use baton_proto::coordinator::v1::{CancelState, ExecutionStatus, ExecutionView, FailureReason, InputRequestState};
use baton_proto::error::WireError;
use serde_json::{Map, Value, json};

/// An execution plus its tool result once it completed, or the detail the
/// tool attached to its own failure.
pub(super) struct Snapshot {
    pub(crate) view: ExecutionView,
    pub(crate) result: Option<Value>,
    pub(crate) error_detail: Option<Value>,
}

impl Snapshot {
    /// A view alone, for an execution not finished (or not read further).
    pub(super) fn bare(view: ExecutionView) -> Snapshot {
        Snapshot { view, result: None, error_detail: None }
    }

    fn is_error_result(&self) -> bool {
        self.result.as_ref().and_then(|r| r.get("isError")).and_then(Value::as_bool).unwrap_or(false)
    }
}

/// Reads the execution and, when it completed, its result.
pub(super) async fn snapshot(caller: &Caller, id: &str) -> Result<Snapshot, WireError> {
    let view = caller.coordinator().execution(&caller.bearer, &caller.scope, id).await?;
    complete(caller, view).await
}

/// As [`snapshot`], for a caller about to wait on the execution: read
/// through the wait hub (see `Coordinator::read_before_wait`).
pub(super) async fn snapshot_before_wait(caller: &Caller, id: &str) -> Result<Snapshot, WireError> {
    let view = caller.coordinator().read_before_wait(&caller.bearer, &caller.scope, id).await?;
    complete(caller, view).await
}

/// Adds the result (or the tool's error detail) to a view already read, when
/// it completed (or the tool failed).
pub(super) async fn complete(caller: &Caller, view: ExecutionView) -> Result<Snapshot, WireError> {
    if view.status() != ExecutionStatus::Completed && !is_tool_failure(&view) {
        return Ok(Snapshot::bare(view));
    }
    let answer = caller.coordinator().result(&caller.bearer, &caller.scope, &view.execution_id).await?;
    let result = answer.result_json.as_deref().map(parse_result);
    let error_detail = answer.error_detail_json.as_deref().and_then(|d| serde_json::from_str(d).ok());
    Ok(Snapshot { view: answer.execution.unwrap_or(view), result, error_detail })
}

/// What a 2025-11-25 status needs and no more: the result of a completed
/// execution (an `isError` one reads `failed`); a failed one reads `failed`
/// without its detail, so no result read is made for it.
pub(super) async fn for_v1_status(caller: &Caller, view: ExecutionView) -> Result<Snapshot, WireError> {
    if view.status() == ExecutionStatus::Completed { complete(caller, view).await } else { Ok(Snapshot::bare(view)) }
}

/// The snapshot a settled `CallExecution` carries: its view and tool result.
pub(super) fn settled(view: ExecutionView, result_json: Option<&str>) -> Snapshot {
    Snapshot { view, result: result_json.map(parse_result), error_detail: None }
}

/// Whether the execution ended because the tool itself reported a failure.
pub(super) fn is_tool_failure(view: &ExecutionView) -> bool {
    view.status() == ExecutionStatus::Failed && view.read_failure_reason() == FailureReason::ToolError
}

/// The tool's own failure as MCP's `CallToolResult`: its message as text
/// content, and its detail as `structuredContent` when it gave an object.
fn tool_failure_result(s: &Snapshot) -> Value {
    let message = if s.view.error_message.is_empty() { "the tool failed" } else { s.view.error_message.as_str() };
    let mut result = json!({"content": [{"type": "text", "text": message}], "isError": true});
    if let Some(detail @ Value::Object(_)) = &s.error_detail {
        result["structuredContent"] = detail.clone();
    }
    result
}

fn parse_result(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(mut m)) => {
            // A tool result never carries a protocol discriminator of its own.
            m.remove("resultType");
            if !m.get("content").is_some_and(Value::is_array) {
                m.insert("content".into(), json!([]));
            }
            Value::Object(m)
        }
        _ => json!({"content": [], "isError": false}),
    }
}

/// What the original `tools/call` answers for a finished execution: its tool
/// result (an `isError` one when the tool failed), or the JSON-RPC error of an
/// execution the system failed or the caller cancelled. `None` while it still
/// runs.
pub(super) fn outcome(s: &Snapshot) -> Option<Result<Value, RpcError>> {
    match s.view.status() {
        ExecutionStatus::Completed => {
            Some(Ok(s.result.clone().unwrap_or_else(|| json!({"content": [], "isError": false}))))
        }
        ExecutionStatus::Failed if is_tool_failure(&s.view) => Some(Ok(tool_failure_result(s))),
        ExecutionStatus::Failed => Some(Err(failure(&s.view))),
        ExecutionStatus::Cancelled => Some(Err(
            RpcError::new(INTERNAL_ERROR, "the execution was cancelled").with_data(json!({"code": "cancelled"}))
        )),
        _ => None,
    }
}

fn failure(view: &ExecutionView) -> RpcError {
    let message = if view.error_message.is_empty() { "the execution failed" } else { view.error_message.as_str() };
    let mut data = json!({"code": "execution_failed"});
    if !view.failure_reason_name().is_empty() {
        data["failureReason"] = view.failure_reason_name().into();
    }
    RpcError::new(INTERNAL_ERROR, message).with_data(data)
}

/// 2025-11-25 `ttl`: how long after creation the task and its result are
/// kept (that dialect's words: after it, the receiver may delete both).
fn ttl_ms(view: &ExecutionView) -> Value {
    let ttl = view.retention_expires_at_ms.saturating_sub(view.created_at_ms);
    if ttl > 0 { ttl.into() } else { Value::Null }
}

/// 2026-07-28 `ttlMs`, as the product's own example shows it (`ttlMs` 599000
/// beside a `retentionExpiresAt` a day after creation): the execution's time
/// to live, from creation to its deadline. How long the record is kept is
/// `retentionExpiresAt`, a field of its own (docs/decisions/0005-ttlms-is-the-execution-s-time-to-live.md).
fn v2_ttl_ms(view: &ExecutionView) -> Value {
    let ttl = view.execution_deadline_ms.saturating_sub(view.created_at_ms);
    if ttl > 0 { ttl.into() } else { Value::Null }
}

pub(super) fn poll_interval_ms(view: &ExecutionView) -> i64 {
    if view.poll_interval_ms > 0 { view.poll_interval_ms } else { 1000 }
}

/// The 2025-11-25 status (MCP's words): a requested cancel already reads
/// `cancelled` (that dialect promises it never changes afterwards), and a tool
/// error `failed`.
pub(super) fn v1_status(s: &Snapshot) -> &'static str {
    if s.view.cancel_state() == CancelState::Requested {
        return "cancelled";
    }
    match s.view.status() {
        ExecutionStatus::Completed if s.is_error_result() => "failed",
        status => mcp_status(status),
    }
}

/// The 2025-11-25 outcome: like `outcome`, but a requested cancel ends it.
pub(super) fn v1_outcome(s: &Snapshot) -> Option<Result<Value, RpcError>> {
    if v1_status(s) == "cancelled" {
        return Some(Err(
            RpcError::new(INTERNAL_ERROR, "the execution was cancelled").with_data(json!({"code": "cancelled"}))
        ));
    }
    outcome(s)
}

fn status_message(s: &Snapshot, status: &str) -> Option<String> {
    let v = &s.view;
    match status {
        "failed" if s.view.status() == ExecutionStatus::Completed => Some("the tool reported an error".to_owned()),
        "failed" if !v.error_message.is_empty() => Some(v.error_message.clone()),
        "failed" => Some("the execution failed".to_owned()),
        "cancelled" => Some("the task was cancelled".to_owned()),
        _ if !v.summary.is_empty() => Some(v.summary.clone()),
        _ => crate::execution::progress_line(v),
    }
}

/// 2025-11-25 `Task`.
pub(super) fn v1_task(s: &Snapshot) -> Value {
    let status = v1_status(s);
    let mut task = json!({
        "taskId": s.view.execution_id,
        "status": status,
        "createdAt": rfc3339(s.view.created_at_ms),
        "lastUpdatedAt": rfc3339(s.view.updated_at_ms),
        "ttl": ttl_ms(&s.view),
        "pollInterval": poll_interval_ms(&s.view),
    });
    if let Some(m) = status_message(s, status) {
        task["statusMessage"] = m.into();
    }
    task
}

/// An MCP task status (the task utility's own vocabulary, in both dialects):
/// a pending execution is already `working` to MCP.
/// An execution status as an MCP task state: `pending` reads `working`, as
/// the seed's handle and both task dialects use only task states.
pub(super) fn mcp_status(status: ExecutionStatus) -> &'static str {
    match status {
        ExecutionStatus::InputRequired => "input_required",
        ExecutionStatus::Completed => "completed",
        ExecutionStatus::Failed => "failed",
        ExecutionStatus::Cancelled => "cancelled",
        ExecutionStatus::Pending | ExecutionStatus::Working | ExecutionStatus::Unspecified => "working",
    }
}

/// The 2026-07-28 status: the tool's own failure is a `completed` task whose
/// result says `isError: true`.
pub(super) fn v2_status(view: &ExecutionView) -> &'static str {
    if is_tool_failure(view) { "completed" } else { mcp_status(view.status()) }
}

/// 2026-07-28 `Task` fields (the body of a CreateTaskResult).
pub(super) fn v2_task(view: &ExecutionView) -> Map<String, Value> {
    let mut task = Map::new();
    task.insert("taskId".into(), view.execution_id.clone().into());
    task.insert("status".into(), v2_status(view).into());
    task.insert("createdAt".into(), rfc3339(view.created_at_ms));
    task.insert("lastUpdatedAt".into(), rfc3339(view.updated_at_ms));
    task.insert("ttlMs".into(), v2_ttl_ms(view));
    task.insert("pollIntervalMs".into(), poll_interval_ms(view).into());
    task.insert("retentionExpiresAt".into(), rfc3339(view.retention_expires_at_ms));
    if !view.summary.is_empty() {
        task.insert("statusMessage".into(), view.summary.clone().into());
    } else if let Some(line) = crate::execution::progress_line(view) {
        task.insert("statusMessage".into(), line.into());
    }
    task
}

/// 2026-07-28 `DetailedTask`: the result, the error or every open input
/// request inline.
pub(super) fn v2_detailed(s: &Snapshot) -> Map<String, Value> {
    let mut task = v2_task(&s.view);
    match outcome(s) {
        Some(Ok(result)) => {
            task.insert("result".into(), result);
        }
        Some(Err(e)) if s.view.status() == ExecutionStatus::Failed => {
            task.insert("statusMessage".into(), e.message.clone().into());
            task.insert("error".into(), e.object());
        }
        _ => {}
    }
    if s.view.status() == ExecutionStatus::InputRequired {
        task.insert("inputRequests".into(), Value::Object(input_requests(&s.view)));
    }
    task
}

/// Open input requests as `elicitation/create` requests keyed by request key.
pub(super) fn input_requests(view: &ExecutionView) -> Map<String, Value> {
    view.input_requests
        .iter()
        .filter(|r| r.state() == InputRequestState::Open)
        .map(|r| {
            let params = json!({"mode": "form", "message": r.message, "requestedSchema": requested_schema(&r.requested_schema_json)});
            (r.request_key.clone(), json!({"method": "elicitation/create", "params": params}))
        })
        .collect()
}

pub(super) fn requested_schema(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"type": "object", "properties": {}}),
    }
}
