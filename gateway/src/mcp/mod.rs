//! MCP over Streamable HTTP at `/mcp/{gateway_id}` (issue #6). One endpoint
//! serves two eras: a request whose `_meta` names protocol 2026-07-28 is served
//! statelessly (with the `io.modelcontextprotocol/tasks` extension), and an
//! `initialize` starts a legacy 2025-11-25 / 2025-06-18 session (with the
//! 2025-11-25 tasks utility). Clients without Tasks get the compatibility
//! handle and tools. The coordinator is the only authority: every module here
//! shapes requests and answers, none decides who may see what.
//!
//! Module map: `http` (transport, era split, rendering) → `guard` (Host/Origin,
//! Accept/Content-Type), `jsonrpc` (framing), `error` (the one error table),
//! `modern` / `legacy` (per-era envelope and dispatch), `session` (sealed
//! session ids), `context` (caller and coordinator calls), `tools`,
//! `task_view`, `tasks_v1`, `tasks_v2`, `compat`.

mod compat;
mod context;
mod error;
mod guard;
mod http;
mod jsonrpc;
mod legacy;
mod modern;
mod session;
mod task_view;
mod tasks_v1;
mod tasks_v2;
mod tools;

#[cfg(test)]
mod tests;

use crate::AppState;
use axum::Router;
use serde_json::{Value, json};

/// The stateless protocol revision.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The legacy revision that carries the tasks utility.
pub const TASKS_LEGACY_VERSION: &str = "2025-11-25";
/// Legacy revisions `initialize` negotiates, newest first.
pub const LEGACY_VERSIONS: [&str; 2] = [TASKS_LEGACY_VERSION, "2025-06-18"];
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Which protocol generation a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and 2025-06-18: `initialize` and a session.
    Legacy,
    /// 2026-07-28: stateless, per-request `_meta`.
    Modern,
}

pub fn router() -> Router<AppState> {
    http::router()
}

fn server_info() -> Value {
    json!({"name": "baton", "version": env!("CARGO_PKG_VERSION")})
}
