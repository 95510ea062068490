//! Websocket delivery of one execution and its polling fallback.
//!
//! - `GET …/tool-executions/{id}?delivery=websocket|any[&timeout_seconds=N]`
//!   answers at once (see [`offer`]) with a single-use `websocket_url`, its
//!   `connect_deadline` and a `wait_id`.
//! - `GET /v1/watch?token=…` is the socket (`crate::watch::socket`). The token
//!   rides in the query, never the path, because paths are logged. Its use is
//!   recorded by the coordinator, so a second connection is refused on every
//!   replica; a request without Upgrade is 400 `upgrade_required` and leaves
//!   the token unused.
//! - `GET …/tool-executions/{id}/waits/{wait_id}[?wait_ms=]` reads (or long-polls)
//!   the execution like `GET …/{id}` until a minute after the watch's end (or
//!   its connect deadline, if later), so it never ends before the watch would have.
//!
//! Who may call: the execution's owner, by the bearer it sends (the socket: the
//! bearer sealed in its token, checked by the coordinator on use and on every
//! read). A foreign caller gets the uniform not-found.

pub(crate) mod openapi;

use super::view;
use super::{BASE, ExecutionPath, json};
use crate::app::AppState;
use crate::coordinator::{Bearer, Scope};
use crate::error::ApiError;
use crate::json::rfc3339;
use crate::waits::OverLimit;
use crate::watch::socket::{self, Watch};
use crate::watch::token::{self, Ticket, WaitClaims};
use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use baton_proto::clock::now_ms;
use baton_proto::error::ErrorCode;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::Instant;

/// Where sockets are opened.
pub(crate) const WATCH_PATH: &str = "/v1/watch";

/// How long a `wait_id` outlives its watch.
const WAIT_GRACE_MS: i64 = 60_000;

/// The largest frame a watching client may send (it has nothing to say).
const CLIENT_FRAME_LIMIT: usize = 4096;
/// Each socket's read buffer: a client frame's header and a little more.
const WATCH_READ_BUFFER: usize = 512;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(WATCH_PATH, get(connect))
        .route(&format!("{BASE}/{{execution_id}}/waits/{{wait_id}}"), get(poll_wait))
}

/// How a caller wants to hear about changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    Poll,
    Websocket,
    Any,
}

impl Delivery {
    pub(crate) fn parse(s: Option<&str>) -> Result<Delivery, ApiError> {
        match s {
            None | Some("poll") => Ok(Delivery::Poll),
            Some("websocket") => Ok(Delivery::Websocket),
            Some("any") => Ok(Delivery::Any),
            Some(_) => Err(ApiError::new(ErrorCode::InvalidRequest, "`delivery` must be poll, websocket or any")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Delivery::Poll => "poll",
            Delivery::Websocket => "websocket",
            Delivery::Any => "any",
        }
    }
}

/// A wait over its configured limit: 400 naming the limit.
pub(crate) fn over_limit(e: OverLimit) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, e.to_string())
}

fn seconds_to_ms(s: u64) -> i64 {
    i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// A refusal this module words itself: the table's code and status, plus a
/// `reason` a client can branch on.
fn refusal(status: StatusCode, code: ErrorCode, reason: &str, message: &str) -> Response {
    let body = json!({"error": {"code": code.as_str(), "reason": reason, "message": message}});
    (status, axum::Json(body)).into_response()
}

/// `ws://` or `wss://` and an authority the configuration names: the one the
/// caller used when it is a loopback name or in `gateway.allowed_hosts`, else
/// the gateway's own listen address. Never an arbitrary `Host`, which would
/// send the single-use token wherever a forged header points. (A proxy's
/// `X-Forwarded-Proto` says whether it terminated TLS.)
fn socket_base(state: &AppState, headers: &HeaderMap) -> String {
    let secure = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()))
        .filter(|h| crate::mcp::guard::authority_allowed(h, &state.options.allowed_hosts))
        .map_or_else(|| state.options.listen.to_string(), str::to_owned);
    format!("{}://{host}", if secure { "wss" } else { "ws" })
}

/// What a caller asked of a watch.
pub(crate) struct Asked {
    pub(crate) delivery: Delivery,
    /// How long the watch lasts (the default when absent).
    pub(crate) timeout_seconds: Option<u64>,
    /// Resuming after this cursor: the socket replays what came after it.
    pub(crate) after: Option<i64>,
}

/// The answer to `GET …/{id}?delivery=websocket|any`: the owner view as it
/// stands, a single-use `websocket_url` to open before `connect_deadline`, and
/// a `wait_id` for polling instead. The watch lasts `timeout_seconds` from now,
/// whenever the socket is opened.
pub(crate) async fn offer(
    state: &AppState,
    headers: &HeaderMap,
    bearer: Bearer,
    scope: Scope,
    id: String,
    asked: Asked,
) -> Result<Response, ApiError> {
    let Asked { delivery, timeout_seconds, after } = asked;
    let limits = state.options.wait_limits;
    let seconds = limits.watch_seconds(timeout_seconds).map_err(over_limit)?;
    // Authenticates and proves access before anything is sealed.
    let execution = state.coordinator.execution(&bearer, &scope, &id).await?;
    let now = now_ms();
    let until = now.saturating_add(seconds_to_ms(seconds));
    let connect_deadline = now.saturating_add(i64::try_from(limits.watch_connect_ttl_ms).unwrap_or(i64::MAX));
    // Never before the watch would have ended, and a little after, so a client
    // that saw the socket end can still read once more.
    let wait_until = until.max(connect_deadline).saturating_add(WAIT_GRACE_MS);
    let sealing = |e: token::Error| {
        tracing::error!(error = %e, "sealing a watch token failed");
        ApiError::new(ErrorCode::Internal, "internal error")
    };
    let ticket = Ticket {
        id: token::random_id().map_err(sealing)?,
        bearer: bearer.0.clone(),
        org_id: scope.org_id.clone(),
        project_id: scope.project_id.clone(),
        execution_id: id.clone(),
        connect_deadline_ms: connect_deadline,
        until_ms: until,
        after,
    }
    .seal(&state.options.session_key)
    .map_err(sealing)?;
    let wait_id = WaitClaims {
        org_id: scope.org_id.clone(),
        project_id: scope.project_id.clone(),
        execution_id: id.clone(),
        principal: token::principal(&bearer.0),
        until_ms: wait_until,
    }
    .seal(&state.options.session_key)
    .map_err(sealing)?;
    let base = BASE.replace("{org_id}", &scope.org_id).replace("{project_id}", &scope.project_id);
    Ok(json(
        StatusCode::OK,
        json!({
            "execution_id": id,
            "delivery": delivery.name(),
            "websocket_url": format!("{}{WATCH_PATH}?token={ticket}", socket_base(state, headers)),
            "connect_deadline": rfc3339(connect_deadline),
            "timeout_seconds": seconds,
            "watch_expires_at": rfc3339(until),
            "wait_id": wait_id,
            "wait_url": format!("{base}/{id}/waits/{wait_id}"),
            "wait_expires_at": rfc3339(wait_until),
            "execution": view::owner(&execution),
        }),
    ))
}

#[derive(Deserialize)]
struct ConnectQuery {
    token: Option<String>,
}

/// Opens a watch socket. Refusals, in order: no Upgrade (400, the token stays
/// unused), a token that does not open (401 `token_invalid`), past its
/// deadline (401 `token_expired`), no wait place (429), a credential the
/// coordinator refuses (401), a token used before (401 `token_used`), no
/// access to the execution (404).
async fn connect(
    State(state): State<AppState>,
    Query(q): Query<ConnectQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(rejection) => {
            let message = format!("this route only speaks websocket ({})", rejection.body_text());
            return refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, "upgrade_required", &message);
        }
    };
    let unauthenticated =
        |reason: &str, message: &str| refusal(StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated, reason, message);
    let Some(ticket) = q.token.as_deref().and_then(|t| Ticket::open(&state.options.session_key, t).ok()) else {
        return unauthenticated("token_invalid", "this watch URL is not valid");
    };
    let now = now_ms();
    if now > ticket.connect_deadline_ms {
        return unauthenticated(
            "token_expired",
            "this watch URL was not opened before its deadline; ask for a new one",
        );
    }
    let bearer = Bearer(ticket.bearer.clone());
    let place = match state.admit_wait(&bearer) {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    match state.coordinator.use_watch_token(&bearer, &ticket.id, ticket.connect_deadline_ms).await {
        Ok(true) => {}
        Ok(false) => return unauthenticated("token_used", "this watch URL was already used; ask for a new one"),
        Err(e) => return ApiError::from(e).into_response(),
    }
    let scope = Scope { org_id: ticket.org_id.clone(), project_id: ticket.project_id.clone(), gateway_id: None };
    // Through the wait hub, as a long poll's first read: a burst of sockets
    // opening is answered in batches on its stream, not a call each.
    // Resuming: what the watcher missed, read before the current view so
    // that nothing falls between the two.
    let replay = match ticket.after {
        None => Vec::new(),
        Some(after) => match state.coordinator.changes_after(&bearer, &scope, &ticket.execution_id, after).await {
            Ok(missed) => socket::replay(&ticket.execution_id, after, &missed),
            Err(e) => return ApiError::from(e).into_response(),
        },
    };
    let first = match state.coordinator.read_before_wait(&bearer, &scope, &ticket.execution_id).await {
        Ok(v) => v,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let left = Duration::from_millis(u64::try_from(ticket.until_ms.saturating_sub(now)).unwrap_or(0));
    let watch = Box::new(Watch {
        state: state.clone(),
        bearer,
        scope,
        execution_id: ticket.execution_id,
        until: Instant::now() + left,
        status: first.status(),
        view: Some(Box::new(first)),
        replay,
        _place: place,
    });
    // Frames from the client are only read to notice it left: keep them small.
    // A socket mostly sits parked, so its buffers are what a watch costs:
    // tungstenite's defaults (a 128 KiB read buffer, allocated up front, and
    // 128 KiB of write batching) were most of 170 KiB per watch; messages
    // here are single small frames, written as they are made.
    upgrade
        .max_message_size(CLIENT_FRAME_LIMIT)
        .max_frame_size(CLIENT_FRAME_LIMIT)
        .read_buffer_size(WATCH_READ_BUFFER)
        .write_buffer_size(0)
        .on_upgrade(move |ws| socket::run(ws, watch))
}

#[derive(Deserialize)]
struct WaitPath {
    org_id: String,
    project_id: String,
    execution_id: String,
    wait_id: String,
}

#[derive(Deserialize)]
struct PollQuery {
    wait_ms: Option<String>,
}

/// The polling fallback of a watch: the execution as `GET …/{id}` answers it
/// (with `wait_ms`, a long poll ending in `timed_out` or `shutdown`), plus the
/// wait's id and end. Only the credential that asked for the watch may use it.
async fn poll_wait(
    State(state): State<AppState>,
    Path(p): Path<WaitPath>,
    Query(q): Query<PollQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let wait_ms = super::parse_wait_ms(&state, q.wait_ms.as_deref(), false)?;
    let claims = WaitClaims::open(&state.options.session_key, &p.wait_id).ok().filter(|c| {
        c.org_id == p.org_id
            && c.project_id == p.project_id
            && c.execution_id == p.execution_id
            && c.principal == token::principal(&bearer.0)
    });
    let Some(claims) = claims else {
        // A bad credential is told so first; anything else is the uniform not-found.
        if let Some(refused) = state.coordinator.credential_refused(&bearer).await {
            return Err(refused.into());
        }
        return Err(ApiError::execution_not_found());
    };
    if now_ms() > claims.until_ms {
        return Ok(refusal(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "wait_expired",
            "this wait has ended; read the execution by id instead",
        ));
    }
    let (scope, id) =
        ExecutionPath { org_id: p.org_id, project_id: p.project_id, execution_id: p.execution_id }.split();
    let any_change =
        crate::coordinator::Until::StatusChange(baton_proto::coordinator::v1::ExecutionStatus::Unspecified);
    let (execution, ending) = super::read_waiting(&state, &bearer, &scope, &id, wait_ms, any_change).await?;
    let mut out: Value = view::read(&execution, ending);
    out["wait_id"] = p.wait_id.into();
    out["wait_expires_at"] = rfc3339(claims.until_ms);
    Ok(json(StatusCode::OK, out))
}
