//! Scenario `waiters` ("Waiting at scale"): W waits parked at once through
//! one gateway, as long polls (`GET …/{id}?wait_ms=`, `--wait-form poll`),
//! legacy MCP `tasks/result` SSE streams (`--wait-form sse`) or websocket
//! watches (`GET …/{id}?delivery=websocket`, then the socket; `--wait-form ws`), on one
//! execution (`--spread one`) or spread over 1,000 (`--spread many`), then
//! woken all at once or one execution at a time (`--wake`). In phases, so
//! each number is measured in a quiet system:
//!
//! 1. start the executions (scheduled an hour ahead, so they wait without a
//!    worker); sample RSS (`--pids gateway=…,coordinator=…`);
//! 2. open the W polls and, once they are all sent, sample RSS again and CPU
//!    over a quiet window (CPU while parked: should be ~0);
//! 3. cancel every execution; each waiter's answer arrival on this machine's
//!    clock minus its execution's `finished_at` is its wake-up latency.
//!
//! A poll that times out (`wait_ms` ends) polls again, so a slow start never
//! loses a waiter. The process's file-descriptor limit is raised (soft to
//! hard) by `scripts/bench-waiters.sh`, which runs this on the cluster topology.

use super::probe::{Probe, cpu_ticks, rss_and_peak_kib};
use super::report::Table;
use super::stats::{Errors, Failure, Samples};
use super::watch::{self, Watched};
use super::{Outcome, Settings, Target, drive, mcp, rest};
use baton_proto::coordinator::v1::ExecutionStatus;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Executions of `--spread many`.
pub(super) const MANY: usize = 1_000;
/// Each poll's `wait_ms`: the gateway's default bound.
const WAIT_MS: u64 = 45_000;
/// Each watch's `timeout_seconds`: longer than a run.
const WATCH_SECONDS: u64 = 900;
/// Polls opened per batch, and the pause between batches (the listener's
/// accept backlog is finite).
const OPEN_BATCH: usize = 500;
const OPEN_PAUSE: Duration = Duration::from_millis(20);
/// After the last poll is sent, how long to let the gateway park it.
const SETTLE: Duration = Duration::from_secs(3);
/// The window CPU while parked is measured over, after which RSS parked is
/// read: several of the processes' heap trimming checks long, so it shows
/// what a parked gateway keeps, not the burst of opening (that is the peak,
/// read as well); shorter than `WAIT_MS`, so the first polls are still parked.
const QUIET: Duration = Duration::from_secs(20);
/// How long a shed waiter waits before it asks again.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Linux's USER_HZ: /proc/<pid>/stat counts CPU time in these.
const TICKS_PER_SECOND: f64 = 100.0;

/// How each waiter waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum WaitForm {
    /// REST long polls, `GET …/{id}?wait_ms=`.
    Poll,
    /// Legacy MCP `tasks/result` SSE streams, all on one session.
    Sse,
    /// Websocket watches, a socket each (always HTTP/1.1: the upgrade).
    Ws,
}

/// How the executions are settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Wake {
    /// Every execution cancelled at once (concurrency `-c`).
    Together,
    /// One cancel at a time, `PACE` apart: each settlement wakes its own
    /// waiters while the rest stay parked.
    OneByOne,
}

/// Waits per HTTP/2 connection with `--http2`: under the gateway's (hyper's
/// default) 200 concurrent streams per connection.
const STREAMS_PER_CONNECTION: usize = 190;

/// Kept-alive connections the watchers' offers leave open: an offer is one
/// short request, and a connection per watcher left idle beside its socket
/// would be counted as the watch's cost.
const OFFER_CONNECTIONS: usize = 64;

/// The targets the waiters use: `t` itself over HTTP/1.1 (a connection per
/// wait), with `http2` one HTTP/2 client per `STREAMS_PER_CONNECTION` waits,
/// and for watches a client that keeps at most `OFFER_CONNECTIONS` idle.
fn wait_targets(t: &Arc<Target>, waiters: usize, form: WaitForm, http2: bool) -> Result<Vec<Arc<Target>>, Failure> {
    let client = |http: reqwest::ClientBuilder| -> Result<Arc<Target>, Failure> {
        // No TCP_USER_TIMEOUT, as for the bench's own client (`bench::run`).
        let http = http.tcp_nodelay(true).tcp_user_timeout(None).build().map_err(|e| Failure::transport(&e))?;
        Ok(Arc::new(Target { http, ..(**t).clone() }))
    };
    if form == WaitForm::Ws {
        return Ok(vec![client(reqwest::Client::builder().pool_max_idle_per_host(OFFER_CONNECTIONS))?]);
    }
    if !http2 {
        return Ok(vec![t.clone()]);
    }
    (0..waiters.div_ceil(STREAMS_PER_CONNECTION))
        .map(|_| client(reqwest::Client::builder().http2_prior_knowledge()))
        .collect()
}

/// The pause between cancels of `--wake one-by-one`.
const PACE: Duration = Duration::from_millis(10);

/// Where the waiters wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Spread {
    /// All W on one execution.
    One,
    /// W over 1,000 executions.
    Many,
}

/// What one process looked like in each phase.
#[derive(Clone, Copy, Default)]
struct Sample {
    rss_kib: Option<u64>,
    peak_kib: Option<u64>,
    ticks: Option<u64>,
}

fn sample(pid: Option<u32>) -> Sample {
    let (rss_kib, peak_kib) = pid.map_or((None, None), rss_and_peak_kib);
    Sample { rss_kib, peak_kib, ticks: pid.and_then(cpu_ticks) }
}

/// One long-polling waiter: polls `id` until it has ended; when the answer arrived.
async fn poll(t: &Target, id: &str, parked: &AtomicUsize, deadline: Instant) -> Result<i64, Failure> {
    loop {
        if Instant::now() >= deadline {
            return Err(Failure::GaveUp);
        }
        parked.fetch_add(1, Ordering::Relaxed);
        let answer = rest::wait_once(t, id, WAIT_MS).await;
        parked.fetch_sub(1, Ordering::Relaxed);
        let received_ms = baton_proto::clock::now_ms();
        let view = match answer {
            // Shed (an overloaded coordinator, a wait bound): come back, as a good client does.
            Err(Failure::Http { status: 429 | 503, .. }) => {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            other => other?,
        };
        match rest::status(&view) {
            ExecutionStatus::Cancelled | ExecutionStatus::Completed => return Ok(received_ms),
            s if s.is_terminal() => return Err(Failure::Ended(s.name().to_owned())),
            _ => {}
        }
    }
}

/// One `tasks/result` waiter on `session`: when its answer arrived.
async fn stream(t: &Target, session: &str, id: &str, parked: &AtomicUsize, deadline: Instant) -> Result<i64, Failure> {
    loop {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let mcp::Legacy { answer, received_ms, streamed } =
            mcp::legacy_result(t, session, id, timeout, || _ = parked.fetch_add(1, Ordering::Relaxed)).await?;
        // The bench cancels every execution: the answer it waits for is the
        // error naming the cancellation. A shed request (`retryAfterMs`) is
        // sent again; anything else is a failure, counted.
        let data = answer.pointer("/error/data");
        if data.and_then(|d| d.get("code")).and_then(serde_json::Value::as_str) == Some("cancelled") {
            return Ok(received_ms);
        }
        if data.and_then(|d| d.get("retryAfterMs")).is_some() && Instant::now() < deadline {
            if streamed {
                parked.fetch_sub(1, Ordering::Relaxed);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
            continue;
        }
        return match answer.pointer("/error/code").and_then(serde_json::Value::as_i64) {
            Some(code) => Err(Failure::Rpc { status: 200, code }),
            None => Err(Failure::Shape("tasks/result answered before the cancellation")),
        };
    }
}

/// One websocket watcher: asks for an offer and reads the socket until the
/// execution's terminal view; when it arrived.
async fn watcher(t: &Target, id: &str, parked: &AtomicUsize, deadline: Instant) -> Result<i64, Failure> {
    loop {
        if Instant::now() >= deadline {
            return Err(Failure::GaveUp);
        }
        let offer = match rest::watch_offer(t, id, WATCH_SECONDS).await {
            Err(Failure::Http { status: 429 | 503, .. }) => {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            other => other?,
        };
        let mut open = false;
        let watched = watch::run(&offer, || {
            open = true;
            parked.fetch_add(1, Ordering::Relaxed);
        })
        .await;
        if open {
            parked.fetch_sub(1, Ordering::Relaxed);
        }
        match watched {
            Ok(Watched::Terminal { received_ms }) => return Ok(received_ms),
            // The watch ended first, or the upgrade was shed: a new offer.
            Ok(Watched::Ended) | Err(Failure::Http { status: 429 | 503, .. }) => {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(f) => return Err(f),
        }
    }
}

/// When each execution finished, read after the fact.
async fn finished_at(t: &Target, ids: &[String]) -> Result<std::collections::HashMap<String, i64>, Failure> {
    let mut out = std::collections::HashMap::with_capacity(ids.len());
    for id in ids {
        let view = rest::wait_once(t, id, 0).await?;
        let at = rest::time_ms(&view, "finished_at").ok_or(Failure::Shape("no finished_at"))?;
        out.insert(id.clone(), at);
    }
    Ok(out)
}

/// Starts `n` executions scheduled an hour ahead, so they wait (pending)
/// without a worker until the bench cancels them: the settlement that wakes
/// the waiters is then the coordinator's own, and no tool load disturbs the
/// figures. Their ids.
async fn start(t: &Arc<Target>, n: usize, c: usize, deadline: Instant) -> Result<Vec<String>, Failure> {
    let run_at = time::OffsetDateTime::from(baton_proto::clock::now()) + time::Duration::hours(1);
    let run_at = run_at.format(&time::format_description::well_known::Rfc3339).map_err(|_| Failure::Shape("run_at"))?;
    let t2 = t.clone();
    let started = drive(n, c, deadline, move |i| {
        let (t, run_at) = (t2.clone(), run_at.clone());
        async move {
            let key = format!("bench-waiters-{}-{i}", t.run_id);
            let body =
                json!({"gateway_id": t.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "w"}, "run_at": run_at});
            let req = t.http.post(&t.executions_url).header("Idempotency-Key", key).bearer_auth(&t.token).json(&body);
            let resp = req.send().await.map_err(|e| Failure::transport(&e))?;
            let status = resp.status().as_u16();
            let view: serde_json::Value = resp.json().await.map_err(|e| Failure::transport(&e))?;
            if status != 202 {
                return Err(Failure::Http { status, code: None });
            }
            let id = view.get("execution_id").and_then(|v| v.as_str()).ok_or(Failure::Shape("no execution_id"))?;
            Ok::<_, Failure>(id.to_owned())
        }
    })
    .await;
    started.into_iter().collect()
}

async fn cancel_one(t: &Target, id: &str) -> Result<(), Failure> {
    let req = t.http.post(format!("{}/{id}/cancel", t.executions_url)).bearer_auth(&t.token).json(&json!({}));
    let resp = req.send().await.map_err(|e| Failure::transport(&e))?;
    match resp.status().as_u16() {
        s if s < 300 => Ok(()),
        status => Err(Failure::Http { status, code: None }),
    }
}

async fn cancel(t: &Arc<Target>, ids: &[String], wake: Wake, c: usize, deadline: Instant) -> Vec<Result<(), Failure>> {
    if wake == Wake::OneByOne {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(cancel_one(t, id).await);
            tokio::time::sleep(PACE).await;
        }
        return out;
    }
    let (t, ids) = (t.clone(), Arc::new(ids.to_vec()));
    drive(ids.len(), c, deadline, move |i| {
        let (t, ids) = (t.clone(), ids.clone());
        async move { cancel_one(&t, &ids[i]).await }
    })
    .await
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

/// Bytes of RSS per parked wait between two samples.
fn per_wait(before: Sample, parked: Sample, waits: usize) -> String {
    match (before.rss_kib, parked.rss_kib) {
        (Some(b), Some(p)) if waits > 0 => {
            let bytes = (p as f64 - b as f64) * 1024.0 / waits as f64;
            format!("{bytes:.0} B ({:.2} KiB)", bytes / 1024.0)
        }
        _ => "n/a".into(),
    }
}

/// CPU while parked, as a share of one core.
fn busy(from: Sample, to: Sample, over: Duration) -> String {
    match (from.ticks, to.ticks) {
        (Some(a), Some(b)) => {
            let seconds = b.saturating_sub(a) as f64 / TICKS_PER_SECOND;
            format!(
                "{:.1} % of a core ({seconds:.2} s over {:.0} s)",
                100.0 * seconds / over.as_secs_f64(),
                over.as_secs_f64()
            )
        }
        _ => "n/a".into(),
    }
}

pub(super) async fn run(target: Arc<Target>, s: Settings, probe: &Probe) -> Outcome {
    let (gateway, coordinator) = (probe.pid("gateway"), probe.pid("coordinator"));
    let deadline = Instant::now() + s.max_time;
    let executions = match s.spread {
        Spread::One => 1,
        Spread::Many => MANY.min(s.waiters),
    };
    let form = match s.wait_form {
        WaitForm::Poll => format!("long polls, wait_ms={WAIT_MS}"),
        WaitForm::Sse => "legacy tasks/result SSE streams on one session".to_owned(),
        WaitForm::Ws => format!("websocket watches, timeout_seconds={WATCH_SECONDS}"),
    };
    let woken = match s.wake {
        Wake::Together => "all cancelled at once".to_owned(),
        Wake::OneByOne => format!("cancelled one at a time, {} ms apart", PACE.as_millis()),
    };
    // A watch is an upgraded HTTP/1.1 connection whatever `--http2` says.
    let http2 = s.http2 && s.wait_form != WaitForm::Ws;
    let over = if http2 {
        format!("HTTP/2, {STREAMS_PER_CONNECTION} per connection")
    } else {
        "HTTP/1.1, a connection each".to_owned()
    };
    let title = format!(
        "waiters  (W={} {form} over {over}, on {executions} execution{}, {woken})",
        s.waiters,
        if executions == 1 { "" } else { "s" }
    );
    let mut table = Table::new(title);
    let mut errors = Errors::default();
    let ids = match start(&target, executions, s.concurrency, deadline).await {
        Ok(ids) => ids,
        Err(f) => {
            errors.add(&f);
            table.errors(&errors);
            return Outcome { table, executions: 0 };
        }
    };
    let before = (sample(gateway), sample(coordinator));

    let session = match s.wait_form {
        WaitForm::Poll | WaitForm::Ws => None,
        WaitForm::Sse => match mcp::legacy_session(&target).await {
            Ok(session) => Some(Arc::new(session)),
            Err(f) => {
                errors.add(&f);
                table.errors(&errors);
                return Outcome { table, executions: 0 };
            }
        },
    };
    let targets = match wait_targets(&target, s.waiters, s.wait_form, http2) {
        Ok(t) => t,
        Err(f) => {
            errors.add(&f);
            table.errors(&errors);
            return Outcome { table, executions: 0 };
        }
    };
    let parked = Arc::new(AtomicUsize::new(0));
    let mut waiters = JoinSet::new();
    for i in 0..s.waiters {
        let t = targets[(i / STREAMS_PER_CONNECTION) % targets.len()].clone();
        let (id, parked, session) = (ids[i % ids.len()].clone(), parked.clone(), session.clone());
        let form = s.wait_form;
        waiters.spawn(async move {
            let arrived = match (form, session) {
                (WaitForm::Ws, _) => watcher(&t, &id, &parked, deadline).await,
                (_, Some(session)) => stream(&t, &session, &id, &parked, deadline).await,
                (_, None) => poll(&t, &id, &parked, deadline).await,
            };
            arrived.map(|at| (id, at))
        });
        if (i + 1) % OPEN_BATCH == 0 {
            tokio::time::sleep(OPEN_PAUSE).await;
        }
    }
    // Every poll sent (bounded, so a lost one cannot stall the run), then a
    // moment for the gateway to park the last of them.
    let all_sent = Instant::now() + s.max_time / 4;
    while parked.load(Ordering::Relaxed) < s.waiters && Instant::now() < all_sent.min(deadline) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(SETTLE).await;
    let parked_at = (sample(gateway), sample(coordinator));
    let parked_count = parked.load(Ordering::Relaxed);
    tokio::time::sleep(QUIET).await;
    let quiet_end = (sample(gateway), sample(coordinator));

    for cancelled in cancel(&target, &ids, s.wake, s.concurrency, deadline).await {
        if let Err(f) = cancelled {
            errors.add(&f);
        }
    }
    let mut arrivals = Vec::with_capacity(s.waiters);
    while let Some(joined) = waiters.join_next().await {
        match joined {
            Ok(Ok(arrived)) => arrivals.push(arrived),
            Ok(Err(f)) => errors.add(&f),
            Err(_) => errors.add(&Failure::GaveUp),
        }
    }
    let after = (sample(gateway), sample(coordinator));
    let mut wake = Samples::default();
    let mut ok = 0usize;
    match finished_at(&target, &ids).await {
        Ok(finished) => {
            for (id, at) in arrivals {
                if let Some(f) = finished.get(&id) {
                    ok += 1;
                    wake.push((at - f) as f64);
                }
            }
        }
        Err(f) => errors.add(&f),
    }

    table.dist("finished_at → answer received (wake-up)", &wake);
    table.value("answered", format!("{ok} of {}", s.waiters));
    table.value("parked when measured", parked_count.to_string());
    for (name, b, p, a) in
        [("gateway", before.0, quiet_end.0, after.0), ("coordinator", before.1, quiet_end.1, after.1)]
    {
        table.value(format!("{name} RSS before parking"), mib(b.rss_kib));
        table.value(format!("{name} RSS peak while parking"), mib(p.peak_kib));
        table.value(format!("{name} RSS parked"), mib(p.rss_kib));
        table.value(format!("{name} RSS after wake-up"), mib(a.rss_kib));
        table.value(format!("{name} RSS per parked wait"), per_wait(b, p, parked_count));
    }
    table.value("gateway CPU while parked", busy(parked_at.0, quiet_end.0, QUIET));
    table.value("coordinator CPU while parked", busy(parked_at.1, quiet_end.1, QUIET));
    table.errors(&errors);
    Outcome { table, executions: ok }
}
