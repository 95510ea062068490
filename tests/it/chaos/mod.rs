//! Chaos: a sustained mixed load on a cluster of its own (two gateways, two
//! coordinators, two workers, a private Postgres and a private Redis) with tight
//! admission bounds, while one fault at a time hits it: kill -9 of a
//! coordinator, of a gateway and of a worker, a Redis restart, the loss of the
//! cluster's Redis keys and a Postgres restart. Counted from the tools' own
//! invocation counters and the database: nothing acknowledged is lost, nothing
//! runs more often than its attempts allow, no admission scope is ever seen over
//! its bound, no 5xx but 503, and how long each fault took to recover from.
//!
//! The load is `clients` concurrent clients, each starting one execution at a
//! time (REST with an Idempotency-Key, or MCP `tools/call` at 2026-07-28 as a
//! task or as the compatibility handle, through either gateway), retrying 429,
//! 503 and connection errors until acknowledged, then waiting for it to end,
//! and starting the next, until the last fault has been recovered from.
//!
//! MCP starts carry no Idempotency-Key: one retried after a lost answer may
//! create a second execution, counted as "created but never acknowledged".
//! Recovery is measured by probes of a tenant of its own (organization,
//! project, end user, worker), so a probe waits for service, not for a place
//! in the load's admission queue.
//!
//! The short form runs by default (150 clients, sleeps of 1-3 s, about a
//! minute); `BATON_CHAOS_FULL=1` runs the full form (1,000 clients, sleeps of
//! 1-20 s, about five minutes). Figures are printed (`-- --nocapture`) and
//! written to `figures.md` in the cluster's directory (and to
//! `$BATON_CHAOS_FIGURES` when set); every violated invariant is listed before
//! the test fails.
//!
//! `scale_out.rs` holds the scale-out form: the same load and checks on three
//! gateways, coordinators and workers over a Redis Cluster and a Postgres
//! read replica, with faults of their own (ignored by default; see there).

use crate::harness::{Cluster, Settings, random_suffix, worker_counts};
use crate::servers::{PrivatePostgres, PrivateRedis};
use anyhow::{Context as _, Result, anyhow};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

mod load;
mod report;
mod scale_out;
mod watch;

use load::*;
use watch::*;

/// The size of one run.
struct Form {
    name: &'static str,
    clients: usize,
    sleep_s: (f64, f64),
    warmup: Duration,
    /// Load in flight between a fault's recovery and the next fault.
    gap: Duration,
    /// How long clients may take to see their last executions end.
    settle: Duration,
    bounds: Bounds,
    worker_capacity: u32,
    /// How often an MCP task client calls `tasks/get`.
    task_poll: Duration,
}

#[derive(Clone, Copy)]
struct Bounds {
    principal: u64,
    project: u64,
    organization: u64,
    backlog: u64,
}

fn form() -> Form {
    if std::env::var("BATON_CHAOS_FULL").is_ok_and(|v| v == "1") {
        Form {
            name: "full",
            clients: 1_000,
            sleep_s: (1.0, 20.0),
            warmup: Duration::from_secs(15),
            gap: Duration::from_secs(20),
            settle: Duration::from_secs(180),
            bounds: Bounds { principal: 200, project: 320, organization: 340, backlog: 60 },
            worker_capacity: 128,
            task_poll: Duration::from_secs(2),
        }
    } else {
        Form {
            name: "short",
            clients: 150,
            sleep_s: (1.0, 3.0),
            warmup: Duration::from_secs(4),
            gap: Duration::from_secs(4),
            settle: Duration::from_secs(90),
            bounds: Bounds { principal: 30, project: 50, organization: 55, backlog: 10 },
            worker_capacity: 20,
            task_poll: Duration::from_secs(1),
        }
    }
}

/// Retry-After is honoured up to this long.
const RETRY_CAP: Duration = Duration::from_secs(2);
/// A probe that has not completed a round trip this long after its fault failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const OPEN: &str = "('pending','working','input_required')";
/// Worker id base names: the two load workers, and the one started after worker 1 is killed.
const LOAD_WORKERS: [&str; 3] = ["wk_load_a", "wk_load_b_killed", "wk_load_c"];

fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// Attempts one execution of `tool` may make: Demo.Fail {times: 1} fails once.
fn allowed_attempts(tool: &str) -> i64 {
    if tool == "Demo.Fail" { 2 } else { 1 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Surface {
    Rest,
    McpTask,
    McpCompat,
}

impl Surface {
    fn name(self) -> &'static str {
        match self {
            Surface::Rest => "REST",
            Surface::McpTask => "MCP task",
            Surface::McpCompat => "MCP compat handle",
        }
    }
}

/// xorshift64*, seeded from the OS: jitter and the load mix.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).expect("rng");
        Rng(u64::from_le_bytes(b) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `d` stretched by a random 0-50 %.
    fn jitter(&mut self, d: Duration) -> Duration {
        d.mul_f64(1.0 + self.unit() / 2.0)
    }
}

/// Everything seen on the client side.
#[derive(Default)]
struct Tally {
    /// Acknowledged executions: id → (tool, surface).
    acked: HashMap<String, (String, Surface)>,
    /// REST Idempotency-Key → the execution it was acknowledged with.
    rest_keys: HashMap<String, String>,
    /// A key acknowledged with two different executions.
    key_conflicts: Vec<String>,
    /// Answers by kind ("REST start 429", "MCP tasks/get unavailable", …).
    answers: BTreeMap<String, u64>,
    /// 5xx other than 503 (and MCP `internal` errors), with when and where.
    server_errors: Vec<String>,
    /// Their number per phase of the run, in order.
    server_errors_by_phase: Vec<(String, u64)>,
    /// Anything else no client expects.
    unexpected: Vec<String>,
    /// Terminal statuses as clients saw them.
    seen: BTreeMap<String, u64>,
    /// Retry-After asked by admission refusals, in ms: count, sum, max.
    retry_after_ms: (u64, u64, u64),
}

/// What the clients share.
struct Shared {
    http: reqwest::Client,
    gateways: Vec<String>,
    org: String,
    project: String,
    gateway_id: String,
    tokens: [String; 2],
    /// Base names of the workers a fault kills: only their executions may fail `owner_lost`.
    killed_workers: Vec<&'static str>,
    sleep_s: (f64, f64),
    task_poll: Duration,
    t0: Instant,
    /// `t0` as Unix milliseconds, to place database timestamps in the run.
    t0_unix_ms: i64,
    phase: Mutex<String>,
    /// When each phase began, in seconds since `t0`.
    timeline: Mutex<Vec<(f64, String)>>,
    /// Start no new executions.
    stop: AtomicBool,
    /// Stop waiting for anything.
    abandon: AtomicBool,
    tally: Mutex<Tally>,
}

impl Shared {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn count(&self, what: String) {
        *self.tally().answers.entry(what).or_default() += 1;
    }

    fn phase(&self) -> String {
        self.phase.lock().map(|p| p.clone()).unwrap_or_default()
    }

    fn when(&self) -> String {
        format!("t={:.1}s during {}", self.t0.elapsed().as_secs_f64(), self.phase())
    }

    fn server_error(&self, what: String) {
        let phase = self.phase();
        let line = format!("{}: {what}", self.when());
        let mut t = self.tally();
        t.server_errors.push(line);
        match t.server_errors_by_phase.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, n)) => *n += 1,
            None => t.server_errors_by_phase.push((phase, 1)),
        }
    }

    fn unexpected(&self, what: String) {
        let line = format!("{}: {what}", self.when());
        self.tally().unexpected.push(line);
    }

    fn set_phase(&self, phase: &str) {
        if let Ok(mut p) = self.phase.lock() {
            *p = phase.to_owned();
        }
        if let Ok(mut t) = self.timeline.lock() {
            t.push((self.t0.elapsed().as_secs_f64(), phase.to_owned()));
        }
    }

    /// The phase the run was in at `unix_ms`.
    fn phase_at(&self, unix_ms: i64) -> String {
        let at = (unix_ms - self.t0_unix_ms) as f64 / 1000.0;
        let timeline = self.timeline.lock().map(|t| t.clone()).unwrap_or_default();
        timeline.iter().rev().find(|(from, _)| *from <= at).map(|(_, p)| p.clone()).unwrap_or_default()
    }

    fn note_retry_after(&self, ms: u64) {
        let mut t = self.tally();
        let (n, sum, max) = t.retry_after_ms;
        t.retry_after_ms = (n + 1, sum + ms, max.max(ms));
    }

    /// The gateway after `gw`, to retry elsewhere.
    fn next_gateway(&self, gw: usize) -> usize {
        (gw + 1) % self.gateways.len()
    }

    fn rest_url(&self, gw: usize, path: &str) -> String {
        format!("http://{}/v1/orgs/{}/projects/{}/tool-executions{path}", self.gateways[gw], self.org, self.project)
    }
}

fn error_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect error"
    } else {
        "connection error"
    }
}

fn retry_after_secs(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers.get("retry-after")?.to_str().ok()?.trim().parse::<u64>().ok()
}

/// Retry-After, honoured up to `RETRY_CAP`.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    Some(Duration::from_secs(retry_after_secs(headers)?).min(RETRY_CAP))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_loses_nothing_and_runs_nothing_twice() {
    run(form()).await.expect("chaos run");
}

/// The admission bounds of `form` on top of `base`.
fn settings(form: &Form, base: Settings) -> Settings {
    let b = form.bounds;
    Settings {
        principal_concurrency: b.principal,
        project_concurrency: b.project,
        organization_concurrency: b.organization,
        backlog: b.backlog,
        ..base
    }
}

/// On a private server: the production default pool (the harness keeps it small for
/// the shared one). Every MCP call is handed over at once.
fn patch_private(c: &Cluster) -> Result<()> {
    patch_config(c, |v| {
        v["database"]["max_connections"] = 32.into();
        v["gateway"] = json!({"foreground_budget_ms": 0});
    })
}

/// A named load worker (each process appends its own suffix), so an execution
/// failed `owner_lost` can be traced to the worker that held it.
fn load_worker(form: &Form, name: &str) -> [(&'static str, String); 2] {
    [("BATON_WORKER__CAPACITY", form.worker_capacity.to_string()), ("BATON_WORKER__ID", name.to_owned())]
}

/// The probe tenant's worker.
fn probe_worker(token: String) -> [(&'static str, String); 3] {
    [("BATON_WORKER__TOKEN", token), ("BATON_WORKER__CAPACITY", "8".into()), ("BATON_WORKER__ID", "wk_probe".into())]
}

fn load_http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(4_096)
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(30))
        .build()?)
}

async fn run(form: Form) -> Result<()> {
    let started = Instant::now();
    crate::harness::install_crypto_provider();
    let home = std::env::temp_dir().join(format!("baton-chaos-{}", random_suffix()));
    std::fs::create_dir_all(&home)?;
    let pg = PrivatePostgres::start(&home).await.context("private postgres")?;
    let mut redis = PrivateRedis::start().await.context("private redis")?;
    let base = Settings { redis_url: Some(redis.url()), postgres_url: Some(pg.url()), ..Settings::default() };
    let mut c = Cluster::new(settings(&form, base)).await?;
    patch_private(&c)?;
    for _ in 0..2 {
        c.start_coordinator().await?;
    }
    for i in 0..2 {
        c.start_gateway(i).await?;
    }
    c.start_worker_with(0, &load_worker(&form, LOAD_WORKERS[0])).await?;
    c.start_worker_with(1, &load_worker(&form, LOAD_WORKERS[1])).await?;
    let http = load_http()?;
    let (probe_target, probe_worker_token) = probe_tenant(&c, &http).await?;
    // The probe tenant's worker dials coordinator 0, the one that is killed.
    c.start_worker_with(0, &probe_worker(probe_worker_token)).await?;
    println!("chaos ({} form): cluster in {}, postgres log {}", form.name, c.dir.display(), pg.log.display());

    let mut r = Run::start(&form, &c, &http, probe_target, 2, vec![LOAD_WORKERS[1]]).await?;
    let mut killed_worker_counts = BTreeMap::new();
    let faults = [
        "kill -9 coordinator 0, restart it",
        "kill -9 gateway 1, restart it",
        "kill -9 worker 1, start a new one",
        "restart redis (kill -9, empty)",
        "redis restarts from a snapshot of 1 s before",
        "pg_ctl restart -m fast",
    ];
    for (k, fault) in faults.into_iter().enumerate() {
        let t0 = r.begin(fault);
        let tag = format!("fault{k}");
        let probes = match k {
            0 => {
                c.coordinators[0].kill9();
                let _ = c.coordinators[0].child.wait().await;
                let probes = r.probes(t0, &tag);
                c.restart_coordinator(0).await?;
                probes
            }
            1 => {
                c.gateways[1].kill9();
                let _ = c.gateways[1].child.wait().await;
                let probes = r.probes(t0, &tag);
                c.restart_gateway(1, 1).await?;
                probes
            }
            2 => {
                // The killed worker's counter dies with it: read it last thing before.
                let counts = worker_counts(&http, &c.workers[1].addr).await?;
                c.workers[1].kill9();
                let _ = c.workers[1].child.wait().await;
                add_counts(&mut killed_worker_counts, &counts);
                let probes = r.probes(t0, &tag);
                c.start_worker_with(1, &load_worker(&form, LOAD_WORKERS[2])).await?;
                probes
            }
            3 => {
                redis.kill9().await;
                let probes = r.probes(t0, &tag);
                redis.start_again().await?;
                probes
            }
            4 => {
                // The admissions of the last second are lost, the rest (the
                // epoch too) comes back: a partial loss only the server's new
                // run id gives away.
                redis.snapshot().await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
                redis.restart_from_snapshot().await?;
                r.probes(t0, &tag)
            }
            _ => {
                pg.restart_fast().await?;
                r.probes(t0, &tag)
            }
        };
        r.end(fault, probes).await;
    }
    r.finish(&form, &c, started, &killed_worker_counts, "").await
}

/// A run under way: the load, what watches it, and each fault's recovery.
struct Run {
    s: Arc<Shared>,
    probe: Arc<Probe>,
    bounds: [i64; 4],
    /// How many workers serve the load.
    load_workers: usize,
    gap: Duration,
    recoveries: Vec<Recovery>,
    sampling_done: Arc<AtomicBool>,
    sampling: tokio::task::JoinHandle<Occupancy>,
    /// Every task of the load; each ends once `s.stop` (or `s.abandon`) is set.
    clients: Vec<tokio::task::JoinHandle<()>>,
    load_started: Instant,
}

impl Run {
    /// Probes the idle cluster, then starts the load and its sampler and lets it warm up.
    async fn start(
        form: &Form,
        c: &Cluster,
        http: &reqwest::Client,
        probe: Probe,
        load_workers: usize,
        killed_workers: Vec<&'static str>,
    ) -> Result<Run> {
        let s = Arc::new(Shared {
            http: http.clone(),
            gateways: c.gateways.iter().map(|g| g.addr.clone()).collect(),
            org: c.id.org_id.clone(),
            project: c.id.project_id.clone(),
            gateway_id: c.id.gateway_id.clone(),
            tokens: [c.id.user_token.clone(), c.id.other_user_token.clone()],
            killed_workers,
            sleep_s: form.sleep_s,
            task_poll: form.task_poll,
            t0: Instant::now(),
            t0_unix_ms: i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis())?,
            timeline: Mutex::new(vec![(0.0, "baseline".into())]),
            phase: Mutex::new("baseline".into()),
            stop: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            tally: Mutex::new(Tally::default()),
        });
        let probe = Arc::new(probe);
        let baseline = spawn_probes(&probe, Instant::now(), "baseline");
        let recoveries = vec![join_probes("baseline (no fault, no load)", baseline).await];

        let b = form.bounds;
        let bounds = [b.principal, b.project, b.organization, b.backlog].map(|n| n as i64);
        let sampling_done = Arc::new(AtomicBool::new(false));
        let sampling = sampler(c.database_url.clone(), s.clone(), bounds, sampling_done.clone());
        s.set_phase("warm-up");
        let load_started = Instant::now();
        let clients: Vec<_> = (0..form.clients).map(|i| tokio::spawn(client(s.clone(), i))).collect();
        tokio::time::sleep(form.warmup).await;
        Ok(Run {
            s,
            probe,
            bounds,
            load_workers,
            gap: form.gap,
            recoveries,
            sampling_done,
            sampling,
            clients,
            load_started,
        })
    }

    /// A fault begins now.
    fn begin(&self, fault: &str) -> Instant {
        self.s.set_phase(fault);
        Instant::now()
    }

    /// Probes through every gateway, timed from `t0`.
    fn probes(&self, t0: Instant, tag: &str) -> Probes {
        spawn_probes(&self.probe, t0, tag)
    }

    /// The fault's recovery, then load without a fault for the gap.
    async fn end(&mut self, fault: &str, probes: Probes) {
        self.recoveries.push(join_probes(fault, probes).await);
        self.s.set_phase(&format!("the gap after: {fault}"));
        tokio::time::sleep(self.gap).await;
    }
}
