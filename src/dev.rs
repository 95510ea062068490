//! `baton dev`: coordinator, gateway and a worker serving the example tools in
//! one process, on an embedded SQLite file and in-memory admission, talking gRPC
//! over loopback exactly as in production. State lives under `--data-dir`;
//! restarting on the same directory keeps everything.

use crate::config::{Config, PayloadKey};
use crate::roles;
use baton_coordinator::admin;
use baton_coordinator::authz::Role;
use baton_coordinator::crypto::KeyRing;
use baton_coordinator::store::Store;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub(crate) struct Args {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub conformance_fixtures: bool,
    /// No example tools nor example remote server: only what attaches.
    pub no_examples: bool,
    /// Remote MCP servers (Streamable HTTP URLs) whose tools the dev worker serves.
    pub remote_servers: Vec<String>,
}

/// Secrets that must persist across restarts but never belong in dev.json.
#[derive(Serialize, Deserialize)]
struct Secrets {
    payload_key_id: String,
    payload_key: String,
    session_key: String,
    worker_token: Option<String>,
}

#[derive(Serialize, Deserialize, Clone)]
struct Seed {
    org_id: String,
    project_id: String,
    gateway_id: String,
    end_user: (String, String),
    other_end_user: (String, String),
    admin_key: String,
    member_key: String,
    read_only_key: String,
    operator_key: String,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn write_private(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(value)?)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

fn dev_config(secrets: &Secrets, db: &str) -> anyhow::Result<Config> {
    let mut c = Config::default();
    c.features.native_mcp_tasks = true;
    c.features.mcp_tasks_compatibility = true;
    c.features.mcp_tasks_principal_concurrency = Some(100);
    c.features.mcp_tasks_project_concurrency = Some(200);
    c.features.mcp_tasks_organization_concurrency = Some(400);
    c.features.mcp_tasks_backlog = Some(1_000);
    c.features.mcp_tasks_retained_payload_bytes = Some(64 << 20);
    c.security.execution_payload_keys =
        vec![PayloadKey { id: secrets.payload_key_id.clone(), key: secrets.payload_key.clone() }];
    c.security.mcp_session_key = Some(secrets.session_key.clone());
    c.database.url = Some(db.to_owned());
    // Webhook receivers in development usually listen on this machine.
    c.webhooks.allow_loopback_targets = true;
    // People sign in to the dashboard with an OpenID provider when the
    // environment configures one (BATON_DASHBOARD_SIGN_IN__OIDC__ISSUER_URL, …).
    c.dashboard_sign_in = Config::load(None)?.dashboard_sign_in;
    c.validate()?;
    Ok(c)
}

async fn seed(store: &Store) -> anyhow::Result<(Seed, String)> {
    let org_id = admin::create_org(store, "Dev organization").await?;
    let project_id = admin::create_project(store, &org_id, "Dev project").await?;
    let gateway_id = admin::create_gateway(store, &project_id, "Dev gateway").await?;
    let user = "dev-user@example.com";
    let other = "other-user@example.com";
    let all: Vec<String> = admin::PERMISSIONS.iter().map(|p| p.to_string()).collect();
    let seed = Seed {
        end_user: (user.into(), admin::issue_end_user_token(store, &gateway_id, user).await?.token),
        other_end_user: (other.into(), admin::issue_end_user_token(store, &gateway_id, other).await?.token),
        admin_key: admin::issue_api_key(store, &project_id, Role::Admin, &[]).await?.token,
        member_key: admin::issue_api_key(store, &project_id, Role::Member, &[]).await?.token,
        read_only_key: admin::issue_api_key(store, &project_id, Role::ReadOnly, &[]).await?.token,
        operator_key: admin::issue_api_key(store, &project_id, Role::Member, &all).await?.token,
        org_id,
        project_id: project_id.clone(),
        gateway_id,
    };
    let worker_token = admin::issue_worker_token(store, &project_id, None).await?.token;
    Ok((seed, worker_token))
}

pub(crate) async fn run(args: Args, shutdown: CancellationToken) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)?;
    let data_dir = args.data_dir.canonicalize()?;
    let secrets_path = data_dir.join("secrets.json");
    let seed_path = data_dir.join("seed.json");
    let mut secrets: Secrets = match read_json(&secrets_path) {
        Some(s) => s,
        None => {
            let s = Secrets {
                payload_key_id: "dev-1".into(),
                payload_key: KeyRing::generate_key_base64(),
                session_key: KeyRing::generate_key_base64(),
                worker_token: None,
            };
            write_private(&secrets_path, &s)?;
            s
        }
    };
    let db = format!("sqlite://{}", data_dir.join("baton.db").display());
    let store = Store::connect(&db, 1).await?;
    store.migrate().await?;
    let seeded: Option<Seed> = read_json(&seed_path);
    let seed = match (seeded, &secrets.worker_token) {
        (Some(s), Some(_)) => s,
        _ => {
            let (s, worker_token) = seed(&store).await?;
            secrets.worker_token = Some(worker_token);
            write_private(&secrets_path, &secrets)?;
            write_private(&seed_path, &s)?;
            s
        }
    };
    store.close().await;

    let config = dev_config(&secrets, &db)?;
    let coordinator_listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let coordinator_addr = coordinator_listener.local_addr()?;
    let mut coordinator_options = roles::coordinator_options(&config, coordinator_addr)?;
    coordinator_options.migrate = true;
    let gateway_listener = baton_gateway::bind(args.listen)?;
    let http = gateway_listener.local_addr()?;
    let mut gateway_options = roles::gateway_options(&config, http)?;
    gateway_options.coordinator_url = format!("http://{coordinator_addr}");
    if args.conformance_fixtures {
        conformance_gateway(&mut gateway_options, &seed);
    }
    let mut worker_options = baton_worker::Options {
        coordinator_url: format!("http://{coordinator_addr}"),
        coordinator_urls: Vec::new(),
        token: secrets.worker_token.clone().unwrap_or_default(),
        worker_id: "wk_dev".into(),
        capacity: 64,
        remote_servers: Vec::new(),
        tls: None,
    };

    // Shutdown is ordered: the worker drains first (finishing and settling what
    // runs), then the gateway and coordinator stop.
    let servers = CancellationToken::new();
    let worker_stop = CancellationToken::new();
    for url in &args.remote_servers {
        let server = baton_worker::remote::RemoteServer::new(url.clone());
        server.validate().map_err(|problem| anyhow::anyhow!("--remote-server {url}: {problem}"))?;
        worker_options.remote_servers.push(server);
    }
    let examples = !args.no_examples;
    // The example remote MCP server: on loopback, its tools served through the
    // worker (`confirm_delete`, `multi_input`, `review_then_approve`).
    if examples {
        start_example_server(&mut worker_options, &servers).await?;
    }
    let coordinator_url = worker_options.coordinator_url.clone();
    let worker_token = worker_options.token.clone();
    let serves_anything = examples || args.conformance_fixtures || !worker_options.remote_servers.is_empty();
    let coordinator = supervise(
        "coordinator",
        baton_coordinator::run(coordinator_options, coordinator_listener, servers.clone()),
        &shutdown,
    );
    let gateway =
        supervise("gateway", baton_gateway::run(gateway_options, gateway_listener, servers.clone()), &shutdown);
    let worker = if args.conformance_fixtures {
        // The suite's fixtures first, then the example tools.
        let mut tools = baton_worker::conformance::all();
        tools.extend(baton_worker::examples::all());
        let worker = baton_worker::Worker::new(worker_options, tools);
        supervise("worker", worker.run(worker_stop.clone(), Duration::from_secs(10)), &shutdown)
    } else if serves_anything {
        supervise(
            "worker",
            roles::run_worker(worker_options, examples, None, Duration::from_secs(10), worker_stop.clone()),
            &shutdown,
        )
    } else {
        // Nothing to serve here: the tools come from workers started apart.
        baton_worker::supervise::spawn_supervised("worker (none)", async { true })
    };
    let http_url = format!("http://{http}");
    let dev = json!({
        "http_url": http_url,
        "mcp_url": format!("{http_url}/mcp/{}", seed.gateway_id),
        "rest_base": format!("{http_url}/v1/orgs/{}/projects/{}", seed.org_id, seed.project_id),
        "dashboard_url": format!("{http_url}/dashboard/orgs/{}/projects/{}", seed.org_id, seed.project_id),
        // For a tool author's worker: where to dial, and the project's worker token.
        "coordinator_url": coordinator_url,
        "worker_token": worker_token,
        "org_id": seed.org_id,
        "project_id": seed.project_id,
        "gateway_id": seed.gateway_id,
        "credentials": {
            "end_user": {"user_id": seed.end_user.0, "token": seed.end_user.1},
            "other_end_user": {"user_id": seed.other_end_user.0, "token": seed.other_end_user.1},
            "admin_key": seed.admin_key,
            "member_key": seed.member_key,
            "read_only_key": seed.read_only_key,
            "operator_key": seed.operator_key,
        }
    });
    write_private(&data_dir.join("dev.json"), &dev)?;
    println!("baton dev is running (data in {})", data_dir.display());
    println!("  REST      {}", dev["rest_base"].as_str().unwrap_or_default());
    println!("  MCP       {}", dev["mcp_url"].as_str().unwrap_or_default());
    println!("  dashboard {}", dev["dashboard_url"].as_str().unwrap_or_default());
    println!("            (sign in by pasting credentials.admin_key or member_key from dev.json)");
    println!("  workers   {coordinator_url}");
    println!("  tokens    {}", data_dir.join("dev.json").display());
    if args.conformance_fixtures {
        println!("  mode      conformance fixtures (anonymous MCP as the dev user, no compatibility tools)");
    }

    shutdown.cancelled().await;
    worker_stop.cancel();
    let grace = Duration::from_secs(15);
    let worker_ok = tokio::time::timeout(grace, worker).await;
    servers.cancel();
    let servers_ok = tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(coordinator, gateway) }).await;
    match (worker_ok, servers_ok) {
        (Ok(Ok(true)), Ok((Ok(true), Ok(true)))) => Ok(()),
        (Err(_), _) | (_, Err(_)) => {
            tracing::warn!("grace period over; exiting");
            Ok(())
        }
        _ => anyhow::bail!("a role stopped with an error"),
    }
}

/// Starts the example remote MCP server on loopback and has the dev worker serve its tools.
async fn start_example_server(
    worker_options: &mut baton_worker::Options,
    servers: &CancellationToken,
) -> anyhow::Result<()> {
    let example = TcpListener::bind(("127.0.0.1", 0)).await?;
    let mut example_server = baton_worker::remote::RemoteServer::new(format!("http://{}/mcp", example.local_addr()?));
    example_server.toolkit_name = Some("Example".into());
    example_server.toolkit_version = Some("1.0.0".into());
    worker_options.remote_servers.push(example_server);
    let example_server = baton_worker::remote::example_server::serve(example, servers.clone());
    let stopping = baton_worker::supervise::supervisor().stopping();
    baton_worker::supervise::spawn_supervised("example MCP server", async move {
        tokio::select! {
            served = example_server => {
                if let Err(e) = served {
                    tracing::warn!(error = %e, "the example MCP server stopped");
                }
            }
            () = stopping.cancelled() => {}
        }
    });
    Ok(())
}

/// `--conformance-fixtures`: the suite sends no credentials, so an anonymous MCP
/// request acts as the dev end user; a short foreground budget lets
/// `slow_compute` become a task within the suite's timings; and the
/// compatibility surface is off, because the suite expects a task-required tool
/// called without the tasks extension to be refused with -32021, not answered
/// with a compatibility handle.
fn conformance_gateway(options: &mut baton_gateway::Options, seed: &Seed) {
    options.anonymous_mcp_token = Some(seed.end_user.1.clone());
    options.foreground_budget = CONFORMANCE_FOREGROUND_BUDGET;
    options.mcp_tasks_compatibility = false;
}

const CONFORMANCE_FOREGROUND_BUDGET: Duration = Duration::from_millis(250);

/// Runs a role; an error stops the others (through `shutdown`) and is reported.
fn supervise<E: std::fmt::Display>(
    role: &'static str,
    fut: impl std::future::Future<Output = Result<(), E>> + Send + 'static,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<bool> {
    let shutdown = shutdown.clone();
    baton_worker::supervise::spawn_supervised(role, async move {
        match fut.await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(role, error = %e, "stopped with an error");
                shutdown.cancel();
                false
            }
        }
    })
}
