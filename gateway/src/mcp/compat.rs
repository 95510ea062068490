//! The compatibility surface for clients without Tasks: the handle a business
//! tool call returns when it outlives the foreground budget
//! (`{prefix}.execution/v1` with `next_action`), and the four ordinary tools
//! `{Prefix}_ListToolExecutions`, `_GetToolExecution`,
//! `_ProvideToolExecutionInput`, `_CancelToolExecution`. The handle names only
//! the opaque execution id: never remote task ids, transports or URLs.
//! `_GetToolExecution` with `wait_ms` holds a wait place (`crate::waits`; over
//! a bound it is a protocol error, -32025) and, when the gateway shuts down,
//! answers at once with the execution as it stands. Its answer says why the
//! wait ended (`timed_out`, `shutdown`), and a `wait_ms` over the configured
//! limit (`gateway.max_wait_ms`) is refused naming it, never shortened.

use super::context::Ctx;
use super::error::RpcError;
use super::task_view::{self, Snapshot};
use crate::coordinator::InputAnswer;
use crate::execution::{is_execution_id, is_terminal};
use crate::json::{self, rfc3339};
use baton_proto::coordinator::v1::{CancelOutcome, ExecutionStatus, ExecutionView, InputRequestState};
use baton_proto::error::{ErrorCode, WireError};
use baton_proto::worker::v1::{BackgroundPolicy, InputAction};
use serde_json::{Map, Value, json};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tool {
    List,
    Get,
    Provide,
    Cancel,
}

impl Tool {
    const ALL: [Tool; 4] = [Tool::List, Tool::Get, Tool::Provide, Tool::Cancel];

    fn suffix(self) -> &'static str {
        match self {
            Tool::List => "ListToolExecutions",
            Tool::Get => "GetToolExecution",
            Tool::Provide => "ProvideToolExecutionInput",
            Tool::Cancel => "CancelToolExecution",
        }
    }

    pub(super) fn name(self, prefix: &str) -> String {
        format!("{prefix}_{}", self.suffix())
    }

    pub(super) fn parse(prefix: &str, name: &str) -> Option<Tool> {
        let rest = name.strip_prefix(prefix)?.strip_prefix('_')?;
        Tool::ALL.into_iter().find(|t| t.suffix() == rest)
    }
}

fn prefix(ctx: &Ctx) -> &str {
    &ctx.caller.state.options.compat_prefix
}

pub(super) fn definitions(ctx: &Ctx) -> Vec<Value> {
    let p = prefix(ctx);
    let max_wait_ms = ctx.caller.state.options.wait_limits.max_wait_ms;
    let id = json!({"type": "string", "description": "The execution id from a handle or a listing."});
    let mut tools = vec![
        json!({
            "name": Tool::List.name(p),
            "description": "List the background tool executions you started through this gateway, newest first.",
            "inputSchema": {"type": "object", "properties": {
                "cursor": {"type": "string", "description": "next_cursor of the previous page."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100}
            }}
        }),
        json!({
            "name": Tool::Get.name(p),
            "description": format!("Get a background tool execution; waits up to wait_ms (at most {max_wait_ms}) for it to change, and returns the tool's result once it completed. timed_out says a wait saw no change; shutdown says the server is restarting: call again at once."),
            "inputSchema": {"type": "object", "required": ["execution_id"], "properties": {
                "execution_id": id,
                "wait_ms": {"type": "integer", "minimum": 0, "maximum": max_wait_ms}
            }}
        }),
        json!({
            "name": Tool::Provide.name(p),
            "description": "Answer an input request of a background tool execution that is waiting for input.",
            "inputSchema": {"type": "object", "required": ["execution_id", "request_key", "response"], "properties": {
                "execution_id": id,
                "request_key": {"type": "string"},
                "response": {"type": "object", "required": ["action"], "properties": {
                    "action": {"type": "string", "enum": InputAction::names().collect::<Vec<_>>()},
                    "content": {"type": "object"}
                }}
            }}
        }),
        json!({
            "name": Tool::Cancel.name(p),
            "description": "Ask a background tool execution to stop, and report whether the request was delivered.",
            "inputSchema": {"type": "object", "required": ["execution_id"], "properties": {"execution_id": id}}
        }),
    ];
    if ctx.legacy_tasks() {
        for t in &mut tools {
            t["execution"] = json!({"taskSupport": BackgroundPolicy::Forbidden.name()});
        }
    }
    tools
}

/// The structured handle for an execution that is still running.
fn handle(ctx: &Ctx, view: &ExecutionView) -> Value {
    let p = prefix(ctx);
    let max_wait_ms = i64::try_from(ctx.caller.state.options.wait_limits.max_wait_ms).unwrap_or(i64::MAX);
    let wait_ms = view.poll_interval_ms.clamp(1000.min(max_wait_ms), max_wait_ms);
    let mut h = json!({
        "type": format!("{}.execution/v1", p.to_ascii_lowercase()),
        "execution_id": view.execution_id,
        "state": task_view::mcp_status(view.status()),
    });
    let open: Vec<_> = view.input_requests.iter().filter(|r| r.state() == InputRequestState::Open).collect();
    h["next_action"] = match open.first() {
        Some(r) if view.status() == ExecutionStatus::InputRequired => json!({
            "tool": Tool::Provide.name(p),
            "arguments": {"execution_id": view.execution_id, "request_key": r.request_key,
                          "response": {"action": InputAction::Accept.name(), "content": {}}}
        }),
        _ => json!({"tool": Tool::Get.name(p), "arguments": {"execution_id": view.execution_id, "wait_ms": wait_ms}}),
    };
    if view.progress.is_some() {
        // The tool's own account of how far it is, for the model to relay.
        h["progress"] = crate::execution::progress(view.progress.as_ref());
    }
    if !open.is_empty() {
        h["input_requests"] = open
            .iter()
            .map(|r| {
                json!({"request_key": r.request_key, "message": r.message,
                       "requested_schema": task_view::requested_schema(&r.requested_schema_json)})
            })
            .collect();
    }
    h
}

/// The `tools/call` result of a business tool handed over as a handle.
pub(super) fn handle_result(ctx: &Ctx, view: &ExecutionView) -> Value {
    let h = handle(ctx, view);
    let text = format!(
        "{} is still running in the background as execution {}. Call {} with {} to wait for its result.",
        view.tool_name,
        view.execution_id,
        h["next_action"]["tool"].as_str().unwrap_or_default(),
        h["next_action"]["arguments"],
    );
    tool_result(text, h, false)
}

fn tool_result(text: String, structured: Value, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": is_error})
}

/// A mistake the model can correct: a tool error, not a protocol error.
fn refusal(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

const NOT_FOUND: &str = "execution not found";

/// Coordinator answers the model should see as a tool error; the rest are
/// protocol errors.
fn soft(e: WireError) -> Result<Value, RpcError> {
    match e.code {
        ErrorCode::NotFound => Ok(refusal(NOT_FOUND)),
        ErrorCode::InvalidRequest | ErrorCode::InvalidInput | ErrorCode::ResultUnavailable => Ok(refusal(&e.message)),
        _ => Err(e.into()),
    }
}

fn execution_id(args: &Value) -> Result<&str, Value> {
    match args.get("execution_id").and_then(Value::as_str) {
        Some(id) if is_execution_id(id) => Ok(id),
        Some(_) => Err(refusal(NOT_FOUND)),
        None => Err(refusal("`execution_id` is required")),
    }
}

/// An integer argument within bounds, `None` when absent.
fn bounded(args: &Value, field: &str, min: u64, max: u64) -> Result<Option<u64>, Value> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match json::integer(v).and_then(|n| u64::try_from(n).ok()) {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(refusal(&format!("`{field}` must be an integer between {min} and {max}"))),
        },
    }
}

pub(super) async fn call(ctx: &Ctx, tool: Tool, args: &Value) -> Result<Value, RpcError> {
    let outcome = match tool {
        Tool::List => list(ctx, args).await,
        Tool::Get => return get(ctx, args).await,
        Tool::Provide => provide(ctx, args).await,
        Tool::Cancel => cancel(ctx, args).await,
    };
    match outcome {
        Ok(Ok(v)) | Ok(Err(v)) => Ok(v),
        Err(e) => soft(e),
    }
}

type Outcome = Result<Result<Value, Value>, WireError>;

async fn list(ctx: &Ctx, args: &Value) -> Outcome {
    let caller = &ctx.caller;
    let limit = match bounded(args, "limit", 1, 100) {
        Ok(l) => l.unwrap_or(20) as u32,
        Err(refused) => return Ok(Err(refused)),
    };
    let cursor = match args.get("cursor") {
        None | Some(Value::Null) => "",
        Some(Value::String(c)) => c.as_str(),
        Some(_) => return Ok(Err(refusal("`cursor` must be a string from an earlier page"))),
    };
    let page = caller.coordinator().list(&caller.bearer, &caller.scope, cursor, limit).await?;
    let items: Vec<Value> = page
        .executions
        .iter()
        .map(|e| {
            json!({"execution_id": e.execution_id, "tool_name": e.tool_name, "state": task_view::mcp_status(e.status()),
                   "created_at": rfc3339(e.created_at_ms), "updated_at": rfc3339(e.updated_at_ms)})
        })
        .collect();
    let mut text: Vec<String> =
        page.executions.iter().map(|e| format!("{} {} {}", e.execution_id, e.tool_name, e.status().name())).collect();
    if text.is_empty() {
        text.push("no executions".to_owned());
    }
    let next = (!page.next_cursor.is_empty()).then_some(page.next_cursor);
    Ok(Ok(tool_result(text.join("\n"), json!({"executions": items, "next_cursor": next}), false)))
}

/// Unlike the other tools, a wait over its bound is a protocol error (-32025),
/// not a tool error: the client should come back later, the model need not
/// change anything.
async fn get(ctx: &Ctx, args: &Value) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    let id = match execution_id(args) {
        Ok(id) => id,
        Err(refused) => return Ok(refused),
    };
    let wait_ms = match bounded(args, "wait_ms", 0, u64::MAX) {
        Ok(w) => w.unwrap_or(0),
        Err(refused) => return Ok(refused),
    };
    if let Err(over) = caller.state.options.wait_limits.wait_ms(wait_ms, false) {
        return Ok(refusal(&over.to_string()));
    }
    let mut view = match caller.coordinator().execution(&caller.bearer, &caller.scope, id).await {
        Ok(v) => v,
        Err(e) => return soft(e),
    };
    let (mut timed_out, mut shutdown) = (false, false);
    if wait_ms > 0 && !is_terminal(&view) {
        let _place = caller.admit_wait()?;
        let wait = Duration::from_millis(wait_ms);
        let began = tokio::time::Instant::now();
        let waiting = caller.coordinator().wait(&caller.bearer, &caller.scope, id, wait, view.status());
        // Shutting down: the execution as it stands, with its next step.
        match caller.state.unless_shutdown(waiting).await {
            Some(waited) => {
                view = match waited {
                    Ok(v) => v,
                    Err(e) => return soft(e),
                };
                // The coordinator answers early only for a change; a full wait found none.
                timed_out = !is_terminal(&view) && began.elapsed() >= wait;
            }
            None => shutdown = true,
        }
    }
    match task_view::complete(caller, view).await {
        Ok(snap) => {
            let mut answer = describe(ctx, &snap);
            answer["structuredContent"]["timed_out"] = timed_out.into();
            answer["structuredContent"]["shutdown"] = shutdown.into();
            Ok(answer)
        }
        Err(e) => soft(e),
    }
}

fn describe(ctx: &Ctx, snap: &Snapshot) -> Value {
    let v = &snap.view;
    let base = || {
        json!({"type": format!("{}.execution/v1", prefix(ctx).to_ascii_lowercase()),
               "execution_id": v.execution_id, "state": task_view::mcp_status(v.status())})
    };
    match task_view::outcome(snap) {
        Some(Ok(result)) => {
            let mut structured = base();
            structured["result"] = result.clone();
            let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
            let failed = task_view::is_tool_failure(v);
            if failed {
                structured["error"] = json!({"message": v.error_message, "failure_reason": v.failure_reason_name()});
            }
            let ended = if failed { "failed" } else { "completed" };
            let mut content = vec![json!({"type": "text", "text": format!("Execution {} {ended}.", v.execution_id)})];
            if let Some(items) = result.get("content").and_then(Value::as_array) {
                content.extend(items.iter().cloned());
            }
            json!({"content": content, "structuredContent": structured, "isError": is_error})
        }
        Some(Err(e)) if v.status() == ExecutionStatus::Failed => {
            let mut structured = base();
            structured["error"] = json!({"message": e.message, "failure_reason": v.failure_reason_name()});
            tool_result(format!("Execution {} failed: {}", v.execution_id, e.message), structured, true)
        }
        Some(Err(_)) => tool_result(format!("Execution {} was cancelled.", v.execution_id), base(), false),
        None => {
            let h = handle(ctx, v);
            let text = format!(
                "Execution {} is {}. Next: call {} with {}.",
                v.execution_id,
                v.status().name(),
                h["next_action"]["tool"].as_str().unwrap_or_default(),
                h["next_action"]["arguments"]
            );
            tool_result(text, h, false)
        }
    }
}

async fn provide(ctx: &Ctx, args: &Value) -> Outcome {
    let caller = &ctx.caller;
    let id = match execution_id(args) {
        Ok(id) => id,
        Err(refused) => return Ok(Err(refused)),
    };
    let Some(key) = args.get("request_key").and_then(Value::as_str).filter(|k| !k.is_empty()) else {
        return Ok(Err(refusal("`request_key` is required")));
    };
    let response = args.get("response").and_then(Value::as_object).cloned().unwrap_or_else(Map::new);
    let Some(action) = response.get("action").and_then(Value::as_str).and_then(InputAction::from_name) else {
        return Ok(Err(refusal("`response.action` must be one of accept, decline, cancel")));
    };
    let content = match response.get("content") {
        None | Some(Value::Null) => Value::Null,
        Some(c @ Value::Object(_)) => c.clone(),
        Some(_) => return Ok(Err(refusal("`response.content` must be an object"))),
    };
    let answer = InputAnswer { request_key: key, action, content: &content };
    let acknowledged = caller.coordinator().provide_input(&caller.bearer, &caller.scope, id, &answer).await?;
    let p = prefix(ctx);
    let next = json!({"tool": Tool::Get.name(p), "arguments": {"execution_id": id, "wait_ms": 1000}});
    let text = format!(
        "Input {}. Call {} to confirm the execution resumed.",
        if acknowledged { "acknowledged" } else { "not acknowledged" },
        Tool::Get.name(p)
    );
    Ok(Ok(tool_result(text, json!({"execution_id": id, "acknowledged": acknowledged, "next_action": next}), false)))
}

async fn cancel(ctx: &Ctx, args: &Value) -> Outcome {
    let caller = &ctx.caller;
    let id = match execution_id(args) {
        Ok(id) => id,
        Err(refused) => return Ok(Err(refused)),
    };
    let answer = caller.coordinator().cancel(&caller.bearer, &caller.scope, id).await?;
    let state = answer.execution.as_ref().map(|e| task_view::mcp_status(e.status())).unwrap_or_default();
    let outcome = answer.outcome();
    let text = match outcome {
        CancelOutcome::Accepted => {
            "Cancellation requested; the tool stops cooperatively. Get the execution to confirm it ended cancelled."
        }
        CancelOutcome::AlreadyTerminal => "The execution had already ended.",
        CancelOutcome::StopAlreadyRequested => "Cancellation was already requested.",
        CancelOutcome::StopDeliveryUnknown => {
            "Cancellation was requested but its delivery is unknown; get the execution before starting new work."
        }
        CancelOutcome::Unsupported => "This execution cannot be cancelled.",
        CancelOutcome::Unspecified => "Cancellation processed.",
    };
    let structured = json!({"execution_id": id, "outcome": outcome.name(), "state": state});
    Ok(Ok(tool_result(text.to_owned(), structured, false)))
}
