//! Webhook endpoints under `/v1/orgs/{org_id}/projects/{project_id}/webhooks`:
//! create (the answer shows the `whsec_` secret once), list, read, disable and
//! enable, delete, rotate the secret, and read the delivery state. Only an
//! admin API key of the project may call them (the coordinator decides).

pub(crate) mod openapi;

use super::ScopePath;
use crate::app::AppState;
use crate::coordinator::{Bearer, Scope};
use crate::error::ApiError;
use crate::json::rfc3339;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::ErrorCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub(crate) const BASE: &str = "/v1/orgs/{org_id}/projects/{project_id}/webhooks";
/// The deliveries page size when `limit` is not given, and the largest.
pub(crate) const DEFAULT_LIMIT: u32 = 50;
pub(crate) const MAX_LIMIT: u32 = 200;
/// The longest target URL accepted.
pub(crate) const MAX_URL: usize = 2048;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(BASE, post(create).get(list))
        .route(&format!("{BASE}/{{webhook_id}}"), get(read).delete(remove))
        .route(&format!("{BASE}/{{webhook_id}}/disable"), post(disable))
        .route(&format!("{BASE}/{{webhook_id}}/enable"), post(enable))
        .route(&format!("{BASE}/{{webhook_id}}/rotate-secret"), post(rotate))
        .route(&format!("{BASE}/{{webhook_id}}/deliveries"), get(deliveries))
}

#[derive(Deserialize)]
struct WebhookPath {
    org_id: String,
    project_id: String,
    webhook_id: String,
}

impl WebhookPath {
    fn split(self) -> (Scope, String) {
        (Scope { org_id: self.org_id, project_id: self.project_id, gateway_id: None }, self.webhook_id)
    }
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

fn reply(status: StatusCode, value: Value) -> Response {
    (status, axum::Json(value)).into_response()
}

fn optional_time(ms: Option<i64>) -> Value {
    ms.map_or(Value::Null, rfc3339)
}

pub(crate) fn view(w: &pb::Webhook) -> Value {
    json!({
        "webhook_id": w.webhook_id,
        "url": w.url,
        "event_type": w.event_type,
        "enabled": w.enabled,
        "created_at": rfc3339(w.created_at_ms),
        "updated_at": rfc3339(w.updated_at_ms),
        "previous_secret_expires_at": optional_time(w.previous_secret_expires_at_ms),
    })
}

fn with_secret(w: &pb::WebhookWithSecret) -> Result<Value, ApiError> {
    let webhook = w.webhook.as_ref().ok_or_else(|| ApiError::new(ErrorCode::Internal, "internal error"))?;
    let mut v = view(webhook);
    v["secret"] = Value::String(w.secret.clone());
    Ok(v)
}

fn delivery(d: &pb::WebhookDelivery) -> Value {
    json!({
        "message_id": d.message_id,
        "execution_id": d.execution_id,
        "state": d.state().name(),
        "status": d.status().name(),
        "attempts": d.attempts,
        "created_at": rfc3339(d.created_at_ms),
        "last_attempt_at": optional_time(d.last_attempt_at_ms),
        "last_status_code": d.last_status_code,
        "last_error": d.last_error,
        "next_attempt_at": optional_time(d.next_attempt_at_ms),
        "finished_at": optional_time(d.finished_at_ms),
    })
}

/// The create body: `{"url": …, "event_type": "tool.execution.lifecycle"}`.
fn create_body(raw: &[u8]) -> Result<(String, String), ApiError> {
    let map: Map<String, Value> = match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(invalid("request body must be a JSON object")),
        Err(_) => return Err(invalid("request body is not valid JSON")),
    };
    if let Some(k) = map.keys().find(|k| !matches!(k.as_str(), "url" | "event_type")) {
        return Err(invalid(format!("unknown field `{k}`")));
    }
    let text = |field: &str, max: usize| match map.get(field) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= max => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(format!("`{field}` must be 1 to {max} characters"))),
        Some(_) => Err(invalid(format!("`{field}` must be a string"))),
        None => Err(invalid(format!("`{field}` is required"))),
    };
    Ok((text("url", MAX_URL)?, text("event_type", 128)?))
}

/// Routes that take no body accept an empty one or `{}`.
fn no_body(raw: &[u8]) -> Result<(), ApiError> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(map)) if map.is_empty() => Ok(()),
        Ok(Value::Object(map)) => Err(invalid(format!("unknown field `{}`", map.keys().next().map_or("", |k| k)))),
        _ => Err(invalid("request body must be empty or {}")),
    }
}

async fn create(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (url, event_type) = create_body(&raw)?;
    let created = state.coordinator.create_webhook(&bearer, &p.scope(None), &url, &event_type).await?;
    Ok(reply(StatusCode::CREATED, with_secret(&created)?))
}

async fn list(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let found = state.coordinator.list_webhooks(&bearer, &p.scope(None)).await?;
    let items: Vec<Value> = found.webhooks.iter().map(view).collect();
    Ok(reply(StatusCode::OK, json!({ "items": items })))
}

async fn read(
    State(state): State<AppState>,
    Path(p): Path<WebhookPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (scope, id) = p.split();
    Ok(reply(StatusCode::OK, view(&state.coordinator.get_webhook(&bearer, &scope, &id).await?)))
}

async fn remove(
    State(state): State<AppState>,
    Path(p): Path<WebhookPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (scope, id) = p.split();
    state.coordinator.delete_webhook(&bearer, &scope, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn set_enabled(
    state: AppState,
    p: WebhookPath,
    headers: HeaderMap,
    raw: Bytes,
    on: bool,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    no_body(&raw)?;
    let (scope, id) = p.split();
    Ok(reply(StatusCode::OK, view(&state.coordinator.set_webhook_enabled(&bearer, &scope, &id, on).await?)))
}

async fn disable(
    State(state): State<AppState>,
    Path(p): Path<WebhookPath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    set_enabled(state, p, headers, raw, false).await
}

async fn enable(
    State(state): State<AppState>,
    Path(p): Path<WebhookPath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    set_enabled(state, p, headers, raw, true).await
}

async fn rotate(
    State(state): State<AppState>,
    Path(p): Path<WebhookPath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    no_body(&raw)?;
    let (scope, id) = p.split();
    let rotated = state.coordinator.rotate_webhook_secret(&bearer, &scope, &id).await?;
    Ok(reply(StatusCode::OK, with_secret(&rotated)?))
}

async fn deliveries(
    State(state): State<AppState>,
    Path(p): Path<WebhookPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let params = super::history::Params::new(pairs, &["limit"])?;
    let limit = params.uint("limit", 1, MAX_LIMIT, DEFAULT_LIMIT)?;
    let (scope, id) = p.split();
    let found = state.coordinator.webhook_deliveries(&bearer, &scope, &id, limit).await?;
    let items: Vec<Value> = found.deliveries.iter().map(delivery).collect();
    Ok(reply(StatusCode::OK, json!({ "items": items })))
}
