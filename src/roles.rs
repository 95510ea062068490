//! Building each role's options from the configuration, and running the roles.

use crate::config::{self, Config};
use base64::Engine as _;
use baton_coordinator::domain::Lifetime;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(crate) fn coordinator_options(
    c: &Config,
    listen_addr: std::net::SocketAddr,
) -> Result<baton_coordinator::Options, config::Error> {
    let server_tls = crate::tls::server(c)?;
    let scheme = if server_tls.is_some() { "https" } else { "http" };
    Ok(baton_coordinator::Options {
        id: baton_coordinator::domain::id::random_id("co_", 64),
        advertise_url: c.coordinator.advertise_url.clone().unwrap_or_else(|| format!("{scheme}://{listen_addr}")),
        database_url: c.database_url()?,
        database_max_connections: c.database.max_connections,
        read_replica_url: c.database.read_replica_url.clone(),
        read_replica_max_lag_ms: c.database.read_replica_max_lag_ms,
        redis: c.redis.target(),
        redis_prefix: c.redis.key_prefix.clone(),
        key_ring: Arc::new(c.key_ring()?),
        lifetime: Lifetime { max_ttl_ms: c.executions.max_ttl_ms, retention_ms: c.executions.retention_ms },
        bounds: c.bounds(),
        lease_ms: c.executions.lease_ms,
        owner_loss_grace_ms: c.executions.owner_loss_grace_ms,
        poll_interval_ms: c.executions.poll_interval_ms,
        sweep_interval_ms: c.executions.sweep_interval_ms,
        max_input_bytes: c.executions.max_input_bytes,
        admission_rebuild_ms: c.executions.admission_rebuild_ms,
        migrate: false,
        cluster_secret: c.security.cluster_secret.clone(),
        max_worker_capacity: c.coordinator.max_worker_capacity,
        tool_limits: baton_coordinator::options::ToolLimits {
            max_description_bytes: c.coordinator.max_tool_description_bytes,
            max_schema_bytes: c.coordinator.max_tool_schema_bytes,
        },
        dashboard: baton_coordinator::options::DashboardSessions {
            idle_ms: c.coordinator.dashboard_idle_ms,
            lifetime_ms: c.coordinator.dashboard_lifetime_ms,
        },
        server_tls,
        client_tls: crate::tls::client(c)?,
        webhooks: c.webhooks.options(),
        oidc: match c.dashboard_sign_in.provider()? {
            Some(o) => Some(Arc::new(
                baton_coordinator::oidc::Provider::new(o)
                    .map_err(|e| config::Error::Field { field: "dashboard_sign_in.oidc", problem: e.to_string() })?,
            )),
            None => None,
        },
    })
}

pub(crate) fn session_key(c: &Config) -> Result<[u8; 32], config::Error> {
    let Some(b64) = &c.security.mcp_session_key else {
        // Without a configured key each gateway seals with its own random key:
        // fine for one replica, and sessions then do not survive a restart.
        let mut key = [0u8; 32];
        baton_coordinator::domain::id::fill_random(&mut key);
        return Ok(key);
    };
    base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or(config::Error::Field { field: "security.mcp_session_key", problem: "must be base64 of 32 bytes".into() })
}

pub(crate) fn gateway_options(
    c: &Config,
    listen: std::net::SocketAddr,
) -> Result<baton_gateway::Options, config::Error> {
    Ok(baton_gateway::Options {
        listen,
        coordinator_url: c.gateway.coordinator_url.clone(),
        max_body_bytes: c.gateway.max_body_bytes,
        foreground_budget: Duration::from_millis(c.gateway.foreground_budget_ms),
        native_mcp_tasks: c.features.native_mcp_tasks,
        mcp_tasks_compatibility: c.features.mcp_tasks_compatibility,
        compat_prefix: c.compat_prefix(),
        session_key: session_key(c)?,
        allowed_hosts: c.gateway.allowed_hosts.clone(),
        anonymous_mcp_token: None,
        coordinator_tls: crate::tls::client(c)?,
        header_read_timeout: Duration::from_millis(c.gateway.header_read_timeout_ms),
        idle_timeout: Duration::from_millis(c.gateway.idle_timeout_ms),
        drain_timeout: Duration::from_millis(c.gateway.drain_timeout_ms),
        max_waits_per_principal: c.gateway.max_waits_per_principal,
        max_waits: c.gateway.max_waits,
        dashboard_api_key_sign_in: c.dashboard_sign_in.api_key,
        dashboard_oidc: c.dashboard_sign_in.oidc.is_some(),
        wait_limits: baton_gateway::waits::Limits {
            max_wait_ms: c.gateway.max_wait_ms,
            max_predicate_wait_ms: c.gateway.max_predicate_wait_ms,
            max_watch_seconds: c.gateway.max_watch_seconds,
            watch_connect_ttl_ms: c.gateway.watch_connect_ttl_ms,
        },
    })
}

pub(crate) fn worker_options(c: &Config) -> Result<baton_worker::Options, config::Error> {
    Ok(baton_worker::Options {
        coordinator_url: c.worker.coordinator_url.clone(),
        coordinator_urls: c.worker.coordinator_urls.clone(),
        token: c
            .worker
            .token
            .clone()
            .ok_or(config::Error::Field { field: "worker.token", problem: "is required".into() })?,
        worker_id: c.worker.id.clone().unwrap_or_else(|| baton_coordinator::domain::id::random_id("wk_", 64)),
        capacity: c.worker.capacity,
        remote_servers: remote_servers(c)?,
        tls: crate::tls::client(c)?,
    })
}

/// `worker.remote_servers`, checked as far as possible without contacting them.
fn remote_servers(c: &Config) -> Result<Vec<baton_worker::remote::RemoteServer>, config::Error> {
    for s in &c.worker.remote_servers {
        s.validate().map_err(|problem| config::Error::Field { field: "worker.remote_servers", problem })?;
    }
    Ok(c.worker.remote_servers.clone())
}

/// `baton worker`: the example tools (with `examples`) and the configured
/// remote servers, served as a tool author's binary serves its own
/// (`baton_worker::serve::run`).
pub(crate) async fn run_worker(
    options: baton_worker::Options,
    examples: bool,
    metrics_listen: Option<std::net::SocketAddr>,
    drain: Duration,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let tools = if examples { baton_worker::examples::all() } else { Vec::new() };
    baton_worker::serve::run(options, tools, metrics_listen, drain, shutdown).await?;
    Ok(())
}
