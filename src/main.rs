//! `baton`: one binary for every role. Configuration is loaded and validated
//! before any port is bound; a bad configuration exits with code 64 and a
//! message naming the field.

mod admin_cli;
mod admin_keys;
mod admin_lists;
mod admin_webhooks;
mod bench;
mod bench_admission;
mod config;
mod dev;
mod memory;
mod migrate_cli;
mod ops_cli;
mod roles;
mod telemetry;
mod tls;

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub(crate) const EX_CONFIG: u8 = 64;
/// How long background tasks get to end once the command is over.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Parser)]
#[command(name = "baton", version, about = "Durable background tool executions for AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Everything in one process on SQLite, with example tools.
    Dev {
        #[arg(long, default_value = "./.baton")]
        data_dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Serve the MCP conformance suite's fixture tools; unauthenticated MCP requests act as the dev user.
        #[arg(long)]
        conformance_fixtures: bool,
        /// Start without the example tools and the example remote server (serve your own worker's).
        #[arg(long)]
        no_examples: bool,
        /// Serve this remote MCP server's tools (Streamable HTTP URL); repeatable.
        #[arg(long = "remote-server", value_name = "URL")]
        remote_servers: Vec<String>,
    },
    /// The coordinator (gRPC): authorization, admission, state machine, dispatch.
    Coordinator {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides coordinator.listen.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// The gateway (HTTP): MCP, REST, dashboard.
    Gateway {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// A worker serving tools to the coordinators.
    Worker {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve the example tools (Demo.Echo, Demo.Sleep, Demo.Fail).
        #[arg(long)]
        examples: bool,
    },
    /// Applies database migrations, each under a lock and a statement timeout.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the pending migrations, their statements and timeouts; apply nothing.
        #[arg(long)]
        plan: bool,
    },
    /// Creates, lists and revokes organizations, projects, gateways and
    /// credentials, against the database (--config or BATON_DATABASE__URL).
    Admin {
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        action: admin_cli::Action,
    },
    /// Lists, counts, shows and cancels executions through a gateway's API
    /// (BATON_URL, BATON_API_KEY, BATON_ORG, BATON_PROJECT).
    Executions {
        #[command(subcommand)]
        action: ops_cli::Action,
    },
    /// Drives a running deployment over REST and MCP and prints throughput and latency tables.
    #[command(hide = true, args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Bench(Box<bench::Args>),
    /// Measures cluster admission alone against Redis: decisions/s and added latency.
    #[command(hide = true)]
    BenchAdmission {
        #[arg(long, default_value = "redis://127.0.0.1:6379/")]
        redis_url: String,
        /// A seed node of a Redis Cluster to measure instead (repeat for more).
        #[arg(long = "cluster-node")]
        cluster_nodes: Vec<String>,
        #[arg(short = 'n', long, default_value_t = 50_000)]
        decisions: usize,
        #[arg(short = 'c', long, default_value_t = 64)]
        concurrency: usize,
    },
}

impl Command {
    /// A long-running role, as against a command that does its work and exits.
    fn serves(&self) -> bool {
        matches!(
            self,
            Command::Dev { .. } | Command::Coordinator { .. } | Command::Gateway { .. } | Command::Worker { .. }
        )
    }
}

fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    let signal = async move {
        #[cfg(unix)]
        {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    t.cancel();
                    return;
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        t.cancel();
    };
    // The listener also ends when the process stops for another reason.
    let stopping = baton_worker::supervise::supervisor().stopping();
    baton_worker::supervise::spawn_supervised("signal listener", async move {
        tokio::select! {
            () = signal => {}
            () = stopping.cancelled() => {}
        }
    });
    token
}

/// Loads and validates the configuration and derives what a role needs from it;
/// any problem is reported (naming the field) as exit code 64, before anything binds.
fn configure<T>(
    path: Option<&PathBuf>,
    derive: impl FnOnce(&config::Config) -> Result<T, config::Error>,
) -> Result<(config::Config, T), ExitCode> {
    let report = |e: config::Error| {
        eprintln!("baton: {e}");
        ExitCode::from(EX_CONFIG)
    };
    let config = config::Config::load(path.map(PathBuf::as_path)).map_err(report)?;
    // Every role checks every configured TLS file at start.
    tls::validate(&config).map_err(report)?;
    let derived = derive(&config).map_err(report)?;
    Ok((config, derived))
}

#[tokio::main]
async fn main() -> ExitCode {
    tls::install_crypto_provider();
    let cli = Cli::parse();
    if cli.command.serves() {
        memory::give_back_after_bursts();
    }
    let code = match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("baton: {e:#}");
            ExitCode::FAILURE
        }
    };
    let late = baton_worker::supervise::supervisor().shutdown(EXIT_GRACE).await;
    if !late.is_empty() {
        tracing::debug!(tasks = ?late, "background tasks still running at exit");
    }
    code
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dev { data_dir, listen, conformance_fixtures, no_examples, remote_servers } => {
            let guard = telemetry::init("baton-dev", None);
            let args = dev::Args { data_dir, listen, conformance_fixtures, no_examples, remote_servers };
            let result = dev::run(args, shutdown_on_signal()).await;
            guard.shutdown().await;
            result?;
        }
        Command::Coordinator { config, listen } => {
            let (config, (addr, options, otlp)) = match configure(config.as_ref(), |c| {
                let addr = listen.unwrap_or(c.coordinator.listen);
                Ok((addr, roles::coordinator_options(c, addr)?, tls::otlp(c)?))
            }) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let guard = telemetry::init("baton-coordinator", Some(otlp));
            let shutdown = shutdown_on_signal();
            if let Some(at) = config.telemetry.metrics_addr {
                telemetry::serve_metrics(at, guard.metrics(), shutdown.clone()).await?;
            }
            let listener = TcpListener::bind(addr).await?;
            let mut options = options;
            if config.coordinator.advertise_url.is_none() {
                let scheme = if options.server_tls.is_some() { "https" } else { "http" };
                options.advertise_url = format!("{scheme}://{}", listener.local_addr()?);
            }
            let result = baton_coordinator::run(options, listener, shutdown).await;
            guard.shutdown().await;
            if let Err(e) = &result
                && e.is_configuration()
            {
                eprintln!("baton: {e}");
                return Ok(ExitCode::from(EX_CONFIG));
            }
            result?;
        }
        Command::Gateway { config, listen } => {
            let (config, (addr, options, otlp)) = match configure(config.as_ref(), |c| {
                let addr = listen.unwrap_or(c.gateway.listen);
                Ok((addr, roles::gateway_options(c, addr)?, tls::otlp(c)?))
            }) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let guard = telemetry::init("baton-gateway", Some(otlp));
            let shutdown = shutdown_on_signal();
            if let Some(at) = config.telemetry.metrics_addr {
                telemetry::serve_metrics(at, guard.metrics(), shutdown.clone()).await?;
            }
            let listener = baton_gateway::bind(addr)?;
            let result = baton_gateway::run(options, listener, shutdown).await;
            guard.shutdown().await;
            result?;
        }
        Command::Worker { config, examples } => {
            let (config, (options, otlp)) =
                match configure(config.as_ref(), |c| Ok((roles::worker_options(c)?, tls::otlp(c)?))) {
                    Ok(c) => c,
                    Err(code) => return Ok(code),
                };
            let guard = telemetry::init("baton-worker", Some(otlp));
            let shutdown = shutdown_on_signal();
            if let Some(at) = config.telemetry.metrics_addr {
                telemetry::serve_metrics(at, guard.metrics(), shutdown.clone()).await?;
            }
            let drain = std::time::Duration::from_millis(config.worker.drain_timeout_ms);
            let result = roles::run_worker(options, examples, config.worker.metrics_listen, drain, shutdown).await;
            guard.shutdown().await;
            result?;
        }
        Command::Migrate { config, plan } => {
            let (config, url) = match configure(config.as_ref(), config::Config::database_url) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            return migrate_cli::run(&config.database.migrations, &url, plan).await;
        }
        Command::Admin { config, action } => {
            let (config, url) = match configure(config.as_ref(), config::Config::database_url) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            match action {
                admin_cli::Action::Webhook(w) => admin_webhooks::run(&config, &url, w).await?,
                admin_cli::Action::PayloadKeys(k) => return admin_keys::run(&config, &url, k).await,
                other => admin_cli::run(&url, config.executions.retention_ms, other).await?,
            }
        }
        Command::Executions { action } => return Ok(ops_cli::run(action).await),
        Command::Bench(args) => return bench::run(*args).await,
        Command::BenchAdmission { redis_url, cluster_nodes, decisions, concurrency } => {
            let target = if cluster_nodes.is_empty() {
                baton_coordinator::redis_link::Target::Node(redis_url)
            } else {
                baton_coordinator::redis_link::Target::Cluster(cluster_nodes)
            };
            bench_admission::run(bench_admission::Args { target, decisions, concurrency }).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
