//! The measured cases: every history filter alone, the common pairs, and
//! offsets from the first page to deep ones; each read exactly as the
//! coordinator runs it (`Store::history_page`, `history_count`, and the
//! detail's three reads), timed one after another so the figures are latency,
//! not throughput.

use super::mix::{self, RETENTION};
use baton_coordinator::domain::{ExecutionId, FailureReason, Millis, Status};
use baton_coordinator::store::{HistoryFilter, HistoryRead, Store};
use std::time::{Duration, Instant};

/// The page size the API uses when the caller names none.
pub(super) const LIMIT: u32 = 100;
pub(super) const OFFSETS: [u32; 4] = [0, 1_000, 10_000, 100_000];

/// One named filter.
pub(super) struct Case {
    pub name: String,
    pub filter: HistoryFilter,
}

/// The filters, with values chosen from the seeded mix: the busiest tool,
/// toolkit and user (the largest result sets of their kind), a quiet user,
/// both outcomes, a rare failure reason, a one-day window and windows
/// holding most of the project.
pub(super) fn cases(now: Millis) -> Vec<Case> {
    let tools = mix::tools();
    let (kit, name) = tools[0];
    let tool = format!("{kit}.{name}");
    let base = HistoryFilter { project_id: mix::PROJECT.into(), ..Default::default() };
    let day_from = now - RETENTION / 2;
    let day_to = day_from + 24 * 60 * 60 * 1000;
    let with = |name: &str, f: &dyn Fn(&mut HistoryFilter)| {
        let mut filter = base.clone();
        f(&mut filter);
        Case { name: name.into(), filter }
    };
    vec![
        with("none", &|_| {}),
        with("tool_name", &|f| f.tool_name = Some(tool.clone())),
        with("toolkit_name", &|f| f.toolkit_name = Some(kit.into())),
        with("user_id (busiest)", &|f| f.user_id = Some(mix::user(0))),
        with("user_id (quiet)", &|f| f.user_id = Some(mix::user(5_000))),
        with("outcome=success", &|f| f.status = Some(Status::Completed)),
        with("outcome=failure", &|f| f.status = Some(Status::Failed)),
        with("failure_reason=owner_lost", &|f| f.failure_reason = Some(FailureReason::OwnerLost)),
        with("start_time..end_time (1 day)", &|f| {
            f.created_from = Some(day_from);
            f.created_before = Some(day_to);
        }),
        with("start_time (last hour)", &|f| f.created_from = Some(now - 60 * 60 * 1000)),
        with("start_time (last 6 days)", &|f| f.created_from = Some(now - RETENTION + 24 * 60 * 60 * 1000)),
        with("end_time (older than 1 day)", &|f| f.created_before = Some(now - 24 * 60 * 60 * 1000)),
        with("tool + outcome=failure", &|f| {
            f.tool_name = Some(tool.clone());
            f.status = Some(Status::Failed);
        }),
        with("toolkit + outcome=success", &|f| {
            f.toolkit_name = Some(kit.into());
            f.status = Some(Status::Completed);
        }),
        with("user + 1 day", &|f| {
            f.user_id = Some(mix::user(0));
            f.created_from = Some(day_from);
            f.created_before = Some(day_to);
        }),
        with("tool + 1 day", &|f| {
            f.tool_name = Some(tool.clone());
            f.created_from = Some(day_from);
            f.created_before = Some(day_to);
        }),
        with("outcome=failure + 1 day", &|f| {
            f.status = Some(Status::Failed);
            f.created_from = Some(day_from);
            f.created_before = Some(day_to);
        }),
        with("tool + failure_reason=tool_error", &|f| {
            f.tool_name = Some(tool.clone());
            f.failure_reason = Some(FailureReason::ToolError);
        }),
    ]
}

/// Latencies of one case, in milliseconds, sorted.
pub(super) struct Timings {
    pub ms: Vec<f64>,
    /// What the last read returned: rows of a page, or the count.
    pub result: u64,
}

impl Timings {
    pub(super) fn quantile(&self, q: f64) -> f64 {
        if self.ms.is_empty() {
            return f64::NAN;
        }
        let i = ((self.ms.len() as f64 * q).ceil() as usize).clamp(1, self.ms.len()) - 1;
        self.ms[i]
    }
}

/// Runs `read` up to `samples` times (at least 5, and no more once `budget`
/// is spent), after one unmeasured warm-up.
pub(super) async fn time<F, Fut>(samples: usize, budget: Duration, mut read: F) -> anyhow::Result<Timings>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<u64>>,
{
    let mut result = read(0).await?;
    let started = Instant::now();
    let mut ms = Vec::with_capacity(samples);
    for i in 0..samples.max(1) {
        if i >= 5 && started.elapsed() > budget {
            break;
        }
        let t = Instant::now();
        result = read(i + 1).await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    Ok(Timings { ms, result })
}

pub(super) async fn page(store: &Store, f: &HistoryFilter, now: Millis, offset: u32) -> anyhow::Result<u64> {
    Ok(store.history_page(f, now, LIMIT, offset).await?.len() as u64)
}

pub(super) async fn count(store: &Store, f: &HistoryFilter, now: Millis) -> anyhow::Result<u64> {
    Ok(store.history_count(f, now).await?)
}

/// The detail route's reads: the caller's credential joined with the run,
/// then its event log and its attempts.
pub(super) async fn detail(store: &Store, token_hash: &[u8], id: &ExecutionId) -> anyhow::Result<u64> {
    let (_, record) =
        store.credential_with_execution(token_hash, Some(id)).await?.ok_or_else(|| anyhow::anyhow!("no credential"))?;
    anyhow::ensure!(record.is_some(), "execution {id} missing");
    let events = store.list_events(id).await?;
    let attempts = store.list_attempts(id).await?;
    Ok((events.len() + attempts.len()) as u64)
}

/// The scans of a plan in one line: each scan node with its index, and the
/// heap fetches of index-only scans (e.g. `Index Only Scan using x (heap 0)`).
pub(super) fn plan_summary(plan: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in plan.lines() {
        let t = line.trim_start().trim_start_matches("->").trim();
        if let Some(n) = t.strip_prefix("Heap Fetches:") {
            if let Some(last) = parts.last_mut() {
                last.push_str(&format!(" (heap {})", n.trim()));
            }
            continue;
        }
        if let Some(w) = t.strip_prefix("Workers Launched:") {
            parts.push(format!("{} workers", w.trim()));
        }
        // Plan nodes end in their cost: "Index Only Scan using x on executions  (cost=…)".
        let Some((node, _)) = t.split_once("  (") else { continue };
        if node.contains(" Scan") || node.ends_with("Sort") {
            // Drop the table (and alias): every scan here is of `executions`.
            let node = node.split(" on executions").next().unwrap_or(node);
            parts.push(node.replace("Parallel ", "parallel "));
        }
    }
    if parts.is_empty() { plan.lines().next().unwrap_or("-").to_owned() } else { parts.join(" + ") }
}

pub(super) async fn explain(store: &Store, f: &HistoryFilter, now: Millis, read: HistoryRead) -> String {
    match store.history_explain(f, now, read).await {
        Ok(plan) => plan,
        Err(e) => format!("(no plan: {e})"),
    }
}
