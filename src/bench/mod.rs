//! `baton bench`: a load generator that drives a running deployment through its
//! public interfaces only — REST and MCP on one gateway, with an end-user
//! token — and prints one plain-text table per scenario (issue #8). With
//! `--database-url` it adds Postgres commits and WAL bytes per execution; with
//! `--pids` the CPU time of each Baton process and the gateway's memory. It
//! never reaches into Baton's internals, counts every failure by kind instead
//! of panicking, and bounds every loop by count and time.
//!
//! Scenarios live one per module (`rest_background`, `mcp_task`,
//! `foreground`, `waiters`); `rest` and `mcp` are the thin clients they share,
//! `probe` the database and /proc readings, `stats` and `report` the
//! bookkeeping and the tables.

mod foreground;
mod history;
mod mcp;
mod mcp_task;
mod migrate;
mod probe;
mod report;
mod rest;
mod rest_background;
mod retention;
mod scratch_db;
mod stats;
mod waiters;
mod watch;
mod webhooks;

use anyhow::Context as _;
use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scenario {
    RestBackground,
    McpTask,
    Foreground,
    Waiters,
    /// Lifecycle webhook signals to a receiver of the benchmark's own (needs --admin-key; not part of `all`).
    Webhooks,
    All,
}

/// `name=PID` pairs, e.g. `gateway=12,coordinator=13,worker=14`.
#[derive(Clone, Debug)]
pub(crate) struct Pids(pub Vec<(String, u32)>);

fn parse_pids(s: &str) -> Result<Pids, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, pid) = part.split_once('=').ok_or_else(|| format!("`{part}` is not name=PID"))?;
        let pid = pid.trim().parse::<u32>().map_err(|_| format!("`{pid}` is not a process id"))?;
        out.push((name.trim().to_owned(), pid));
    }
    Ok(Pids(out))
}

/// Benchmarks that measure Baton's own parts rather than a running deployment.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Part {
    /// Seeds a fresh Postgres database with a large execution history (1,000,000
    /// runs by default) and times the history's list, count and detail reads.
    History(history::Args),
    /// Seeds expired runs (1,000,000 by default) and expires them with the
    /// sweeper, once by partition drop and once row by row, while starts
    /// keep arriving: time, WAL, dead tuples and the starts' latency.
    Retention(retention::Args),
    /// Migrates a fresh database to an early schema, seeds it (1,000,000 runs by
    /// default), then applies every later migration while a load runs: each
    /// migration's time, the locks it held, and the load's waits and failures.
    Migrate(migrate::Args),
}

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(subcommand)]
    part: Option<Part>,
    /// The gateway's base URL, e.g. http://127.0.0.1:8080.
    // Required unless a part is benchmarked (`Option` only so that a
    // subcommand parses without them).
    #[arg(long, required = true)]
    http_url: Option<String>,
    /// A gateway for the mcp-task scenario, e.g. one started with a zero
    /// foreground budget so every call becomes a task (default: --http-url).
    #[arg(long)]
    task_http_url: Option<String>,
    #[arg(long, required = true)]
    org: Option<String>,
    #[arg(long, required = true)]
    project: Option<String>,
    /// The gateway id (MCP endpoint /mcp/{gateway}, and the REST `gateway_id`).
    #[arg(long, required = true)]
    gateway: Option<String>,
    /// An end-user token bound to that gateway.
    #[arg(long, env = "BATON_BENCH_TOKEN", hide_env_values = true, required = true)]
    token: Option<String>,
    #[arg(long, value_enum, default_value = "all")]
    scenario: Scenario,
    /// Executions per scenario (rest-background, mcp-task, foreground).
    #[arg(short = 'n', long = "executions", default_value_t = 5000)]
    executions: usize,
    /// Requests in flight at once.
    #[arg(short = 'c', long, default_value_t = 64)]
    concurrency: usize,
    /// Concurrent long polls in the waiters scenario.
    #[arg(long, default_value_t = 1000)]
    waiters: usize,
    /// Where the waiters scenario's long polls wait: one execution, or 1,000.
    #[arg(long, value_enum, default_value = "one")]
    spread: waiters::Spread,
    /// How the waiters scenario waits: REST long polls, legacy MCP
    /// `tasks/result` SSE streams, or websocket watches.
    #[arg(long, value_enum, default_value = "poll")]
    wait_form: waiters::WaitForm,
    /// How the waiters scenario settles its executions: all at once, or one at a time.
    #[arg(long, value_enum, default_value = "together")]
    wake: waiters::Wake,
    /// The waiters scenario's waits go over HTTP/2 (prior knowledge, as a
    /// proxy in front of the gateway would send them), many per connection.
    #[arg(long)]
    http2: bool,
    /// Interval between tasks/get polls in the mcp-task scenario.
    #[arg(long, default_value_t = 10)]
    poll_ms: u64,
    /// Upper bound on each scenario's running time.
    #[arg(long, default_value_t = 600)]
    max_seconds: u64,
    /// Postgres URL of the deployment's database: commits and WAL per execution.
    #[arg(long)]
    database_url: Option<String>,
    /// How long to let Postgres flush its statistics before reading them.
    #[arg(long, default_value_t = 11_000)]
    stats_settle_ms: u64,
    /// Baton processes to measure: gateway=PID,coordinator=PID,worker=PID.
    #[arg(long, value_parser = parse_pids)]
    pids: Option<Pids>,
    /// An admin API key of the project, for the webhooks scenario (it registers its receiver).
    #[arg(long, env = "BATON_BENCH_ADMIN_KEY", hide_env_values = true)]
    admin_key: Option<String>,
}

/// Where the deployment is and who the benchmark acts as.
#[derive(Clone)]
pub(crate) struct Target {
    pub http: reqwest::Client,
    /// `{http_url}/v1/orgs/{org}/projects/{project}/tool-executions`
    pub executions_url: String,
    /// `{http_url}/mcp/{gateway}`
    pub mcp_url: String,
    pub gateway_id: String,
    pub token: String,
    /// Distinguishes this run's idempotency keys from earlier runs'.
    pub run_id: String,
}

/// What every scenario is told.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub executions: usize,
    pub concurrency: usize,
    pub waiters: usize,
    pub poll: Duration,
    pub max_time: Duration,
    /// The waiters scenario's spread, wait form and settling.
    pub spread: waiters::Spread,
    pub wait_form: waiters::WaitForm,
    pub wake: waiters::Wake,
    pub http2: bool,
}

/// A scenario's table and the number of executions it completed, which the
/// probes divide by.
pub(crate) struct Outcome {
    pub table: report::Table,
    pub executions: usize,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.part {
        Some(Part::History(h)) => return history::run(h).await,
        Some(Part::Retention(r)) => return retention::run(r).await,
        Some(Part::Migrate(m)) => return migrate::run(m).await,
        None => {}
    }
    let (Some(http_url), Some(org), Some(project), Some(gateway), Some(token)) =
        (&args.http_url, &args.org, &args.project, &args.gateway, &args.token)
    else {
        anyhow::bail!("--http-url, --org, --project, --gateway and --token are required");
    };
    let settings = Settings {
        executions: args.executions.max(1),
        concurrency: args.concurrency.max(1),
        waiters: args.waiters.max(1),
        poll: Duration::from_millis(args.poll_ms.max(1)),
        max_time: Duration::from_secs(args.max_seconds.max(1)),
        spread: args.spread,
        wait_form: args.wait_form,
        wake: args.wake,
        http2: args.http2,
    };
    let base = http_url.trim_end_matches('/').to_owned();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(settings.concurrency.max(settings.waiters) + 16)
        .connect_timeout(Duration::from_secs(5))
        // reqwest's default TCP_USER_TIMEOUT (30 s) aborts a connection that
        // has waited longer than that for an answer, as a long poll does, when
        // a keepalive probe goes unanswered: in the waiters bench 1,100–1,900
        // of 10,000 polls died so, ETIMEDOUT at 30 s. The request's own
        // timeout bounds every wait here.
        .tcp_user_timeout(None)
        .tcp_nodelay(true)
        .build()?;
    let ready = http.get(format!("{base}/readyz")).timeout(Duration::from_secs(5)).send().await;
    match ready {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => anyhow::bail!("{base}/readyz answered {}", r.status()),
        Err(e) => anyhow::bail!("{base}/readyz unreachable: {e}"),
    }
    let mut suffix = [0u8; 6];
    getrandom::fill(&mut suffix).map_err(|e| anyhow::anyhow!("random run id: {e}"))?;
    let target = Arc::new(Target {
        http,
        executions_url: format!("{base}/v1/orgs/{org}/projects/{project}/tool-executions"),
        mcp_url: format!("{base}/mcp/{gateway}"),
        gateway_id: gateway.clone(),
        token: token.clone(),
        run_id: suffix.iter().map(|b| format!("{b:02x}")).collect(),
    });
    let task_target = match &args.task_http_url {
        Some(url) => Arc::new(Target {
            http: target.http.clone(),
            executions_url: target.executions_url.clone(),
            mcp_url: format!("{}/mcp/{gateway}", url.trim_end_matches('/')),
            gateway_id: target.gateway_id.clone(),
            token: target.token.clone(),
            run_id: target.run_id.clone(),
        }),
        None => target.clone(),
    };
    let pids = args.pids.map(|p| p.0).unwrap_or_default();
    let settle = Duration::from_millis(args.stats_settle_ms);
    let mut probe =
        probe::Probe::new(args.database_url.as_deref(), pids, settle).await.context("connecting to --database-url")?;

    println!(
        "baton bench: {base}  N={}  C={}  W={}  run={}",
        settings.executions, settings.concurrency, settings.waiters, target.run_id
    );
    if let Some(sc) = probe.synchronous_commit().await {
        println!("postgres synchronous_commit = {sc}");
    }
    let scenarios = match args.scenario {
        Scenario::All => vec![Scenario::RestBackground, Scenario::McpTask, Scenario::Foreground, Scenario::Waiters],
        one => vec![one],
    };
    for scenario in scenarios {
        let before = probe.before().await;
        let outcome = match scenario {
            Scenario::RestBackground => rest_background::run(target.clone(), settings).await,
            Scenario::McpTask => mcp_task::run(task_target.clone(), settings).await,
            Scenario::Foreground => foreground::run(target.clone(), settings).await,
            Scenario::Waiters => waiters::run(target.clone(), settings, &probe).await,
            Scenario::Webhooks => webhooks::run(target.clone(), settings, args.admin_key.as_deref()).await,
            Scenario::All => continue,
        };
        let mut table = outcome.table;
        probe.after(before, outcome.executions, &mut table).await;
        println!("\n{}", table.render());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `one(i)` for `i` in `0..n` on `c` concurrent tasks, starting no new
/// item once `deadline` has passed; returns every item's answer.
pub(crate) async fn drive<R, F, Fut>(n: usize, c: usize, deadline: Instant, one: F) -> Vec<R>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send,
    R: Send + 'static,
{
    let one = Arc::new(one);
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    for _ in 0..c.clamp(1, n.max(1)) {
        let (one, next) = (one.clone(), next.clone());
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || Instant::now() >= deadline {
                    break;
                }
                out.push(one(i).await);
            }
            out
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(items) => all.extend(items),
            Err(e) => eprintln!("baton bench: a load task ended abnormally: {e}"),
        }
    }
    all
}
