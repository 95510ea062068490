//! The `io.modelcontextprotocol/tasks` extension at 2026-07-28: `tasks/get`
//! with the result, error or open input requests inline, `tasks/update`
//! forwarding `inputResponses` (unknown or answered keys ignored, partial
//! answers allowed) and `tasks/cancel` as an empty acknowledgement when the
//! stop was delivered, already requested or the task already ended (distinct
//! errors otherwise). Capability gating and headers are the dispatcher's.

use super::context::Ctx;
use super::error::{CANCEL_DELIVERY_UNKNOWN, CANCEL_NOT_DELIVERED, RpcError, task_error};
use super::task_view;
use super::tasks_v1::task_id;
use crate::coordinator::InputAnswer;
use baton_proto::coordinator::v1::{CancelOutcome, ExecutionView};
use baton_proto::error::{ErrorCode, WireError};
use baton_proto::worker::v1::InputAction;
use serde_json::{Map, Value, json};

pub(super) async fn get(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let snap = task_view::snapshot(&ctx.caller, id).await.map_err(task_error)?;
    Ok(Value::Object(task_view::v2_detailed(&snap)))
}

pub(super) async fn update(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    let id = task_id(params)?;
    let Some(responses) = params.get("inputResponses").and_then(Value::as_object) else {
        return Err(RpcError::invalid_params("`inputResponses` must be an object"));
    };
    let view = caller.coordinator().execution(&caller.bearer, &caller.scope, id).await.map_err(task_error)?;
    forward_responses(ctx, &view, responses).await.map_err(task_error)?;
    Ok(json!({}))
}

/// Relays the answers to `view`'s open input requests; answers to unknown or
/// already answered keys are ignored and a subset of the keys may be answered
/// (both as the extension asks). Shared by `tasks/update` and the MRTR retry
/// of a `tools/call`.
pub(super) async fn forward_responses(
    ctx: &Ctx,
    view: &ExecutionView,
    responses: &Map<String, Value>,
) -> Result<(), WireError> {
    let caller = &ctx.caller;
    let open = task_view::input_requests(view);
    for (key, response) in responses.iter().filter(|(k, _)| open.contains_key(*k)) {
        let Some(action) = response.get("action").and_then(Value::as_str).and_then(InputAction::from_name) else {
            continue;
        };
        let content = response.get("content").filter(|c| c.is_object()).cloned().unwrap_or(Value::Null);
        let answer = InputAnswer { request_key: key, action, content: &content };
        match caller.coordinator().provide_input(&caller.bearer, &caller.scope, &view.execution_id, &answer).await {
            Ok(_) => {}
            // A key answered or superseded meanwhile is ignored.
            Err(e) if matches!(e.code, ErrorCode::NotFound | ErrorCode::InvalidRequest | ErrorCode::InvalidInput) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The empty acknowledgement means the stop was delivered, had already been
/// asked for, or the task had already ended; the outcomes that mean anything
/// else are distinct errors carrying the outcome, so a client knows whether
/// retrying or inspecting the task is the safe next step.
pub(super) async fn cancel(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    let id = task_id(params)?;
    let answer = caller.coordinator().cancel(&caller.bearer, &caller.scope, id).await.map_err(task_error)?;
    let outcome = answer.outcome();
    let data = json!({"outcome": outcome.name(), "taskId": id});
    match outcome {
        CancelOutcome::Unsupported => {
            Err(RpcError::new(CANCEL_NOT_DELIVERED, "this task cannot be cancelled; nothing was sent").with_data(data))
        }
        CancelOutcome::StopDeliveryUnknown => Err(RpcError::new(
            CANCEL_DELIVERY_UNKNOWN,
            "the cancel is recorded, but whether it reached the tool is unknown; get the task before starting new work",
        )
        .with_data(data)),
        CancelOutcome::Accepted
        | CancelOutcome::StopAlreadyRequested
        | CancelOutcome::AlreadyTerminal
        | CancelOutcome::Unspecified => Ok(json!({})),
    }
}
