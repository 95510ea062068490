//! MCP over Streamable HTTP at `/mcp/{gateway_id}` (issue #6). One endpoint
//! serves two eras: a request whose `_meta` names protocol 2026-07-28 is served
//! statelessly (with the `io.modelcontextprotocol/tasks` extension), and an
//! `initialize` starts a legacy 2025-11-25 / 2025-06-18 session (with the
//! 2025-11-25 tasks utility). Clients without Tasks get the compatibility
//! handle and tools. The coordinator is the only authority: every module here
//! shapes requests and answers, none decides who may see what.
//!
//! Module map: `http` (transport, era split, rendering) → `modern` / `legacy`
//! (per-era envelope and dispatch; siblings, neither imports the other) →
//! `tools`, `task_view`, `tasks_v1`, `tasks_v2`, `compat`. Shared below them:
//! `guard` (Host/Origin, Accept/Content-Type, header values), `jsonrpc`
//! (framing), `error` (the one error table), `session` (sealed session ids),
//! `request_state` (sealed MRTR request states), `resume` (where a cut
//! `tasks/result` stream resumes from),
//! `context` (the caller: bearer, scope, dialect facts) and `protocol`
//! (versions, eras, names). Coordinator calls go through the gateway's typed
//! client (`crate::coordinator`); shared JSON helpers live in `crate::json`,
//! execution facts in `crate::execution`. Nothing here imports `crate::rest`.

mod compat;
mod context;
mod error;
pub(crate) mod guard;
mod http;
mod jsonrpc;
mod legacy;
mod modern;
mod protocol;
mod request_state;
mod resume;
mod session;
mod task_view;
mod tasks_v1;
mod tasks_v2;
mod tools;

/// Also the router-level harness of the gateway's other tests.
#[cfg(test)]
pub(crate) mod tests;

use crate::app::AppState;
use axum::Router;
use axum::response::Response;

pub(crate) fn router() -> Router<AppState> {
    http::router()
}

/// The MCP 401 for a request the framework refused as malformed, when its
/// credential is missing or invalid (see `crate::credentials`).
pub(crate) async fn credential_refusal(state: &AppState, headers: &::http::HeaderMap) -> Option<Response> {
    let refused = context::credential_refusal(state, headers).await?;
    Some(http::error_response(protocol::Era::Legacy, None, refused))
}
