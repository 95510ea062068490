//! Operator recovery under `/v1/orgs/{org_id}/projects/{project_id}/operator/tool-executions`
//! (seed 000): every execution of the project for a key holding the `status`
//! permission, its payload for `payload`, its cancellation for `cancel`. Who
//! may call what is the coordinator's table (`authz::operator`).

pub(crate) mod openapi;

use super::body::CancelBody;
use super::history::Params;
use super::view;
use super::{ExecutionPath, ScopePath};
use crate::app::AppState;
use crate::coordinator::Bearer;
use crate::error::ApiError;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_proto::error::ErrorCode;
use serde_json::{Value, json};

pub(crate) const BASE: &str = "/v1/orgs/{org_id}/projects/{project_id}/operator/tool-executions";
/// The page size when `limit` is not given, and the largest.
pub(crate) const DEFAULT_LIMIT: u32 = 50;
pub(crate) const MAX_LIMIT: u32 = 200;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(BASE, get(list))
        .route(&format!("{BASE}/{{execution_id}}"), get(status))
        .route(&format!("{BASE}/{{execution_id}}/payload"), get(payload))
        .route(&format!("{BASE}/{{execution_id}}/cancel"), post(cancel))
}

fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

/// Recorded JSON as JSON (text when it is not); null when absent.
fn recorded(text: Option<&str>) -> Value {
    text.map(|t| serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned()))).unwrap_or(Value::Null)
}

async fn list(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let params = Params::new(pairs, &["limit", "cursor"])?;
    let limit = params.uint("limit", 1, MAX_LIMIT, DEFAULT_LIMIT)?;
    let cursor = params.get("cursor").unwrap_or_default().to_owned();
    let scope = p.scope(None);
    let page = state.coordinator.operator_list(&bearer, &scope, &cursor, limit).await?;
    let items: Vec<Value> = page.executions.iter().map(view::owner).collect();
    let next = (!page.next_cursor.is_empty()).then_some(page.next_cursor);
    Ok(ok(json!({"items": items, "next_cursor": next})))
}

async fn status(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (scope, id) = p.split();
    Ok(ok(view::owner(&state.coordinator.operator_status(&bearer, &scope, &id).await?)))
}

async fn payload(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (scope, id) = p.split();
    let found = state.coordinator.operator_payload(&bearer, &scope, &id).await?;
    let execution = found.execution.ok_or_else(|| ApiError::new(ErrorCode::Internal, "internal error"))?;
    Ok(ok(json!({
        "execution_id": execution.execution_id,
        "status": execution.status().name(),
        "input": recorded(found.input_json.as_deref()),
        "result": recorded(found.result_json.as_deref()),
    })))
}

async fn cancel(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    CancelBody::parse(&raw)?;
    let (scope, id) = p.split();
    let answer = state.coordinator.operator_cancel(&bearer, &scope, &id).await?;
    Ok(ok(super::cancel_reply(&answer)))
}
