//! What every handler is given: the gateway's options, its coordinator
//! client, the wait counters and the shutdown signal. Nothing here is state
//! another replica needs.

use crate::coordinator::{Bearer, Coordinator};
use crate::waits::{TooManyWaits, WaitPermit, Waits};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
    /// A connection must deliver a request head within this long (slowloris,
    /// and connections that never send one). Also bounds each chunk of a
    /// request body.
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// On shutdown, how long in-flight requests may finish before their
    /// connections are dropped.
    pub drain_timeout: Duration,
    /// Waits (long polls, blocking streams) one credential may hold at once.
    pub max_waits_per_principal: usize,
    /// Waits this gateway process holds at once, all callers together.
    pub max_waits: usize,
    /// How long waits and watches may be, and how long a watch URL may be opened.
    pub wait_limits: crate::waits::Limits,
    /// The dashboard offers sign-in by pasting a project API key.
    pub dashboard_api_key_sign_in: bool,
    /// The dashboard offers sign-in with the OpenID provider the coordinators
    /// are configured with (`dashboard/oidc.rs`).
    pub dashboard_oidc: bool,
}

/// The handlers' state: one pointer, since every request's future and every
/// open watch holds a clone for as long as it lasts.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub(crate) fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    pub(crate) options: Arc<Options>,
    pub(crate) coordinator: Coordinator,
    pub(crate) waits: Arc<Waits>,
    /// Cancelled when the gateway begins a graceful shutdown: every parked
    /// wait answers at once.
    pub(crate) shutdown: CancellationToken,
    /// Tool definitions `tools/call` plans with (see `mcp::tool_defs`).
    pub(crate) tool_defs: Arc<crate::tool_defs::ToolDefs>,
    /// What credentials seen before are (see `known_callers`).
    pub(crate) known_callers: Arc<crate::known_callers::KnownCallers>,
}

impl AppState {
    /// A place for one wait of `bearer`, unless a bound is reached.
    pub(crate) fn admit_wait(&self, bearer: &Bearer) -> Result<WaitPermit, TooManyWaits> {
        self.waits.acquire(bearer)
    }

    /// Runs `wait` unless the gateway is shutting down: `None` when shutdown
    /// came first (or had already begun).
    pub(crate) fn unless_shutdown<F: Future>(&self, wait: F) -> UnlessShutdown<'_, F> {
        UnlessShutdown { shutdown: self.shutdown.cancelled(), wait }
    }
}

pin_project_lite::pin_project! {
    /// `wait`, unless shutdown comes first. A plain struct rather than an
    /// `async fn`: an async fn would hold `wait` twice (its argument and the
    /// copy it polls), and every parked wait's future carries this one.
    pub(crate) struct UnlessShutdown<'a, F> {
        #[pin]
        shutdown: tokio_util::sync::WaitForCancellationFuture<'a>,
        #[pin]
        wait: F,
    }
}

impl<F: Future> Future for UnlessShutdown<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let this = self.project();
        if this.shutdown.poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        this.wait.poll(cx).map(Some)
    }
}
