//! Streamable HTTP at `/mcp/{gateway_id}`: POST carries one JSON-RPC message
//! (answered with JSON, an SSE stream, or 202 for notifications and client
//! responses), GET has no server stream (405) but resumes a cut `tasks/result`
//! stream (`Last-Event-ID`), DELETE ends a legacy session.
//! Runs the pre-read guards, tells the eras apart, authenticates, and renders
//! results and errors with each era's HTTP statuses. A request refused before
//! it was authenticated (negotiation, framing, envelope, session) is answered
//! 401 instead when its credential is missing or invalid. Method semantics
//! live in `modern`, `legacy` and below.

use super::context::{self, Caller, Ctx, Outgoing, Reply};
use super::error::RpcError;
use super::jsonrpc::{self, Message};
use super::protocol::{Era, server_info};
use super::session::{Claims, Terminated};
use super::{guard, legacy, modern, resume, tasks_v1};
use crate::app::AppState;
use crate::error::retry_after_secs;
use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use serde_json::{Map, Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// The header a client resumes a cut SSE stream with.
const LAST_EVENT_ID: &str = "last-event-id";

/// Terminated legacy sessions remembered by this replica.
const TERMINATED_CAPACITY: usize = 100_000;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/mcp/{gateway_id}", post(post_message).get(get_stream).delete(delete_session))
        .layer(Extension(Arc::new(Terminated::new(TERMINATED_CAPACITY))))
}

/// The 403 for a request whose Host or Origin is foreign (DNS rebinding).
fn refuse_foreign(state: &AppState, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
    let authority = uri.authority().map(|a| a.as_str());
    if guard::host_and_origin_allowed(headers, authority, &state.options.allowed_hosts) {
        return None;
    }
    Some(transport_error(StatusCode::FORBIDDEN, "forbidden: the Host or Origin header is not allowed"))
}

/// A refusal decided before the credential was checked: a missing or invalid
/// credential is answered first (401); otherwise `refusal` stands. Asks the
/// coordinator only on this error path.
async fn unverified(
    state: &AppState,
    headers: &HeaderMap,
    era: Era,
    id: Option<&Value>,
    refusal: impl FnOnce() -> Response,
) -> Response {
    match context::credential_refusal(state, headers).await {
        Some(e) => error_response(era, id, e),
        None => refusal(),
    }
}

fn transport_error(status: StatusCode, message: &str) -> Response {
    let body = RpcError::invalid_request(message).response(None);
    (status, axum::Json(body)).into_response()
}

async fn post_message(
    State(state): State<AppState>,
    Extension(terminated): Extension<Arc<Terminated>>,
    Path(gateway_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = refuse_foreign(&state, &uri, &headers) {
        return refused;
    }
    let accepts = guard::accepts(&headers);
    if !(accepts.json && accepts.sse) {
        let message = "not acceptable: Accept must list application/json and text/event-stream";
        return unverified(&state, &headers, Era::Legacy, None, || {
            transport_error(StatusCode::NOT_ACCEPTABLE, message)
        })
        .await;
    }
    if !guard::content_type_is_json(&headers) {
        let message = "unsupported media type: send application/json";
        return unverified(&state, &headers, Era::Legacy, None, || {
            transport_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, message)
        })
        .await;
    }
    let message = match Message::parse(&body) {
        Ok(m) => m,
        Err(e) => {
            return unverified(&state, &headers, Era::Legacy, None, || error_response(Era::Legacy, None, e)).await;
        }
    };
    if modern::is_modern(&headers, &message) {
        modern_message(&state, &gateway_id, &headers, message).await
    } else {
        legacy_message(&state, &terminated, &gateway_id, &headers, message).await
    }
}

async fn modern_message(state: &AppState, gateway_id: &str, headers: &HeaderMap, message: Message) -> Response {
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (id, method, params),
        Message::Notification => return StatusCode::ACCEPTED.into_response(),
        Message::Response { .. } => {
            let e = RpcError::invalid_request("the 2026-07-28 protocol takes no client responses");
            return unverified(state, headers, Era::Modern, None, || error_response(Era::Modern, None, e)).await;
        }
    };
    let refuse =
        |e: RpcError| unverified(state, headers, Era::Modern, Some(&id), || error_response(Era::Modern, Some(&id), e));
    let client_capabilities = match modern::envelope(headers, &method, &params) {
        Ok(c) => c,
        Err(e) => return refuse(e).await,
    };
    if !modern::serves(&method, state.options.native_mcp_tasks) {
        return refuse(RpcError::method_not_found(&method)).await;
    }
    // A call the coordinator authenticates anyway, of a credential seen before,
    // skips `WhoAmI`; whatever error it ends with is answered as the full path
    // would, the credential checked first (401 before any other refusal).
    let known = if modern::authenticated_downstream(state, &method, &params) {
        Caller::known(state, headers, gateway_id)
    } else {
        None
    };
    let vouched = known.is_none();
    let caller = match known {
        Some(c) => c,
        None => match Caller::authenticate(state, headers, gateway_id).await {
            Ok(c) => c,
            Err(e) => return error_response(Era::Modern, Some(&id), e),
        },
    };
    let ctx = Ctx {
        caller,
        era: Era::Modern,
        request_id: id.clone(),
        client_capabilities,
        legacy_version: String::new(),
        elicitation: false,
    };
    let outcome = crate::telemetry::mcp_operation(&method, &params, modern::dispatch(&ctx, &method, &params)).await;
    if !vouched && outcome.is_err() {
        return unverified(state, headers, Era::Modern, Some(&id), || reply(Era::Modern, &id, outcome)).await;
    }
    reply(Era::Modern, &id, outcome)
}

async fn legacy_message(
    state: &AppState,
    terminated: &Terminated,
    gateway_id: &str,
    headers: &HeaderMap,
    message: Message,
) -> Response {
    if let Message::Request { id, method, params } = &message
        && method == "initialize"
    {
        return initialize(state, gateway_id, headers, id, params).await;
    }
    let id = match &message {
        Message::Request { id, .. } => Some(id.clone()),
        _ => None,
    };
    let claims = match legacy::claims(&state.options.session_key, headers, gateway_id, terminated) {
        Ok(c) => c,
        Err(e) => {
            let id = id.as_ref();
            return unverified(state, headers, Era::Legacy, id, || error_response(Era::Legacy, id, e)).await;
        }
    };
    let caller = match Caller::authenticate_in_session(state, headers, gateway_id, Some(&claims.sid)).await {
        Ok(c) => c,
        Err(e) => return error_response(Era::Legacy, id.as_ref(), e),
    };
    if let Err(e) = legacy::check(&claims, &caller, headers) {
        return error_response(Era::Legacy, id.as_ref(), e);
    }
    match message {
        Message::Notification => StatusCode::ACCEPTED.into_response(),
        Message::Response { id, result } => match tasks_v1::answer(&caller, &id, result.as_ref()).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err(e) => error_response(Era::Legacy, None, e),
        },
        Message::Request { id, method, params } => {
            let ctx = Ctx {
                caller,
                era: Era::Legacy,
                request_id: id.clone(),
                client_capabilities: Map::new(),
                legacy_version: claims.version,
                elicitation: claims.elicitation,
            };
            let outcome =
                crate::telemetry::mcp_operation(&method, &params, legacy::dispatch(&ctx, &method, &params)).await;
            reply(Era::Legacy, &id, outcome)
        }
    }
}

async fn initialize(
    state: &AppState,
    gateway_id: &str,
    headers: &HeaderMap,
    id: &Value,
    params: &Map<String, Value>,
) -> Response {
    let caller = match Caller::authenticate(state, headers, gateway_id).await {
        Ok(c) => c,
        Err(e) => return error_response(Era::Legacy, Some(id), e),
    };
    let (result, token) = match legacy::initialize(&caller, params) {
        Ok(v) => v,
        Err(e) => return error_response(Era::Legacy, Some(id), e),
    };
    let mut response = reply(Era::Legacy, id, Ok(Reply::Json(result)));
    match HeaderValue::from_str(&token) {
        Ok(v) => {
            response.headers_mut().insert(legacy::SESSION_HEADER, v);
            response
        }
        Err(_) => error_response(Era::Legacy, Some(id), RpcError::internal()),
    }
}

/// No standalone server stream is offered (405; clients fall back to POST).
/// A GET with `Last-Event-ID` resumes a legacy `tasks/result` stream that
/// was cut: it answers what that stream had not sent yet, from any replica.
async fn get_stream(
    State(state): State<AppState>,
    Extension(terminated): Extension<Arc<Terminated>>,
    Path(gateway_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse_foreign(&state, &uri, &headers) {
        return refused;
    }
    let Some(last_event_id) = headers.get(LAST_EVENT_ID) else {
        return method_not_allowed();
    };
    if !guard::accepts(&headers).sse {
        let message = "not acceptable: Accept must list text/event-stream";
        return unverified(&state, &headers, Era::Legacy, None, || {
            transport_error(StatusCode::NOT_ACCEPTABLE, message)
        })
        .await;
    }
    let Some(point) = last_event_id.to_str().ok().and_then(resume::ResumePoint::parse) else {
        let message = "bad request: Last-Event-ID names no stream of this server";
        return unverified(&state, &headers, Era::Legacy, None, || transport_error(StatusCode::BAD_REQUEST, message))
            .await;
    };
    if point.done {
        return unverified(&state, &headers, Era::Legacy, None, method_not_allowed).await;
    }
    let (claims, caller) = match session_of(&state, &terminated, &gateway_id, &headers).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    let ctx = Ctx {
        caller,
        era: Era::Legacy,
        request_id: point.request_id.clone(),
        client_capabilities: Map::new(),
        legacy_version: claims.version,
        elicitation: claims.elicitation,
    };
    let id = point.request_id.clone();
    let stream = crate::telemetry::mcp_operation("tasks/result", &Map::new(), tasks_v1::resume(&ctx, point)).await;
    sse(Era::Legacy, id, stream)
}

/// The legacy session a GET or DELETE names, opened and checked against its
/// caller; otherwise the refusal to send (there is no request id to answer).
async fn session_of(
    state: &AppState,
    terminated: &Terminated,
    gateway_id: &str,
    headers: &HeaderMap,
) -> Result<(Claims, Caller), Response> {
    let claims = match legacy::claims(&state.options.session_key, headers, gateway_id, terminated) {
        Ok(c) => c,
        Err(e) => {
            return Err(unverified(state, headers, Era::Legacy, None, || error_response(Era::Legacy, None, e)).await);
        }
    };
    let caller = Caller::authenticate_in_session(state, headers, gateway_id, Some(&claims.sid))
        .await
        .map_err(|e| error_response(Era::Legacy, None, e))?;
    legacy::check(&claims, &caller, headers).map_err(|e| error_response(Era::Legacy, None, e))?;
    Ok((claims, caller))
}

fn method_not_allowed() -> Response {
    let mut response = transport_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    response
}

async fn delete_session(
    State(state): State<AppState>,
    Extension(terminated): Extension<Arc<Terminated>>,
    Path(gateway_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse_foreign(&state, &uri, &headers) {
        return refused;
    }
    if headers.get(legacy::SESSION_HEADER).is_none() {
        // The stateless era has no session to end.
        return method_not_allowed();
    }
    let (claims, caller) = match session_of(&state, &terminated, &gateway_id, &headers).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    if let Err(e) = caller.coordinator().end_mcp_session(&caller.bearer, &claims.sid).await {
        return error_response(Era::Legacy, None, e.into());
    }
    terminated.insert(&claims.sid);
    StatusCode::NO_CONTENT.into_response()
}

/// Adds what every 2026-07-28 result carries: `resultType` and the server's
/// identity in `_meta`. An empty acknowledgement (`tasks/cancel`,
/// `tasks/update`) stays `{"resultType": "complete"}` alone: the identity is
/// only a SHOULD, and rmcp 3.3.0 decodes an ack carrying `_meta` as an empty
/// tool result, which its `cancel_task` then refuses as an unexpected response.
fn decorate(era: Era, mut result: Value) -> Value {
    if era == Era::Modern
        && let Some(obj) = result.as_object_mut()
    {
        let ack = obj.is_empty();
        obj.entry("resultType").or_insert_with(|| "complete".into());
        if ack {
            return result;
        }
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("io.modelcontextprotocol/serverInfo".into(), server_info());
        }
    }
    result
}

fn reply(era: Era, id: &Value, outcome: Result<Reply, RpcError>) -> Response {
    match outcome {
        Ok(Reply::Json(result)) => {
            (StatusCode::OK, axum::Json(jsonrpc::result(id, decorate(era, result)))).into_response()
        }
        Ok(Reply::Stream(stream)) => sse(era, id.clone(), stream),
        Err(e) => error_response(era, Some(id), e),
    }
}

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The SSE response of a stream of messages. Framed here rather than with
/// axum's `Sse`, which leaves out an empty `data` field: the priming event
/// (`Outgoing::Checkpoint`) needs one, or SSE parsers never report its id.
fn sse(era: Era, id: Value, stream: BoxStream<'static, Outgoing>) -> Response {
    let frames = stream.map(move |item| frame(era, &id, item)).boxed();
    let body = futures_util::stream::unfold(
        (frames, tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE)),
        |(mut frames, mut idle)| async move {
            tokio::select! {
                frame = frames.next() => frame.map(|f| {
                    idle.reset();
                    (f, (frames, idle))
                }),
                _ = idle.tick() => Some((Bytes::from_static(b":\n\n"), (frames, idle))),
            }
        },
    );
    let mut response = axum::body::Body::from_stream(body.map(Ok::<_, Infallible>)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One SSE event: its id when it has one, and its message as the data (a
/// checkpoint's data is empty).
fn frame(era: Era, id: &Value, item: Outgoing) -> Bytes {
    let (message, event_id) = match item {
        Outgoing::Message(m) => (Some(m), None),
        Outgoing::Resumable(m, event_id) => (Some(m), Some(event_id)),
        Outgoing::Checkpoint(event_id) => (None, Some(event_id)),
        Outgoing::Result(r) => (Some(jsonrpc::result(id, decorate(era, r))), None),
        Outgoing::Error(e) => (Some(e.response(Some(id))), None),
    };
    let mut out = String::new();
    if let Some(event_id) = event_id {
        // Ours are base64url after a fixed prefix: no line breaks to escape.
        out.push_str("id: ");
        out.push_str(&event_id);
        out.push('\n');
    }
    out.push_str("event: message\ndata: ");
    // Compact JSON has no raw line breaks.
    if let Some(message) = message {
        out.push_str(&message.to_string());
    }
    out.push_str("\n\n");
    Bytes::from(out)
}

pub(super) fn error_response(era: Era, id: Option<&Value>, e: RpcError) -> Response {
    let status = e.http_status(era);
    let mut response = (status, axum::Json(e.response(id))).into_response();
    if let Some(ms) = e.retry_after_ms {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs(ms)));
    }
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}
