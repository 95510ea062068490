//! What every handler is given: the gateway's options and its coordinator
//! client. Read-only after start; nothing here is state another replica needs.

use crate::coordinator::Coordinator;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Options {
    pub listen: SocketAddr,
    pub coordinator_url: String,
    /// Largest accepted request body (413 above it).
    pub max_body_bytes: usize,
    /// How long a foreground tools/call waits before handing the caller a task.
    pub foreground_budget: Duration,
    pub native_mcp_tasks: bool,
    pub mcp_tasks_compatibility: bool,
    /// Prefix of the compatibility tools and handle type (`Baton`).
    pub compat_prefix: String,
    /// Key that seals legacy `Mcp-Session-Id` tokens; the same on every replica.
    pub session_key: [u8; 32],
    /// Extra Host / Origin values accepted besides loopback names.
    pub allowed_hosts: Vec<String>,
    /// When set, an MCP request without credentials acts with this token
    /// (`baton dev --conformance-fixtures` only).
    pub anonymous_mcp_token: Option<String>,
    /// For an `https://` coordinator: the CA that verifies it and the
    /// gateway's client certificate (mTLS); `None` trusts the system roots.
    pub coordinator_tls: Option<tonic::transport::ClientTlsConfig>,
}

#[derive(Clone)]
pub struct AppState {
    pub options: Arc<Options>,
    pub coordinator: Coordinator,
}
