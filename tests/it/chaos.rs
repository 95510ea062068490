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

use crate::harness::{Cluster, Settings, random_suffix};
use crate::servers::{PrivatePostgres, PrivateRedis};
use anyhow::{Context as _, Result, anyhow};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

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
    gateways: [String; 2],
    org: String,
    project: String,
    gateway_id: String,
    tokens: [String; 2],
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

/// What a start attempt came to.
enum Answer {
    Acked(String),
    /// Retry after this long; `true`: through the other gateway.
    Retry(Duration, bool),
    /// An answer no retry changes (reported as unexpected).
    GiveUp,
}

async fn rest_start(s: &Shared, gw: usize, token: &str, body: &Value, key: &str) -> Answer {
    let sent =
        s.http.post(s.rest_url(gw, "")).bearer_auth(token).header("Idempotency-Key", key).json(body).send().await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            s.count(format!("REST start: {}", error_kind(&e)));
            return Answer::Retry(Duration::from_millis(200), true);
        }
    };
    let status = resp.status().as_u16();
    let wait = retry_after(resp.headers());
    if status == 429
        && let Some(secs) = retry_after_secs(resp.headers())
    {
        s.note_retry_after(secs * 1000);
    }
    let Ok(bytes) = resp.bytes().await else {
        s.count("REST start: body lost".into());
        return Answer::Retry(Duration::from_millis(200), true);
    };
    s.count(format!("REST start: {status}"));
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    match status {
        200..=202 => match v["execution_id"].as_str() {
            Some(id) => Answer::Acked(id.to_owned()),
            None => {
                s.unexpected(format!("REST start {status} without an execution id: {v}"));
                Answer::Retry(Duration::from_millis(500), false)
            }
        },
        429 => Answer::Retry(wait.unwrap_or(Duration::from_secs(1)), false),
        503 => Answer::Retry(wait.unwrap_or(Duration::from_secs(1)), true),
        500..=599 => {
            s.server_error(format!("REST start via gateway {gw} (key {key}): {status} {v}"));
            Answer::Retry(Duration::from_millis(500), true)
        }
        _ => {
            s.unexpected(format!("REST start via gateway {gw} (key {key}): {status} {v}"));
            Answer::GiveUp
        }
    }
}

/// One JSON-RPC exchange with a gateway's MCP endpoint.
struct McpReply {
    status: u16,
    retry_after: Option<Duration>,
    /// The JSON-RPC response, from a JSON or an SSE body.
    message: Option<Value>,
}

/// `_meta` of a 2026-07-28 request; `tasks`: declare the tasks extension.
fn meta(tasks: bool) -> Value {
    let capabilities = if tasks { json!({"extensions": {TASKS_EXTENSION: {}}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "baton-chaos", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

async fn mcp_post(
    s: &Shared,
    gw: usize,
    token: &str,
    method: &str,
    name: &str,
    params: Value,
) -> Result<McpReply, reqwest::Error> {
    let id = 1;
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = s
        .http
        .post(format!("http://{}/mcp/{}", s.gateways[gw], s.gateway_id))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .json(&body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers());
    let text = resp.text().await?;
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(text.trim()))
        .find_map(|d| serde_json::from_str::<Value>(d).ok().filter(|v| v["id"] == id));
    Ok(McpReply { status, retry_after, message })
}

/// What an MCP exchange came to.
enum Rpc {
    Result(Value),
    /// Saturated or unavailable: retry after this long; `true`: elsewhere.
    Retry(Duration, bool),
    /// Counted already; retry later.
    Failed,
}

fn classify(s: &Shared, what: &str, gw: usize, sent: Result<McpReply, reqwest::Error>) -> Rpc {
    let reply = match sent {
        Ok(r) => r,
        Err(e) => {
            s.count(format!("MCP {what}: {}", error_kind(&e)));
            return Rpc::Retry(Duration::from_millis(200), true);
        }
    };
    let wait = reply.retry_after.unwrap_or(Duration::from_secs(1));
    let code = reply.message.as_ref().and_then(|m| m["error"]["data"]["code"].as_str()).map(str::to_owned);
    s.count(format!("MCP {what}: HTTP {} {}", reply.status, code.as_deref().unwrap_or("ok")));
    if reply.status >= 500 && reply.status != 503 {
        s.server_error(format!("MCP {what} via gateway {gw}: HTTP {} {:?}", reply.status, reply.message));
        return Rpc::Failed;
    }
    if reply.status == 503 {
        return Rpc::Retry(wait, true);
    }
    let Some(message) = reply.message else {
        s.unexpected(format!("MCP {what} via gateway {gw}: HTTP {} without a JSON-RPC response", reply.status));
        return Rpc::Failed;
    };
    if let Some(result) = message.get("result") {
        return Rpc::Result(result.clone());
    }
    if code.as_deref() == Some("capacity_exceeded")
        && let Some(ms) = message["error"]["data"]["retryAfterMs"].as_u64()
    {
        s.note_retry_after(ms);
    }
    match code.as_deref() {
        // Admission, or the gateway's bound on parked waits: both ask to come back.
        Some("capacity_exceeded" | "too_many_waits") => Rpc::Retry(wait, false),
        Some("unavailable") => Rpc::Retry(wait, true),
        Some("internal") => {
            s.server_error(format!("MCP {what} via gateway {gw}: {message}"));
            Rpc::Failed
        }
        _ => {
            s.unexpected(format!("MCP {what} via gateway {gw}: HTTP {} {message}", reply.status));
            Rpc::Failed
        }
    }
}

async fn mcp_start(s: &Shared, gw: usize, token: &str, surface: Surface, tool: &str, args: &Value) -> Answer {
    let params = json!({"name": tool, "arguments": args, "_meta": meta(surface == Surface::McpTask)});
    let sent = mcp_post(s, gw, token, "tools/call", tool, params).await;
    match classify(s, "tools/call", gw, sent) {
        Rpc::Result(r) => {
            let id = match surface {
                Surface::McpTask => r["taskId"].as_str().filter(|_| r["resultType"] == "task"),
                _ => r["structuredContent"]["execution_id"].as_str(),
            };
            match id {
                Some(id) => Answer::Acked(id.to_owned()),
                None => {
                    s.unexpected(format!("MCP tools/call ({}) answered without an execution: {r}", surface.name()));
                    Answer::GiveUp
                }
            }
        }
        Rpc::Retry(d, elsewhere) => Answer::Retry(d, elsewhere),
        Rpc::Failed => Answer::Retry(Duration::from_millis(500), true),
    }
}

/// Waits for `id` to end, the way its surface's client would; the status, or
/// `None` once the run is abandoned.
async fn until_terminal(
    s: &Shared,
    rng: &mut Rng,
    surface: Surface,
    mut gw: usize,
    token: &str,
    id: &str,
) -> Option<String> {
    while !s.abandon.load(Ordering::Relaxed) {
        let pause = match surface {
            Surface::Rest => {
                let sent = s.http.get(s.rest_url(gw, &format!("/{id}?wait_ms=15000"))).bearer_auth(token).send().await;
                match sent {
                    Err(e) => {
                        s.count(format!("REST wait: {}", error_kind(&e)));
                        gw ^= 1;
                        Duration::from_millis(200)
                    }
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let wait = retry_after(resp.headers()).unwrap_or(Duration::from_secs(1));
                        let v: Value = resp.json().await.unwrap_or(Value::Null);
                        s.count(format!("REST wait: {status}"));
                        match status {
                            // The gateway's bound on parked waits (`too_many_waits`).
                            429 => wait,
                            200 => match v["status"].as_str() {
                                Some(st) if is_terminal(st) => return Some(st.to_owned()),
                                _ => Duration::from_millis(20),
                            },
                            503 => {
                                gw ^= 1;
                                Duration::from_millis(500)
                            }
                            500..=599 => {
                                s.server_error(format!("REST wait for {id} via gateway {gw}: {status} {v}"));
                                Duration::from_millis(500)
                            }
                            _ => {
                                s.unexpected(format!("REST wait for {id} via gateway {gw}: {status} {v}"));
                                Duration::from_secs(1)
                            }
                        }
                    }
                }
            }
            Surface::McpTask => {
                let params = json!({"taskId": id, "_meta": meta(true)});
                let sent = mcp_post(s, gw, token, "tasks/get", id, params).await;
                match classify(s, "tasks/get", gw, sent) {
                    Rpc::Result(r) => match r["status"].as_str() {
                        Some(st) if is_terminal(st) => return Some(st.to_owned()),
                        Some(_) => s.task_poll,
                        None => {
                            s.unexpected(format!("MCP tasks/get for {id} without a status: {r}"));
                            Duration::from_secs(1)
                        }
                    },
                    Rpc::Retry(d, elsewhere) => {
                        gw ^= usize::from(elsewhere);
                        d
                    }
                    Rpc::Failed => Duration::from_millis(500),
                }
            }
            Surface::McpCompat => {
                let args = json!({"execution_id": id, "wait_ms": 15000});
                let params = json!({"name": "Baton_GetToolExecution", "arguments": args, "_meta": meta(false)});
                let sent = mcp_post(s, gw, token, "tools/call", "Baton_GetToolExecution", params).await;
                match classify(s, "Baton_GetToolExecution", gw, sent) {
                    Rpc::Result(r) => match r["structuredContent"]["state"].as_str() {
                        Some(st) if is_terminal(st) => return Some(st.to_owned()),
                        Some(_) => Duration::from_millis(20),
                        None => {
                            s.unexpected(format!("Baton_GetToolExecution for {id} without a state: {r}"));
                            Duration::from_secs(1)
                        }
                    },
                    Rpc::Retry(d, elsewhere) => {
                        gw ^= usize::from(elsewhere);
                        d
                    }
                    Rpc::Failed => Duration::from_millis(500),
                }
            }
        };
        tokio::time::sleep(rng.jitter(pause)).await;
    }
    None
}

/// One client: executions one after another until told to stop.
async fn client(s: Arc<Shared>, i: usize) {
    let mut rng = Rng::new();
    let surface = match i % 4 {
        0 | 1 => Surface::Rest,
        2 => Surface::McpTask,
        _ => Surface::McpCompat,
    };
    let token = s.tokens[(i / 4) % 2].clone();
    tokio::time::sleep(Duration::from_secs(1).mul_f64(rng.unit())).await;
    let mut n = 0usize;
    while !s.stop.load(Ordering::Relaxed) {
        n += 1;
        let mut gw = (i + n) % 2;
        let key = format!("chaos-{i}-{n}");
        let (tool, args) = match rng.next() % 3 {
            0 => ("Demo.Echo", json!({"text": key})),
            1 => {
                let (lo, hi) = s.sleep_s;
                let seconds = ((lo + (hi - lo) * rng.unit()) * 10.0).round() / 10.0;
                ("Demo.Sleep", json!({"seconds": seconds}))
            }
            _ => ("Demo.Fail", json!({"retryable": true, "times": 1})),
        };
        let body = json!({"gateway_id": s.gateway_id, "tool_name": tool, "input": args});
        let id = loop {
            if s.abandon.load(Ordering::Relaxed) {
                return;
            }
            let answer = match surface {
                Surface::Rest => rest_start(&s, gw, &token, &body, &key).await,
                _ => mcp_start(&s, gw, &token, surface, tool, &args).await,
            };
            match answer {
                Answer::Acked(id) => break Some(id),
                Answer::Retry(d, elsewhere) => {
                    gw ^= usize::from(elsewhere);
                    tokio::time::sleep(rng.jitter(d)).await;
                }
                Answer::GiveUp => break None,
            }
        };
        let Some(id) = id else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        {
            let mut t = s.tally();
            t.acked.insert(id.clone(), (tool.to_owned(), surface));
            if surface == Surface::Rest {
                let first = t.rest_keys.entry(key.clone()).or_insert_with(|| id.clone()).clone();
                if first != id {
                    t.key_conflicts.push(format!("key {key}: {first} and {id}"));
                }
            }
        }
        if let Some(status) = until_terminal(&s, &mut rng, surface, gw, &token, &id).await {
            *s.tally().seen.entry(status).or_default() += 1;
        }
    }
}

/// The probe tenant: its own organization, project, gateway id, end user and
/// worker, so a probe measures service, not a place in the load's admission queue.
struct Probe {
    http: reqwest::Client,
    gateways: [String; 2],
    org: String,
    project: String,
    gateway_id: String,
    token: String,
}

/// From `t0` until a fresh Demo.Echo started through gateway `gw` is seen
/// completed; `None` after `PROBE_TIMEOUT`.
async fn probe(p: Arc<Probe>, gw: usize, t0: Instant, tag: String) -> Option<Duration> {
    let url = format!("http://{}/v1/orgs/{}/projects/{}/tool-executions", p.gateways[gw], p.org, p.project);
    let pause = || tokio::time::sleep(Duration::from_millis(100));
    for round in 0.. {
        let key = format!("probe-{tag}-{gw}-{round}");
        let body = json!({"gateway_id": p.gateway_id, "tool_name": "Demo.Echo", "input": {"text": key}});
        let id = loop {
            if t0.elapsed() > PROBE_TIMEOUT {
                return None;
            }
            let sent = p.http.post(&url).bearer_auth(&p.token).header("Idempotency-Key", &key).json(&body).send().await;
            if let Ok(resp) = sent
                && resp.status().as_u16() == 202
                && let Ok(v) = resp.json::<Value>().await
                && let Some(id) = v["execution_id"].as_str()
            {
                break id.to_owned();
            }
            pause().await;
        };
        loop {
            if t0.elapsed() > PROBE_TIMEOUT {
                return None;
            }
            let sent = p.http.get(format!("{url}/{id}?wait_ms=2000")).bearer_auth(&p.token).send().await;
            let status = match sent {
                Ok(resp) if resp.status().is_success() => {
                    resp.json::<Value>().await.ok().and_then(|v| v["status"].as_str().map(str::to_owned))
                }
                _ => None,
            };
            match status.as_deref() {
                Some("completed") => return Some(t0.elapsed()),
                Some("failed" | "cancelled") => break,
                Some(_) => {}
                None => pause().await,
            }
        }
    }
    None
}

/// The highest non-terminal counts seen per admission scope of the load's project.
#[derive(Default)]
struct Occupancy {
    max: [i64; 4],
    /// Stretches of time a scope was seen over its bound.
    over: Vec<Excess>,
    samples: u64,
}

struct Excess {
    scope: &'static str,
    bound: i64,
    /// When it was first seen over, and during which phase.
    from: String,
    seconds: f64,
    peak: i64,
}

const SCOPES: [&str; 4] = ["principal", "project", "organization", "backlog"];

/// Samples the load project's admission scopes from Postgres every ~20 ms
/// (reconnecting across the Postgres restart) until `done`.
fn sampler(url: String, s: Arc<Shared>, bounds: [i64; 4], done: Arc<AtomicBool>) -> tokio::task::JoinHandle<Occupancy> {
    tokio::spawn(async move {
        use sqlx::Connection as _;
        let sql = format!(
            "SELECT \
               (SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM executions \
                  WHERE project_id = $1 AND status IN {OPEN} GROUP BY user_id) AS per_user), \
               (SELECT COUNT(*) FROM executions WHERE project_id = $1 AND status IN {OPEN}), \
               (SELECT COUNT(*) FROM executions WHERE org_id = $2 AND status IN {OPEN}), \
               (SELECT COUNT(*) FROM executions WHERE project_id = $1 AND status = 'pending' AND started_at IS NULL)"
        );
        let mut o = Occupancy::default();
        let mut open: [Option<(Instant, Excess)>; 4] = Default::default();
        while !done.load(Ordering::Relaxed) {
            let Ok(mut db) = sqlx::PgConnection::connect(&url).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            while !done.load(Ordering::Relaxed) {
                let row = sqlx::query_as::<_, (i64, i64, i64, i64)>(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(&s.project)
                    .bind(&s.org)
                    .fetch_one(&mut db)
                    .await;
                let Ok(row) = row else { break };
                o.samples += 1;
                let seen = [row.0, row.1, row.2, row.3];
                for (k, n) in seen.into_iter().enumerate() {
                    o.max[k] = o.max[k].max(n);
                    match (&mut open[k], n > bounds[k]) {
                        (Some((_, e)), true) => e.peak = e.peak.max(n),
                        (None, true) => {
                            let e =
                                Excess { scope: SCOPES[k], bound: bounds[k], from: s.when(), seconds: 0.0, peak: n };
                            open[k] = Some((Instant::now(), e));
                        }
                        (Some(_), false) => {
                            if let Some((since, mut e)) = open[k].take() {
                                e.seconds = since.elapsed().as_secs_f64();
                                o.over.push(e);
                            }
                        }
                        (None, false) => {}
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        for (since, mut e) in open.into_iter().flatten() {
            e.seconds = since.elapsed().as_secs_f64();
            o.over.push(e);
        }
        o
    })
}

/// Invocations per tool from one worker's /metrics.
async fn worker_counts(http: &reqwest::Client, addr: &str) -> Result<BTreeMap<String, u64>> {
    let text = http.get(format!("http://{addr}/metrics")).send().await?.text().await?;
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("baton_worker_tool_invocations_total{tool=\"")
            && let Some((tool, n)) = rest.split_once("\"} ")
        {
            counts.insert(tool.to_owned(), n.trim().parse::<u64>()?);
        }
    }
    Ok(counts)
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (tool, n) in from {
        *into.entry(tool.clone()).or_default() += n;
    }
}

/// Rewrites the cluster's configuration (JSON is YAML) before any role starts.
fn patch_config(c: &Cluster, patch: impl FnOnce(&mut Value)) -> Result<()> {
    let mut config: Value = serde_json::from_slice(&std::fs::read(&c.config)?)?;
    patch(&mut config);
    std::fs::write(&c.config, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

fn text(v: &Value, key: &str) -> Result<String> {
    v[key].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no {key} in {v}"))
}

async fn probe_tenant(c: &Cluster, http: &reqwest::Client) -> Result<(Probe, String)> {
    let org = text(&c.admin(&["create-org", "--name", "probe"]).await?, "id")?;
    let project = text(&c.admin(&["create-project", "--org", &org, "--name", "probe"]).await?, "id")?;
    let gateway_id = text(&c.admin(&["create-gateway", "--project", &project, "--name", "probe"]).await?, "id")?;
    let token = text(
        &c.admin(&["create-end-user-token", "--gateway", &gateway_id, "--user", "probe@example.com"]).await?,
        "token",
    )?;
    let worker_token = text(&c.admin(&["create-worker-token", "--project", &project]).await?, "token")?;
    let gateways = [c.gateways[0].addr.clone(), c.gateways[1].addr.clone()];
    Ok((Probe { http: http.clone(), gateways, org, project, gateway_id, token }, worker_token))
}

/// One fault and how long each gateway took to serve a fresh round trip after it.
struct Recovery {
    fault: String,
    via: [Option<Duration>; 2],
}

fn spawn_probes(p: &Arc<Probe>, t0: Instant, tag: &str) -> [tokio::task::JoinHandle<Option<Duration>>; 2] {
    [0, 1].map(|gw| tokio::spawn(probe(p.clone(), gw, t0, tag.to_owned())))
}

async fn join_probes(fault: &str, probes: [tokio::task::JoinHandle<Option<Duration>>; 2]) -> Recovery {
    let [a, b] = probes;
    let (a, b) = tokio::join!(a, b);
    Recovery { fault: fault.to_owned(), via: [a.ok().flatten(), b.ok().flatten()] }
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "not recovered".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_loses_nothing_and_runs_nothing_twice() {
    run(form()).await.expect("chaos run");
}

async fn run(form: Form) -> Result<()> {
    let started = Instant::now();
    crate::harness::install_crypto_provider();
    let home = std::env::temp_dir().join(format!("baton-chaos-{}", random_suffix()));
    std::fs::create_dir_all(&home)?;
    let pg = PrivatePostgres::start(&home).await.context("private postgres")?;
    let mut redis = PrivateRedis::start().await.context("private redis")?;
    let b = form.bounds;
    let settings = Settings {
        principal_concurrency: b.principal,
        project_concurrency: b.project,
        organization_concurrency: b.organization,
        backlog: b.backlog,
        redis_url: Some(redis.url()),
        postgres_url: Some(pg.url()),
        ..Settings::default()
    };
    let mut c = Cluster::new(settings).await?;
    patch_config(&c, |v| {
        // A private server: the production default pool (the harness keeps it small for
        // the shared one). Every MCP call is handed over at once.
        v["database"]["max_connections"] = 32.into();
        v["gateway"] = json!({"foreground_budget_ms": 0});
    })?;
    // Named workers (each process appends its own suffix), so an execution
    // failed `owner_lost` can be traced to the worker that held it.
    let worker = |name: &str| {
        [("BATON_WORKER__CAPACITY", form.worker_capacity.to_string()), ("BATON_WORKER__ID", name.to_owned())]
    };
    for _ in 0..2 {
        c.start_coordinator().await?;
    }
    for i in 0..2 {
        c.start_gateway(i).await?;
    }
    c.start_worker_with(0, &worker(LOAD_WORKERS[0])).await?;
    c.start_worker_with(1, &worker(LOAD_WORKERS[1])).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(4_096)
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(30))
        .build()?;
    let (probe_target, probe_worker_token) = probe_tenant(&c, &http).await?;
    let probe_target = Arc::new(probe_target);
    // The probe tenant's worker dials coordinator 0, the one that is killed.
    let probe_worker = [
        ("BATON_WORKER__TOKEN", probe_worker_token),
        ("BATON_WORKER__CAPACITY", "8".into()),
        ("BATON_WORKER__ID", "wk_probe".into()),
    ];
    c.start_worker_with(0, &probe_worker).await?;
    println!("chaos ({} form): cluster in {}, postgres log {}", form.name, c.dir.display(), pg.log.display());

    let s = Arc::new(Shared {
        http: http.clone(),
        gateways: [c.gateways[0].addr.clone(), c.gateways[1].addr.clone()],
        org: c.id.org_id.clone(),
        project: c.id.project_id.clone(),
        gateway_id: c.id.gateway_id.clone(),
        tokens: [c.id.user_token.clone(), c.id.other_user_token.clone()],
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
    let mut recoveries = Vec::new();
    let baseline = spawn_probes(&probe_target, Instant::now(), "baseline");
    recoveries.push(join_probes("baseline (no fault, no load)", baseline).await);

    let bounds = [b.principal, b.project, b.organization, b.backlog].map(|n| n as i64);
    let sampling_done = Arc::new(AtomicBool::new(false));
    let sampling = sampler(c.database_url.clone(), s.clone(), bounds, sampling_done.clone());
    s.set_phase("warm-up");
    let load_started = Instant::now();
    let clients: Vec<_> = (0..form.clients).map(|i| tokio::spawn(client(s.clone(), i))).collect();
    tokio::time::sleep(form.warmup).await;

    let mut killed_worker_counts = BTreeMap::new();
    let faults = [
        "kill -9 coordinator 0, restart it",
        "kill -9 gateway 1, restart it",
        "kill -9 worker 1, start a new one",
        "restart redis (kill -9, empty)",
        "delete the cluster's redis keys",
        "pg_ctl restart -m fast",
    ];
    for (k, fault) in faults.into_iter().enumerate() {
        s.set_phase(fault);
        let tag = format!("fault{k}");
        let t0 = Instant::now();
        let probes = match k {
            0 => {
                c.coordinators[0].kill9();
                let _ = c.coordinators[0].child.wait().await;
                let probes = spawn_probes(&probe_target, t0, &tag);
                c.restart_coordinator(0).await?;
                probes
            }
            1 => {
                c.gateways[1].kill9();
                let _ = c.gateways[1].child.wait().await;
                let probes = spawn_probes(&probe_target, t0, &tag);
                c.restart_gateway(1, 1).await?;
                probes
            }
            2 => {
                // The killed worker's counter dies with it: read it last thing before.
                let counts = worker_counts(&http, &c.workers[1].addr).await?;
                c.workers[1].kill9();
                let _ = c.workers[1].child.wait().await;
                add_counts(&mut killed_worker_counts, &counts);
                let probes = spawn_probes(&probe_target, t0, &tag);
                c.start_worker_with(1, &worker(LOAD_WORKERS[2])).await?;
                probes
            }
            3 => {
                redis.kill9().await;
                let probes = spawn_probes(&probe_target, t0, &tag);
                redis.start_again().await?;
                probes
            }
            4 => {
                let client = redis::Client::open(redis.url())?;
                let mut con = client.get_multiplexed_async_connection().await?;
                let keys: Vec<String> =
                    redis::cmd("KEYS").arg(format!("{}:*", c.redis_prefix)).query_async(&mut con).await?;
                for chunk in keys.chunks(500) {
                    let _: i64 = redis::cmd("DEL").arg(chunk).query_async(&mut con).await?;
                }
                spawn_probes(&probe_target, t0, &tag)
            }
            _ => {
                pg.restart_fast().await?;
                spawn_probes(&probe_target, t0, &tag)
            }
        };
        recoveries.push(join_probes(fault, probes).await);
        s.set_phase(&format!("the gap after: {fault}"));
        tokio::time::sleep(form.gap).await;
    }

    // Drain: no new executions; clients wait for their last ones to end.
    s.set_phase("drain");
    s.stop.store(true, Ordering::Relaxed);
    let load_time = load_started.elapsed();
    let all_clients = futures_util::future::join_all(clients);
    tokio::pin!(all_clients);
    if tokio::time::timeout(form.settle, &mut all_clients).await.is_err() {
        s.abandon.store(true, Ordering::Relaxed);
        all_clients.await;
    }
    // Executions created but never acknowledged (an MCP start retried after a
    // connection error carries no key) still run; give them time to end.
    let settled = crate::harness::eventually(Duration::from_secs(60), "every execution to end", || async {
        let open = c.scalar(&format!("SELECT COUNT(*) FROM executions WHERE status IN {OPEN}")).await?;
        Ok((open == 0).then_some(()))
    })
    .await;
    sampling_done.store(true, Ordering::Relaxed);
    let occupancy = sampling.await?;

    // The tools' own counters: live workers now, the killed one as read before kill -9.
    let mut invocations = killed_worker_counts.clone();
    for w in &c.workers {
        if w.child.id().is_some() {
            add_counts(&mut invocations, &worker_counts(&http, &w.addr).await?);
        }
    }
    let mut db = c.db().await?;
    let executions: Vec<Row> =
        sqlx::query_as("SELECT id, project_id, tool_name, status, failure_reason, finished_at FROM executions")
            .fetch_all(&mut db)
            .await?;
    let attempts: Vec<(String, i64, String, Option<i64>)> =
        sqlx::query_as("SELECT execution_id, attempt, worker_id, success FROM attempts ORDER BY execution_id, attempt")
            .fetch_all(&mut db)
            .await?;

    let tally = std::mem::take(&mut *s.tally());
    let report = Report::new(&s, &tally, &executions, &attempts, &invocations, &killed_worker_counts);
    let mut out = String::new();
    let _ = writeln!(out, "## Baton chaos run: {} form\n", form.name);
    let _ = writeln!(
        out,
        "{} clients in flight (REST with Idempotency-Key 50 %, MCP 2026-07-28 tasks 25 %, MCP compatibility handle \
         25 %; two end users; both gateways), Demo.Echo / Demo.Sleep {}-{} s / Demo.Fail {{retryable, times: 1}} in \
         equal parts. Bounds: principal {}, project {}, organization {}, backlog {}; 2 workers of capacity {}. \
         Load ran {:.0} s; the whole test {:.0} s.\n",
        form.clients,
        form.sleep_s.0,
        form.sleep_s.1,
        b.principal,
        b.project,
        b.organization,
        b.backlog,
        form.worker_capacity,
        load_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    report.write(&mut out, &tally);
    let _ = writeln!(out, "\n| admission scope | bound | max non-terminal observed ({} samples) |", occupancy.samples);
    let _ = writeln!(out, "| --- | --- | --- |");
    for k in 0..4 {
        let _ = writeln!(out, "| {} | {} | {} |", SCOPES[k], bounds[k], occupancy.max[k]);
    }
    for e in &occupancy.over {
        let _ = writeln!(
            out,
            "- {} over its bound of {} for {:.2} s (peak {}), from {}",
            e.scope, e.bound, e.seconds, e.peak, e.from
        );
    }
    let _ = writeln!(out, "\n| fault | recovered via gateway 0 | via gateway 1 |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for r in &recoveries {
        let _ = writeln!(out, "| {} | {} | {} |", r.fault, secs(r.via[0]), secs(r.via[1]));
    }
    let _ = writeln!(out, "\n| client-side answer | count |");
    let _ = writeln!(out, "| --- | --- |");
    for (what, n) in &tally.answers {
        let _ = writeln!(out, "| {what} | {n} |");
    }
    if let Err(e) = &settled {
        let _ = writeln!(out, "\nthe run did not settle: {e}");
    }
    println!("{out}");
    std::fs::write(c.dir.join("figures.md"), &out)?;
    if let Ok(path) = std::env::var("BATON_CHAOS_FIGURES") {
        std::fs::write(path, &out)?;
    }

    let mut failures = Vec::new();
    if !report.lost.is_empty() {
        failures.push(format!("{} acknowledged executions lost", report.lost.len()));
    }
    if !report.over_allowance.is_empty() {
        failures.push(format!("{} executions invoked more often than attempts allow", report.over_allowance.len()));
    }
    for (tool, t) in &report.tools {
        if t.invocations > t.allowed || t.invocations > t.attempts {
            failures.push(format!(
                "{tool}: {} invocations for {} allowed and {} attempt records",
                t.invocations, t.allowed, t.attempts
            ));
        }
    }
    for (worker, n) in &report.owner_lost_by_worker {
        if worker != LOAD_WORKERS[1] {
            failures.push(format!("{n} executions failed owner_lost on {worker}, which was never killed"));
        }
    }
    if !tally.server_errors.is_empty() {
        failures.push(format!("{} answers were 5xx other than 503", tally.server_errors.len()));
    }
    if !tally.key_conflicts.is_empty() {
        failures.push(format!("{} Idempotency-Keys acknowledged with two executions", tally.key_conflicts.len()));
    }
    for k in 0..4 {
        if occupancy.max[k] > bounds[k] {
            failures.push(format!("{} seen at {} non-terminal, bound {}", SCOPES[k], occupancy.max[k], bounds[k]));
        }
    }
    for r in &recoveries {
        if !r.via.iter().all(Option::is_some) {
            failures.push(format!("{}: not recovered within {PROBE_TIMEOUT:?}", r.fault));
        }
    }
    if let Err(e) = settled {
        failures.push(e.to_string());
    }
    assert!(failures.is_empty(), "chaos ({} form), see {}:\n{}", form.name, c.dir.display(), failures.join("\n"));
    Ok(())
}

#[derive(Default)]
struct ToolFigures {
    executions: i64,
    allowed: u64,
    attempts: u64,
    invocations: u64,
    killed_worker: u64,
}

/// An execution as the database has it: id, project, tool, status, failure reason, finished at.
type Row = (String, String, String, String, Option<String>, Option<i64>);

/// What the database and the counters say once the run settled.
struct Report {
    acked_by_surface: BTreeMap<Surface, usize>,
    terminal: usize,
    outcomes: BTreeMap<String, usize>,
    lost: Vec<String>,
    unacked: usize,
    unacked_open: usize,
    over_allowance: Vec<String>,
    /// Executions failed `owner_lost`, by the base name of the worker of their last attempt.
    owner_lost_by_worker: BTreeMap<String, usize>,
    /// Those of workers never killed, by the phase of the run in which they failed.
    owner_lost_unkilled_by_phase: Vec<(String, usize)>,
    /// Acknowledged executions' outcomes per tool.
    tool_outcomes: BTreeMap<String, BTreeMap<String, usize>>,
    tools: BTreeMap<String, ToolFigures>,
    probe_executions: usize,
}

impl Report {
    fn new(
        s: &Shared,
        tally: &Tally,
        executions: &[Row],
        attempts: &[(String, i64, String, Option<i64>)],
        invocations: &BTreeMap<String, u64>,
        killed: &BTreeMap<String, u64>,
    ) -> Report {
        let rows: HashMap<&str, (&str, &str, &str, Option<&str>)> = executions
            .iter()
            .map(|(id, project, tool, status, reason, _)| {
                (id.as_str(), (project.as_str(), tool.as_str(), status.as_str(), reason.as_deref()))
            })
            .collect();
        let mut acked_by_surface = BTreeMap::new();
        let mut terminal = 0;
        let mut outcomes = BTreeMap::new();
        let mut tool_outcomes: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        let mut lost = Vec::new();
        for (id, (_, surface)) in &tally.acked {
            *acked_by_surface.entry(*surface).or_default() += 1;
            match rows.get(id.as_str()) {
                Some((_, tool, status, reason)) if is_terminal(status) => {
                    terminal += 1;
                    let outcome = match reason {
                        Some(r) => format!("{status} ({r})"),
                        None => (*status).to_owned(),
                    };
                    *tool_outcomes.entry((*tool).to_owned()).or_default().entry(outcome.clone()).or_default() += 1;
                    *outcomes.entry(outcome).or_default() += 1;
                }
                Some((_, _, status, _)) => lost.push(format!("{id}: still {status}")),
                None => lost.push(format!("{id}: missing")),
            }
        }
        let load_rows = executions.iter().filter(|e| e.1 == s.project);
        let unacked: Vec<_> = load_rows.filter(|e| !tally.acked.contains_key(&e.0)).collect();
        let unacked_open = unacked.iter().filter(|e| !is_terminal(&e.3)).count();
        let mut last_worker: HashMap<&str, &str> = HashMap::new();
        for (id, _, worker, _) in attempts {
            last_worker.insert(id.as_str(), worker.split('.').next().unwrap_or_default());
        }
        let mut owner_lost_by_worker = BTreeMap::new();
        let mut owner_lost_unkilled_by_phase: Vec<(String, usize)> = Vec::new();
        for (id, _, _, _, reason, finished_at) in executions {
            if reason.as_deref() == Some("owner_lost") {
                let worker = last_worker.get(id.as_str()).copied().unwrap_or("(no attempt)");
                *owner_lost_by_worker.entry(worker.to_owned()).or_default() += 1;
                if worker != LOAD_WORKERS[1] {
                    let phase = s.phase_at(finished_at.unwrap_or_default());
                    match owner_lost_unkilled_by_phase.iter_mut().find(|(p, _)| *p == phase) {
                        Some((_, n)) => *n += 1,
                        None => owner_lost_unkilled_by_phase.push((phase, 1)),
                    }
                }
            }
        }
        let order: Vec<String> =
            s.timeline.lock().map(|t| t.iter().map(|(_, p)| p.clone()).collect()).unwrap_or_default();
        owner_lost_unkilled_by_phase.sort_by_key(|(p, _)| order.iter().position(|o| o == p));
        let mut per_execution: HashMap<&str, (i64, i64, bool)> = HashMap::new();
        for (id, _, _, success) in attempts {
            let e = per_execution.entry(id.as_str()).or_default();
            // An attempt after a successful one would be a second invocation.
            e.2 |= e.1 > 0;
            e.0 += 1;
            e.1 += i64::from(*success == Some(1));
        }
        let mut over_allowance = Vec::new();
        let mut tools: BTreeMap<String, ToolFigures> = BTreeMap::new();
        for (id, _, tool, _, _, _) in executions {
            let t = tools.entry(tool.clone()).or_default();
            t.executions += 1;
            t.allowed += allowed_attempts(tool) as u64;
            let (n, ok, after_success) = per_execution.get(id.as_str()).copied().unwrap_or_default();
            t.attempts += n as u64;
            if n > allowed_attempts(tool) || ok > 1 || after_success {
                over_allowance.push(format!("{id} ({tool}): {n} attempts, {ok} successful"));
            }
        }
        for (tool, n) in invocations {
            let t = tools.entry(tool.clone()).or_default();
            t.invocations = *n;
            t.killed_worker = killed.get(tool).copied().unwrap_or(0);
        }
        let probe_executions = executions.iter().filter(|e| e.1 != s.project).count();
        Report {
            acked_by_surface,
            terminal,
            outcomes,
            lost,
            unacked: unacked.len(),
            unacked_open,
            over_allowance,
            owner_lost_by_worker,
            owner_lost_unkilled_by_phase,
            tool_outcomes,
            tools,
            probe_executions,
        }
    }

    fn write(&self, out: &mut String, tally: &Tally) {
        let acked: usize = self.acked_by_surface.values().sum();
        let by_surface: Vec<String> = self.acked_by_surface.iter().map(|(s, n)| format!("{} {n}", s.name())).collect();
        let outcomes: Vec<String> = self.outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
        let invocations: u64 = self.tools.values().map(|t| t.invocations).sum();
        let allowed: u64 = self.tools.values().map(|t| t.allowed).sum();
        let attempts: u64 = self.tools.values().map(|t| t.attempts).sum();
        let answers = |pred: &dyn Fn(&str) -> bool| -> u64 {
            tally.answers.iter().filter(|(k, _)| pred(k)).map(|(_, n)| n).sum()
        };
        let rejected = answers(&|k| k == "REST start: 429" || k.ends_with(" capacity_exceeded"));
        let waits_refused = answers(&|k| k == "REST wait: 429" || k.ends_with(" too_many_waits"));
        let unavailable = answers(&|k| k.ends_with(" 503") || k.ends_with(" unavailable"));
        let broken = answers(&|k| k.ends_with("error") || k.ends_with("timeout") || k.ends_with("body lost"));
        let _ = writeln!(out, "| figure | value |");
        let _ = writeln!(out, "| --- | --- |");
        let _ = writeln!(out, "| executions acknowledged (202 or task/handle) | {acked} ({}) |", by_surface.join(", "));
        let _ = writeln!(out, "| reached terminal | {} ({}) |", self.terminal, outcomes.join(", "));
        let _ = writeln!(out, "| lost (acknowledged, then missing or not terminal) | {} |", self.lost.len());
        let lost_by: Vec<String> = self.owner_lost_by_worker.iter().map(|(w, n)| format!("{n} held by {w}")).collect();
        let _ = writeln!(out, "| failed owner_lost, by the worker that held them | {} |", lost_by.join(", "));
        let by_phase: Vec<String> =
            self.owner_lost_unkilled_by_phase.iter().map(|(p, n)| format!("{n} during {p}")).collect();
        let _ = writeln!(
            out,
            "| of those, held by a worker never killed, by when they failed | {} |",
            if by_phase.is_empty() { "none".to_owned() } else { by_phase.join("; ") }
        );
        let _ = writeln!(
            out,
            "| created but never acknowledged (MCP retries carry no key) | {} ({} not terminal) |",
            self.unacked, self.unacked_open
        );
        let _ = writeln!(
            out,
            "| invoked twice | {} (executions over their attempt allowance; {invocations} tool invocations ≤ \
             {allowed} allowed; {attempts} attempt records) |",
            self.over_allowance.len()
        );
        let by_phase: Vec<String> =
            tally.server_errors_by_phase.iter().map(|(p, n)| format!("{n} during {p}")).collect();
        let _ = writeln!(
            out,
            "| 5xx other than 503 (and MCP `internal`) | {} {} |",
            tally.server_errors.len(),
            if by_phase.is_empty() { String::new() } else { format!("({})", by_phase.join("; ")) }
        );
        let _ = writeln!(out, "| other unexpected answers | {} |", tally.unexpected.len());
        let _ =
            writeln!(out, "| one Idempotency-Key acknowledged with two executions | {} |", tally.key_conflicts.len());
        let (n, sum, max) = tally.retry_after_ms;
        let _ = writeln!(
            out,
            "| starts refused by admission (429 / capacity_exceeded) | {rejected} (Retry-After asked: mean {:.1} s, max \
             {:.1} s; clients wait at most {} s) |",
            sum as f64 / n.max(1) as f64 / 1000.0,
            max as f64 / 1000.0,
            RETRY_CAP.as_secs()
        );
        let _ = writeln!(out, "| waits refused by the gateway's bound (429 too_many_waits) | {waits_refused} |");
        let _ = writeln!(out, "| 503 / unavailable answers | {unavailable} |");
        let _ = writeln!(out, "| connection errors and timeouts | {broken} |");
        let seen: Vec<String> = tally.seen.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let _ = writeln!(out, "| terminal statuses seen by clients | {} |", seen.join(", "));
        let _ = writeln!(out, "| probe executions (own tenant, not counted above) | {} |", self.probe_executions);
        let _ = writeln!(
            out,
            "\n| tool | executions (incl. probes) | allowed invocations | attempt records | tool invocations \
             (of which the killed worker's, read before kill -9) |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for (tool, t) in &self.tools {
            let _ = writeln!(
                out,
                "| {tool} | {} | {} | {} | {} ({}) |",
                t.executions, t.allowed, t.attempts, t.invocations, t.killed_worker
            );
        }
        let _ = writeln!(out, "\n| tool | outcomes of acknowledged executions |");
        let _ = writeln!(out, "| --- | --- |");
        for (tool, outcomes) in &self.tool_outcomes {
            let list: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
            let _ = writeln!(out, "| {tool} | {} |", list.join(", "));
        }
        for line in self.lost.iter().take(50) {
            let _ = writeln!(out, "- lost: {line}");
        }
        for line in self.over_allowance.iter().take(50) {
            let _ = writeln!(out, "- over allowance: {line}");
        }
        for line in tally.server_errors.iter().take(50) {
            let _ = writeln!(out, "- server error: {line}");
        }
        for line in tally.unexpected.iter().take(50) {
            let _ = writeln!(out, "- unexpected: {line}");
        }
        for line in tally.key_conflicts.iter().take(50) {
            let _ = writeln!(out, "- key conflict: {line}");
        }
    }
}
