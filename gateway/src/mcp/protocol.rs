//! The protocol vocabulary every MCP module shares: the revisions served, the
//! extension and `_meta` names, the two eras, and the server's identity. A
//! leaf: imports nothing from the gateway.

use serde_json::{Value, json};

/// The stateless protocol revision.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// The legacy revision that carries the tasks utility.
pub(crate) const TASKS_LEGACY_VERSION: &str = "2025-11-25";
/// Legacy revisions `initialize` negotiates, newest first.
pub(crate) const LEGACY_VERSIONS: [&str; 2] = [TASKS_LEGACY_VERSION, "2025-06-18"];
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Which protocol generation a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// 2025-11-25 and 2025-06-18: `initialize` and a session.
    Legacy,
    /// 2026-07-28: stateless, per-request `_meta`.
    Modern,
}

pub(super) fn server_info() -> Value {
    json!({"name": "baton", "version": env!("CARGO_PKG_VERSION")})
}
