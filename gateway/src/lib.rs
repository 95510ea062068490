//! The gateway: terminates MCP (Streamable HTTP) and REST, serves the dashboard,
//! and turns each request into one coordinator RPC. It holds no state another
//! replica would need and never talks to Postgres or Redis.

// The OpenAPI document is one large `json!` literal.
#![recursion_limit = "512"]

mod app;
pub(crate) mod coordinator;
mod credentials;
mod dashboard;
pub(crate) mod error;
mod execution;
mod health;
// Waiting at scale (issue #21): every parked wait on one coordinator stream.
mod hub;
mod json;
mod known_callers;
pub(crate) mod mcp;
pub(crate) mod rest;
mod serve;
mod shared_calls;
mod telemetry;
mod tool_defs;
mod version;
pub mod waits;
mod watch;

use axum::Router;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;

pub use app::{AppState, Options};
pub(crate) use coordinator::Coordinator;
pub use serve::{bind, no_delay};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Coordinator(#[from] coordinator::ConnectError),
    #[error("serving http: {0}")]
    Serve(#[from] std::io::Error),
}

pub(crate) fn router(state: AppState) -> Router {
    // Each `Router::layer` boxes every request's future once more, and a
    // parked wait keeps them all: the layers are composed first and applied
    // once per router (outermost first).
    let api_layers = ServiceBuilder::new()
        .layer(credentials::AuthenticateRefusals::new(state.clone()))
        .layer(tower::util::MapResponseLayer::new(
            error::json_framework_errors::<tower_http::limit::ResponseBody<axum::body::Body>>,
        ))
        // A body that stalls is a slowloris too: each chunk must come in time.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(state.options.header_read_timeout))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(state.options.max_body_bytes));
    let api = Router::new().merge(health::router()).merge(rest::router()).merge(mcp::router()).layer(api_layers);
    // The dashboard answers people in HTML, so it stays outside the JSON error
    // mapping and has limits of its own; merged into it, the API keeps its
    // fallback (unknown routes answer JSON).
    let edge_layers = ServiceBuilder::new()
        // The root span of every request, continuing the caller's trace; its
        // context travels to the coordinator. Named by route, never by path.
        .layer(tower_http::trace::TraceLayer::new_for_http().make_span_with(telemetry::span).on_response(
            |r: &axum::response::Response, _: std::time::Duration, s: &tracing::Span| telemetry::on_response(r, s),
        ))
        .layer(telemetry::HttpMetrics::new());
    dashboard::router().merge(api).layer(edge_layers).with_state(state)
}

/// The handlers' state; `shutdown` ends every parked wait when it fires.
pub(crate) fn state(options: Options, shutdown: CancellationToken) -> Result<AppState, Error> {
    let coordinator = Coordinator::connect_lazy(&options.coordinator_url, options.coordinator_tls.clone())?;
    let waits = Arc::new(waits::Waits::new(options.max_waits_per_principal, options.max_waits));
    Ok(AppState::new(app::Shared {
        options: Arc::new(options),
        coordinator,
        waits,
        shutdown,
        tool_defs: Default::default(),
        known_callers: Default::default(),
    }))
}

/// Serves until `shutdown` fires, then drains: the listener closes, parked
/// waits answer at once, in-flight requests finish, and connections still
/// open after `options.drain_timeout` are dropped.
pub async fn run(mut options: Options, listener: TcpListener, shutdown: CancellationToken) -> Result<(), Error> {
    // The address actually bound (a configured port 0 is one the kernel chose):
    // what this gateway names itself by when no configured host applies.
    options.listen = listener.local_addr()?;
    let limits = serve::Limits {
        header_read_timeout: options.header_read_timeout,
        idle_timeout: options.idle_timeout,
        drain_timeout: options.drain_timeout,
    };
    let app = router(state(options, shutdown.clone())?);
    tracing::info!(addr = %listener.local_addr()?, "gateway listening");
    serve::serve(listener, app, limits, shutdown).await;
    tracing::info!("gateway stopped");
    Ok(())
}
