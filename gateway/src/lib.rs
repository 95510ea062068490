//! The gateway: terminates MCP (Streamable HTTP) and REST, serves the dashboard,
//! and turns each request into one coordinator RPC. It holds no state another
//! replica would need and never talks to Postgres or Redis.

// The OpenAPI document is one large `json!` literal.
#![recursion_limit = "512"]

mod app;
pub mod coordinator;
pub mod error;
mod execution;
mod health;
mod json;
pub mod mcp;
pub mod rest;

use axum::Router;
use axum::serve::ListenerExt as _;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use app::{AppState, Options};
pub use coordinator::{Bearer, Coordinator, Scope};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Coordinator(#[from] coordinator::ConnectError),
    #[error("serving http: {0}")]
    Serve(#[from] std::io::Error),
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(health::router())
        .merge(rest::router())
        .merge(mcp::router())
        .layer(tower_http::limit::RequestBodyLimitLayer::new(state.options.max_body_bytes))
        .layer(axum::middleware::map_response(error::json_framework_errors))
        // The root span of every request; its context travels to the coordinator.
        // Paths carry ids, never tokens or payloads.
        .layer(tower_http::trace::TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
            tracing::info_span!("http", method = %req.method(), path = %req.uri().path())
        }))
        .with_state(state)
}

pub fn state(options: Options) -> Result<AppState, Error> {
    let coordinator = Coordinator::connect_lazy(&options.coordinator_url, options.coordinator_tls.clone())?;
    Ok(AppState { options: Arc::new(options), coordinator })
}

/// Small responses must not wait for the client's delayed ACK (Nagle adds
/// ~40 ms to a response written in two pieces); axum leaves it on.
pub fn no_delay(tcp: &mut tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
}

/// Serves until `shutdown` fires, then drains in-flight requests.
pub async fn run(options: Options, listener: TcpListener, shutdown: CancellationToken) -> Result<(), Error> {
    let app = router(state(options)?);
    tracing::info!(addr = %listener.local_addr()?, "gateway listening");
    axum::serve(listener.tap_io(no_delay), app).with_graceful_shutdown(shutdown.cancelled_owned()).await?;
    Ok(())
}
