//! A worker process in one call: [`serve`] reads the same configuration as
//! `baton worker` (a YAML file from `--config PATH` or `BATON_CONFIG`, then
//! `BATON_WORKER__…`/`BATON_TLS__…` variables), stops on SIGINT or SIGTERM,
//! serves `/metrics` when `worker.metrics_listen` is set, and drains for
//! `worker.drain_timeout_ms`: running tools finish and settle, no new work is
//! taken. `baton worker` runs through [`run`], so both behave alike.
//!
//! ```no_run
//! # async fn tools() -> Vec<std::sync::Arc<dyn baton_worker::Tool>> { Vec::new() }
//! #[tokio::main]
//! async fn main() -> Result<(), baton_worker::serve::ServeError> {
//!     baton_worker::serve(tools().await).await
//! }
//! ```

pub mod config;

use crate::sdk::Tool;
use crate::supervise;
pub use config::{ConfigError, WorkerConfig, WorkerSection, apply_env};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("this worker has no tools to serve (give it tools or worker.remote_servers)")]
    NoTools,
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Worker(#[from] crate::runtime::Error),
}

/// The configuration file named by `--config PATH` (or `--config=PATH`) on the
/// command line, else by `BATON_CONFIG`; none is fine when the environment
/// carries what is needed.
pub fn config_path() -> Option<PathBuf> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("BATON_CONFIG").map(PathBuf::from)
}

/// Loads the configuration, then serves `tools` (plus any configured remote
/// servers' tools) until SIGINT or SIGTERM, and drains.
pub async fn serve(tools: Vec<Arc<dyn Tool>>) -> Result<(), ServeError> {
    let config = WorkerConfig::load(config_path().as_deref())?;
    let options = config.options()?;
    let result = run(options, tools, config.worker.metrics_listen, config.drain(), shutdown_on_signal()).await;
    // Helpers still running (metrics server, signal listener) get a moment to stop.
    let _ = supervise::supervisor().shutdown(Duration::from_secs(2)).await;
    result
}

/// Runs a worker serving `tools` until `shutdown`, then drains for at most
/// `drain`; with `metrics_listen`, serves `/metrics` there meanwhile.
pub async fn run(
    options: crate::Options,
    tools: Vec<Arc<dyn Tool>>,
    metrics_listen: Option<SocketAddr>,
    drain: Duration,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    if tools.is_empty() && options.remote_servers.is_empty() {
        return Err(ServeError::NoTools);
    }
    let worker = crate::Worker::new(options, tools);
    if let Some(addr) = metrics_listen {
        let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Metrics { addr, source })?;
        let bound = listener.local_addr().map_err(|source| ServeError::Metrics { addr, source })?;
        tracing::info!(addr = %bound, "worker metrics listening");
        let router = worker.metrics.router();
        let stop = shutdown.clone();
        let stopping = supervise::supervisor().stopping();
        supervise::spawn_supervised("worker metrics server", async move {
            let stopped = async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = stopping.cancelled() => {}
                }
            };
            let _ = axum::serve(listener, router).with_graceful_shutdown(stopped).await;
        });
    }
    worker.run(shutdown, drain).await?;
    Ok(())
}

/// A token cancelled on SIGINT or SIGTERM.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    let signal = async move {
        #[cfg(unix)]
        {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        t.cancel();
    };
    // The listener also ends when the process stops for another reason.
    let stopping = supervise::supervisor().stopping();
    supervise::spawn_supervised("signal listener", async move {
        tokio::select! {
            () = signal => {}
            () = stopping.cancelled() => {}
        }
    });
    token
}
