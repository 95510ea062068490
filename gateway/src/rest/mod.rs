//! The REST owner lifecycle under `/v1/orgs/{org_id}/projects/{project_id}/tool-executions`.
//! Every handler parses and validates the request, makes one coordinator call and
//! shapes the answer; authorization is the coordinator's. A request refused as
//! malformed is answered 401 instead when its credential is bad (see
//! `crate::credentials`). Long polls hold a wait place (`crate::waits`) and end
//! at once, saying so, when the gateway shuts down; their length is bounded by
//! configuration (`gateway.max_wait_ms`), and a longer one is refused, not
//! shortened. `?delivery=websocket|any` answers with a watch instead (`watch`).

pub(crate) mod admin;
pub(crate) mod body;
pub(crate) mod history;
pub(crate) mod openapi;
mod openapi_pieces;
pub(crate) mod operator;
pub(crate) mod view;
pub(crate) mod watch;
pub(crate) mod webhooks;

use crate::app::AppState;
use crate::coordinator::{Bearer, InputAnswer, Scope, StatusSet, Until};
use crate::error::ApiError;
use crate::execution::is_terminal;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_proto::coordinator::v1::{ExecutionStatus, ExecutionView};
use baton_proto::error::ErrorCode;
use body::{CancelBody, InputBody, StartBody};
use serde::Deserialize;
use std::time::Duration;
use tokio::time::Instant;
use view::Ending;

/// During shutdown, how long the last read of an interrupted long poll may take.
const SHUTDOWN_READ: Duration = Duration::from_secs(2);

const BASE: &str = "/v1/orgs/{org_id}/projects/{project_id}/tool-executions";

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(BASE, post(start).get(list))
        .route(&format!("{BASE}/{{execution_id}}"), get(get_execution))
        .route(&format!("{BASE}/{{execution_id}}/result"), get(result))
        .route(&format!("{BASE}/{{execution_id}}/input"), post(input))
        .route(&format!("{BASE}/{{execution_id}}/cancel"), post(cancel))
        .route("/v1/openapi.json", get(openapi::document))
        .merge(history::router())
        .merge(admin::router())
        .merge(operator::router())
        .merge(webhooks::router())
        .merge(watch::router())
}

#[derive(Deserialize)]
pub(crate) struct ScopePath {
    org_id: String,
    project_id: String,
}

impl ScopePath {
    /// The project of the path; `gateway_id` narrows a start or a listing.
    pub(crate) fn scope(self, gateway_id: Option<String>) -> Scope {
        Scope { org_id: self.org_id, project_id: self.project_id, gateway_id }
    }
}

#[derive(Deserialize)]
pub(crate) struct ExecutionPath {
    org_id: String,
    project_id: String,
    execution_id: String,
}

impl ExecutionPath {
    pub(crate) fn split(self) -> (Scope, String) {
        (Scope { org_id: self.org_id, project_id: self.project_id, gateway_id: None }, self.execution_id)
    }
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
    let bearer = Bearer::from_headers(&headers)?;
    let body = StartBody::parse(&raw)?;
    let idempotency_key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let key =
                v.to_str().map_err(|_| ApiError::new(ErrorCode::InvalidRequest, "Idempotency-Key must be ASCII"))?;
            if key.is_empty() || key.len() > 255 {
                return Err(ApiError::new(ErrorCode::InvalidRequest, "Idempotency-Key must be 1 to 255 characters"));
            }
            Some(key)
        }
    };
    let scope = p.scope(Some(body.gateway_id.clone()));
    let execution = state.coordinator.start(&bearer, &scope, &body.new_execution(idempotency_key)).await?;
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
    let bearer = Bearer::from_headers(&headers)?;
    let limit = match q.limit.as_deref() {
        None => 50,
        Some(s) => body::parse_bounded_int(s, "limit", 1, 200)? as u32,
    };
    // The owner lists what it started through every gateway.
    let scope = p.scope(None);
    let page = state.coordinator.list(&bearer, &scope, q.cursor.as_deref().unwrap_or_default(), limit).await?;
    let items: Vec<_> = page.executions.iter().map(view::owner).collect();
    let next = (!page.next_cursor.is_empty()).then_some(page.next_cursor);
    Ok(json(StatusCode::OK, serde_json::json!({"items": items, "next_cursor": next})))
}

/// The query of a read by id, boxed: a handler's arguments stay in its
/// future for as long as a long poll is parked, and the strings are not needed
/// once parsed.
struct WaitParams(Box<WaitQuery>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for WaitParams {
    type Rejection = <Query<WaitQuery> as axum::extract::FromRequestParts<S>>::Rejection;

    async fn from_request_parts(parts: &mut http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(q) = Query::<WaitQuery>::from_request_parts(parts, state).await?;
        Ok(WaitParams(Box::new(q)))
    }
}

#[derive(Deserialize)]
struct WaitQuery {
    wait_ms: Option<String>,
    delivery: Option<String>,
    timeout_seconds: Option<String>,
    since_cursor: Option<String>,
    until: Option<String>,
    /// A watch resuming after this cursor.
    after: Option<String>,
}

/// `wait_ms` (0 when absent) within `gateway.max_wait_ms`, or for a wait on
/// a state (`predicate`) within `gateway.max_predicate_wait_ms`.
pub(crate) fn parse_wait_ms(state: &AppState, raw: Option<&str>, predicate: bool) -> Result<u64, ApiError> {
    let Some(s) = raw else { return Ok(0) };
    let asked = body::parse_bounded_int(s, "wait_ms", 0, i64::MAX)?;
    state.options.wait_limits.wait_ms(asked.unsigned_abs(), predicate).map_err(watch::over_limit)
}

/// What a long poll waits for: a status change (the default), any change
/// after `since_cursor`, or (`until`) one of the named statuses, `terminal`
/// naming the three final ones.
fn parse_until(q: &WaitQuery) -> Result<Until, ApiError> {
    let invalid = |m: &str| ApiError::new(ErrorCode::InvalidRequest, m.to_owned());
    match (q.since_cursor.as_deref(), q.until.as_deref()) {
        (None, None) => Ok(Until::StatusChange(ExecutionStatus::Unspecified)),
        (Some(_), Some(_)) => Err(invalid("name `since_cursor` or `until`, not both")),
        (Some(cursor), None) => {
            let cursor = body::parse_bounded_int(cursor, "since_cursor", 0, i64::MAX)
                .map_err(|_| invalid("`since_cursor` must be a `next_cursor` this API returned"))?;
            Ok(Until::ChangedAfter(cursor))
        }
        (None, Some(names)) => {
            let mut set = StatusSet::default();
            for name in names.split(',').map(str::trim) {
                set = match name {
                    "terminal" => [ExecutionStatus::Completed, ExecutionStatus::Failed, ExecutionStatus::Cancelled]
                        .into_iter()
                        .fold(set, StatusSet::with),
                    _ => match ExecutionStatus::from_name(name).filter(|s| *s != ExecutionStatus::Unspecified) {
                        Some(status) => set.with(status),
                        None => {
                            return Err(invalid(
                                "`until` takes statuses separated by commas: pending, working, input_required, \
                                 completed, failed, cancelled, or terminal",
                            ));
                        }
                    },
                };
            }
            Ok(Until::Reaches(set))
        }
    }
}

/// Reads one execution, long-polling up to `wait_ms` for a status change; or,
/// with `delivery=websocket|any`, offers a watch of it.
async fn get_execution(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    WaitParams(q): WaitParams,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let delivery = watch::Delivery::parse(q.delivery.as_deref())?;
    let (scope, id) = p.split();
    if delivery != watch::Delivery::Poll {
        if q.wait_ms.is_some() || q.since_cursor.is_some() || q.until.is_some() {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "`wait_ms`, `since_cursor` and `until` are for delivery=poll; a watch takes `timeout_seconds`",
            ));
        }
        let timeout = match q.timeout_seconds.as_deref() {
            None => None,
            Some(s) => Some(body::parse_bounded_int(s, "timeout_seconds", 1, i64::MAX)?.unsigned_abs()),
        };
        let after = q.after.as_deref().map(|s| body::parse_bounded_int(s, "after", 0, i64::MAX)).transpose()?;
        // Boxed, like every path a parked long poll does not take: an
        // inline call future would sit in every parked poll's future.
        let asked = watch::Asked { delivery, timeout_seconds: timeout, after };
        return Box::pin(watch::offer(&state, &headers, bearer, scope, id, asked)).await;
    }
    if q.after.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`after` resumes a watch (delivery=websocket or any); a long poll takes `since_cursor`",
        ));
    }
    if q.timeout_seconds.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "`timeout_seconds` is for delivery=websocket or any; a long poll takes `wait_ms`",
        ));
    }
    let until = parse_until(&q)?;
    let wait_ms = parse_wait_ms(&state, q.wait_ms.as_deref(), matches!(until, Until::Reaches(_)))?;
    // The headers share the HTTP/1 connection's read buffer (8 KiB); a
    // parked poll must not keep it alive, nor the query's strings.
    drop(headers);
    drop(q);
    let (execution, ending) = read_waiting(&state, &bearer, &scope, &id, wait_ms, until).await?;
    Ok(json(StatusCode::OK, view::read(&execution, ending)))
}

/// One execution, after up to `wait_ms` for `until` (0: at once), and why
/// the read ended.
pub(crate) async fn read_waiting(
    state: &AppState,
    bearer: &Bearer,
    scope: &Scope,
    id: &str,
    wait_ms: u64,
    until: Until,
) -> Result<(ExecutionView, Ending), ApiError> {
    if wait_ms == 0 {
        return Ok((Box::pin(state.coordinator.execution(bearer, scope, id)).await?, Ending::Answered));
    }
    let _place = state.admit_wait(bearer)?;
    let wait = Duration::from_millis(wait_ms);
    let began = Instant::now();
    // Boxed as it comes: a view-sized answer matched on inline would be laid
    // out in every parked poll's future, since the shutdown arm awaits.
    let waited =
        state.unless_shutdown(state.coordinator.wait_until(bearer, scope, id, wait, until)).await.map(Box::new);
    Ok(match waited {
        Some(waited) => {
            let execution = (*waited)?;
            // The wait answers early only when its condition holds (or the
            // execution is terminal); a full wait found it did not.
            let timed_out = match until {
                Until::StatusChange(_) => !is_terminal(&execution) && began.elapsed() >= wait,
                _ => !until.met(&execution),
            };
            (execution, if timed_out { Ending::TimedOut } else { Ending::Answered })
        }
        // The caller reconnects at once, to another replica.
        None => {
            (Box::pin(state.coordinator.execution_within(bearer, scope, id, SHUTDOWN_READ)).await?, Ending::Shutdown)
        }
    })
}

/// The 401 for a request refused as malformed whose credential is missing or
/// invalid; `None` when the credential is good (or could not be checked).
pub(crate) async fn credential_refusal(state: &AppState, headers: &HeaderMap) -> Option<Response> {
    let refused = match Bearer::from_headers(headers) {
        Err(missing) => ApiError::from(missing),
        Ok(bearer) => ApiError::from(state.coordinator.credential_refused(&bearer).await?),
    };
    Some(refused.into_response())
}

async fn result(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (scope, id) = p.split();
    let answer = state.coordinator.result(&bearer, &scope, &id).await?;
    let execution = answer.execution.ok_or_else(|| ApiError::new(ErrorCode::Internal, "internal error"))?;
    let status = execution.status();
    match (status, answer.result_json) {
        (ExecutionStatus::Completed, Some(result)) => {
            let result: serde_json::Value = serde_json::from_str(&result).unwrap_or(serde_json::Value::Null);
            Ok(json(
                StatusCode::OK,
                serde_json::json!({"execution_id": execution.execution_id, "status": status.name(), "result": result}),
            ))
        }
        (ExecutionStatus::Failed | ExecutionStatus::Cancelled, _) => {
            let mut error = serde_json::json!({
                "code": ErrorCode::ResultUnavailable.as_str(),
                "message": format!("execution {} has no result", status.name()),
                "status": status.name(),
            });
            if !execution.failure_reason_name().is_empty() {
                error["failure_reason"] = execution.failure_reason_name().into();
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
    let bearer = Bearer::from_headers(&headers)?;
    let body = InputBody::parse(&raw)?;
    let (scope, id) = p.split();
    let answer = InputAnswer { request_key: &body.request_key, action: body.action, content: &body.content };
    let acknowledged = state.coordinator.provide_input(&bearer, &scope, &id, &answer).await?;
    Ok(json(StatusCode::OK, serde_json::json!({"acknowledged": acknowledged})))
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
    let answer = state.coordinator.cancel(&bearer, &scope, &id).await?;
    Ok(json(StatusCode::OK, cancel_reply(&answer)))
}

/// A cancel's answer: the provable outcome and the execution as it stands.
pub(crate) fn cancel_reply(answer: &baton_proto::coordinator::v1::CancelExecutionResponse) -> serde_json::Value {
    let mut out = serde_json::json!({"outcome": answer.outcome().name()});
    if let Some(e) = &answer.execution {
        out["execution"] = view::owner(e);
    }
    out
}

#[cfg(test)]
mod sizes {
    use super::*;

    fn output_size<A, B, C, D, R, F: Fn(A, B, C, D) -> R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    #[test]
    fn a_long_poll_is_a_small_future() {
        let handler = output_size(&get_execution);
        println!("get_execution future: {handler} bytes");
        assert!(handler <= 1536, "a long poll's future is {handler} bytes");
    }
}
