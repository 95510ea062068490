//! The REST owner lifecycle under `/v1/orgs/{org_id}/projects/{project_id}/tool-executions`.
//! Every handler parses and validates the request, makes one coordinator call and
//! shapes the answer; authorization is the coordinator's.

pub mod body;
pub mod openapi;
pub mod view;

use crate::error::ApiError;
use crate::{AppState, Bearer};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::ErrorCode;
use body::{CancelBody, InputBody, StartBody};
use serde::Deserialize;
use std::time::Duration;

/// The longest long poll a caller may ask for.
pub const MAX_WAIT_MS: u64 = 45_000;

const BASE: &str = "/v1/orgs/{org_id}/projects/{project_id}/tool-executions";

pub fn router() -> Router<AppState> {
    Router::new()
        .route(BASE, post(start).get(list))
        .route(&format!("{BASE}/{{execution_id}}"), get(get_execution))
        .route(&format!("{BASE}/{{execution_id}}/result"), get(result))
        .route(&format!("{BASE}/{{execution_id}}/input"), post(input))
        .route(&format!("{BASE}/{{execution_id}}/cancel"), post(cancel))
        .route("/v1/openapi.json", get(openapi::document))
}

/// The caller's bearer token; 401 before any coordinator call when missing.
pub fn bearer(headers: &HeaderMap) -> Result<Bearer, ApiError> {
    let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(Bearer(token.trim().to_owned()))
        }
        _ => Err(ApiError::new(ErrorCode::Unauthenticated, "missing or malformed bearer token")),
    }
}

#[derive(Deserialize)]
struct ScopePath {
    org_id: String,
    project_id: String,
}

#[derive(Deserialize)]
pub struct ExecutionPath {
    pub org_id: String,
    pub project_id: String,
    pub execution_id: String,
}

fn json(status: StatusCode, value: serde_json::Value) -> Response {
    (status, axum::Json(value)).into_response()
}

async fn start(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = bearer(&headers)?;
    let body = StartBody::parse(&raw)?;
    let idempotency_key = match headers.get("idempotency-key") {
        None => String::new(),
        Some(v) => {
            let key =
                v.to_str().map_err(|_| ApiError::new(ErrorCode::InvalidRequest, "Idempotency-Key must be ASCII"))?;
            if key.is_empty() || key.len() > 255 {
                return Err(ApiError::new(ErrorCode::InvalidRequest, "Idempotency-Key must be 1 to 255 characters"));
            }
            key.to_owned()
        }
    };
    let request = pb::StartExecutionRequest {
        org_id: p.org_id,
        project_id: p.project_id,
        gateway_id: body.gateway_id.clone(),
        tool_name: body.tool_name.clone(),
        input_json: body.input.to_string(),
        user_id: body.user_id.clone().unwrap_or_default(),
        run_at_ms: body.run_at_ms,
        ttl_ms: body.ttl_ms,
        request_fingerprint: body.fingerprint(),
        idempotency_key,
        surface: pb::Surface::Rest as i32,
    };
    let started =
        state.coordinator.call(&bearer, request, None, |mut c, r| async move { c.start_execution(r).await }).await?;
    let execution = started.execution.ok_or_else(|| ApiError::new(ErrorCode::Internal, "internal error"))?;
    Ok(json(StatusCode::ACCEPTED, view::owner(&execution)))
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<String>,
    cursor: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    Query(q): Query<ListQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = bearer(&headers)?;
    let limit = match q.limit.as_deref() {
        None => 50,
        Some(s) => body::parse_bounded_int(s, "limit", 1, 200)? as u32,
    };
    let request = pb::ListExecutionsRequest {
        org_id: p.org_id,
        project_id: p.project_id,
        limit,
        cursor: q.cursor.unwrap_or_default(),
        gateway_id: String::new(),
    };
    let page =
        state.coordinator.call(&bearer, request, None, |mut c, r| async move { c.list_executions(r).await }).await?;
    let items: Vec<_> = page.executions.iter().map(view::owner).collect();
    let next = (!page.next_cursor.is_empty()).then_some(page.next_cursor);
    Ok(json(StatusCode::OK, serde_json::json!({"items": items, "next_cursor": next})))
}

#[derive(Deserialize)]
struct WaitQuery {
    wait_ms: Option<String>,
}

async fn get_execution(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    Query(q): Query<WaitQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = bearer(&headers)?;
    let wait_ms = match q.wait_ms.as_deref() {
        None => 0,
        Some(s) => body::parse_bounded_int(s, "wait_ms", 0, MAX_WAIT_MS as i64)? as u64,
    };
    let execution = fetch(&state, &bearer, p, wait_ms).await?;
    Ok(json(StatusCode::OK, view::owner(&execution)))
}

/// Reads one execution, long-polling up to `wait_ms` for a status change.
pub async fn fetch(
    state: &AppState,
    bearer: &Bearer,
    p: ExecutionPath,
    wait_ms: u64,
) -> Result<pb::ExecutionView, ApiError> {
    if wait_ms == 0 {
        let request =
            pb::GetExecutionRequest { org_id: p.org_id, project_id: p.project_id, execution_id: p.execution_id };
        return Ok(state
            .coordinator
            .call(bearer, request, None, |mut c, r| async move { c.get_execution(r).await })
            .await?);
    }
    let request = pb::WaitExecutionRequest {
        org_id: p.org_id,
        project_id: p.project_id,
        execution_id: p.execution_id,
        wait_ms: wait_ms as i64,
        known_status: String::new(),
    };
    let timeout = Duration::from_millis(wait_ms + 5_000);
    Ok(state
        .coordinator
        .call(bearer, request, Some(timeout), |mut c, r| async move { c.wait_execution(r).await })
        .await?)
}

async fn result(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = bearer(&headers)?;
    let request = pb::GetResultRequest { org_id: p.org_id, project_id: p.project_id, execution_id: p.execution_id };
    let answer =
        state.coordinator.call(&bearer, request, None, |mut c, r| async move { c.get_result(r).await }).await?;
    let execution = answer.execution.ok_or_else(|| ApiError::new(ErrorCode::Internal, "internal error"))?;
    match (execution.status.as_str(), answer.result_json) {
        ("completed", Some(result)) => {
            let result: serde_json::Value = serde_json::from_str(&result).unwrap_or(serde_json::Value::Null);
            Ok(json(
                StatusCode::OK,
                serde_json::json!({"execution_id": execution.execution_id, "status": "completed", "result": result}),
            ))
        }
        ("failed" | "cancelled", _) => {
            let mut error = serde_json::json!({
                "code": ErrorCode::ResultUnavailable.as_str(),
                "message": format!("execution {} has no result", execution.status),
                "status": execution.status,
            });
            if !execution.failure_reason.is_empty() {
                error["failure_reason"] = execution.failure_reason.clone().into();
                error["error_message"] = execution.error_message.clone().into();
            }
            Ok(json(StatusCode::CONFLICT, serde_json::json!({ "error": error })))
        }
        _ => Ok(json(StatusCode::ACCEPTED, view::owner(&execution))),
    }
}

async fn input(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = bearer(&headers)?;
    let body = InputBody::parse(&raw)?;
    let request = pb::ProvideInputRequest {
        org_id: p.org_id,
        project_id: p.project_id,
        execution_id: p.execution_id,
        request_key: body.request_key,
        response: Some(pb::InputResponse { action: body.action, content_json: body.content.to_string() }),
    };
    let ack =
        state.coordinator.call(&bearer, request, None, |mut c, r| async move { c.provide_input(r).await }).await?;
    Ok(json(StatusCode::OK, serde_json::json!({"acknowledged": ack.acknowledged})))
}

async fn cancel(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = bearer(&headers)?;
    CancelBody::parse(&raw)?;
    let request =
        pb::CancelExecutionRequest { org_id: p.org_id, project_id: p.project_id, execution_id: p.execution_id };
    let answer =
        state.coordinator.call(&bearer, request, None, |mut c, r| async move { c.cancel_execution(r).await }).await?;
    let mut out = serde_json::json!({"outcome": answer.outcome});
    if let Some(e) = &answer.execution {
        out["execution"] = view::owner(e);
    }
    Ok(json(StatusCode::OK, out))
}
