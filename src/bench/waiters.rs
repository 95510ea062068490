//! Scenario `waiters`: W executions of `Demo.Sleep`, each followed by long
//! polls (`GET …/{id}?wait_ms=`) through the one gateway until it is terminal,
//! so that up to W polls are parked at once. Starts go through at most C at a
//! time. Reports wake-up latency (the terminal answer's arrival on this
//! machine's clock minus the execution's `finished_at`), the peak number of
//! parked polls, and — with `--pids gateway=…` — the gateway's resident
//! memory before, at that peak, at its highest, and after.

use super::probe::{Probe, rss_kib};
use super::report::Table;
use super::stats::{Errors, Failure, Samples};
use super::{Outcome, Settings, Target, drive, rest};
use baton_proto::coordinator::v1::ExecutionStatus;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// At most this many polls per execution.
const MAX_POLLS: usize = 100;
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

struct Done {
    wake_ms: f64,
    polls: usize,
}

struct Shared {
    target: Arc<Target>,
    starts: Semaphore,
    parked: AtomicUsize,
    seconds: f64,
    deadline: Instant,
}

async fn one(sh: &Shared, i: usize) -> Result<Done, Failure> {
    let t = &sh.target;
    let view = {
        let _permit = sh.starts.acquire().await.map_err(|_| Failure::GaveUp)?;
        let key = format!("bench-wait-{}-{i}", t.run_id);
        rest::start(t, "Demo.Sleep", json!({"seconds": sh.seconds}), &key).await?
    };
    let id = view.get("execution_id").and_then(|v| v.as_str()).ok_or(Failure::Shape("no execution_id"))?;
    for polls in 1..=MAX_POLLS {
        let left = sh.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        sh.parked.fetch_add(1, Ordering::Relaxed);
        let answer = rest::wait_once(t, id, (left.as_millis() as u64).clamp(1, rest::WAIT_MS)).await;
        sh.parked.fetch_sub(1, Ordering::Relaxed);
        let received_ms = rest::now_ms();
        let view = answer?;
        match rest::status(&view) {
            ExecutionStatus::Completed => {
                let finished = rest::time_ms(&view, "finished_at").ok_or(Failure::Shape("no finished_at"))?;
                return Ok(Done { wake_ms: (received_ms - finished) as f64, polls });
            }
            s if s.is_terminal() => return Err(Failure::Ended(s.name().to_owned())),
            _ => {}
        }
    }
    Err(Failure::GaveUp)
}

#[derive(Default)]
struct Memory {
    peak_parked: usize,
    rss_at_peak_parked: Option<u64>,
    rss_max: Option<u64>,
}

/// Samples parked polls and the gateway's RSS until `stop` or `deadline`.
async fn sample(sh: Arc<Shared>, gateway: Option<u32>, stop: Arc<AtomicBool>) -> Memory {
    let mut m = Memory::default();
    while !stop.load(Ordering::Relaxed) && Instant::now() < sh.deadline {
        let parked = sh.parked.load(Ordering::Relaxed);
        let rss = gateway.and_then(rss_kib);
        if parked > m.peak_parked {
            m.peak_parked = parked;
            m.rss_at_peak_parked = rss;
        }
        m.rss_max = m.rss_max.max(rss);
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    m
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

pub async fn run(target: Arc<Target>, s: Settings, probe: &Probe) -> Outcome {
    let gateway = probe.pid("gateway");
    let rss_before = gateway.and_then(rss_kib);
    let sh = Arc::new(Shared {
        target,
        starts: Semaphore::new(s.concurrency),
        parked: AtomicUsize::new(0),
        seconds: s.sleep_seconds,
        deadline: Instant::now() + s.max_time,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let sampler =
        baton_worker::supervise::spawn_supervised("waiters sampler", sample(sh.clone(), gateway, stop.clone()));
    let for_drive = sh.clone();
    let answers = drive(s.waiters, s.waiters, sh.deadline, move |i| {
        let sh = for_drive.clone();
        async move { one(&sh, i).await }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let memory = sampler.await.unwrap_or_default();
    let rss_after = gateway.and_then(rss_kib);

    let mut wake = Samples::default();
    let mut errors = Errors::default();
    let (mut ok, mut polls) = (0usize, 0usize);
    for answer in &answers {
        match answer {
            Ok(d) => {
                ok += 1;
                polls += d.polls;
                wake.push(d.wake_ms);
            }
            Err(f) => errors.add(f),
        }
    }
    let title = format!(
        "waiters  (W={} long polls on Demo.Sleep {}s, wait_ms ≤ {}, starts C={})",
        s.waiters,
        s.sleep_seconds,
        rest::WAIT_MS,
        s.concurrency
    );
    let mut table = Table::new(title);
    table.dist("finished_at → poll answered", &wake);
    table.value("completed", format!("{ok} of {} attempted", answers.len()));
    table.value("peak parked long polls", memory.peak_parked.to_string());
    if ok > 0 {
        table.value("long polls per execution", format!("{:.2}", polls as f64 / ok as f64));
    }
    table.value("gateway RSS before", mib(rss_before));
    table.value("gateway RSS at peak parked", mib(memory.rss_at_peak_parked));
    table.value("gateway RSS max during", mib(memory.rss_max));
    table.value("gateway RSS after", mib(rss_after));
    if let (Some(b), Some(p)) = (rss_before, memory.rss_at_peak_parked)
        && memory.peak_parked > 0
    {
        let per = (p.saturating_sub(b)) as f64 / memory.peak_parked as f64;
        table.value("gateway RSS growth / parked poll", format!("{per:.1} KiB"));
    }
    table.errors(&errors);
    Outcome { table, executions: ok }
}
