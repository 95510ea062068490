//! The figures of a run and the invariants they must meet.

use super::*;

#[derive(Default)]
pub(super) struct ToolFigures {
    pub(super) executions: i64,
    pub(super) allowed: u64,
    pub(super) attempts: u64,
    pub(super) invocations: u64,
    pub(super) killed_worker: u64,
}

/// An execution as the database has it: id, project, tool, status, failure reason, finished at.
pub(super) type Row = (String, String, String, String, Option<String>, Option<i64>);

/// What the database and the counters say once the run settled.
pub(super) struct Report {
    pub(super) acked_by_surface: BTreeMap<Surface, usize>,
    pub(super) terminal: usize,
    pub(super) outcomes: BTreeMap<String, usize>,
    pub(super) lost: Vec<String>,
    pub(super) unacked: usize,
    pub(super) unacked_open: usize,
    pub(super) over_allowance: Vec<String>,
    /// Executions failed `owner_lost`, by the base name of the worker of their last attempt.
    pub(super) owner_lost_by_worker: BTreeMap<String, usize>,
    /// Those of workers never killed, by the phase of the run in which they failed.
    pub(super) owner_lost_unkilled_by_phase: Vec<(String, usize)>,
    /// Acknowledged executions' outcomes per tool.
    pub(super) tool_outcomes: BTreeMap<String, BTreeMap<String, usize>>,
    pub(super) tools: BTreeMap<String, ToolFigures>,
    pub(super) probe_executions: usize,
}

impl Report {
    pub(super) fn new(
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
                if !s.killed_workers.contains(&worker) {
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

    pub(super) fn write(&self, out: &mut String, tally: &Tally) {
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
        let lost_by = if lost_by.is_empty() { "none".to_owned() } else { lost_by.join(", ") };
        let _ = writeln!(out, "| failed owner_lost, by the worker that held them | {lost_by} |");
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

/// "both gateways" for two, "all 3 gateways" for more.
fn all_gateways(n: usize) -> String {
    if n == 2 { "both gateways".to_owned() } else { format!("all {n} gateways") }
}

impl Run {
    /// Drains the load, counts, prints the figures (with `extra` after the
    /// recovery table) and fails listing every violated invariant.
    pub(super) async fn finish(
        self,
        form: &Form,
        c: &Cluster,
        started: Instant,
        killed_worker_counts: &BTreeMap<String, u64>,
        extra: &str,
    ) -> Result<()> {
        let Run { s, bounds, load_workers, recoveries, sampling_done, sampling, clients, load_started, .. } = self;
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

        // The tools' own counters: live workers now, the killed ones as read before kill -9.
        let mut invocations = killed_worker_counts.clone();
        for w in &c.workers {
            if w.child.id().is_some() {
                add_counts(&mut invocations, &worker_counts(&s.http, &w.addr).await?);
            }
        }
        let mut db = c.db().await?;
        let executions: Vec<Row> =
            sqlx::query_as("SELECT id, project_id, tool_name, status, failure_reason, finished_at FROM executions")
                .fetch_all(&mut db)
                .await?;
        let attempts: Vec<(String, i64, String, Option<i64>)> = sqlx::query_as(
            "SELECT execution_id, attempt, worker_id, success FROM attempts ORDER BY execution_id, attempt",
        )
        .fetch_all(&mut db)
        .await?;

        let tally = std::mem::take(&mut *s.tally());
        let report = Report::new(&s, &tally, &executions, &attempts, &invocations, killed_worker_counts);
        let mut out = String::new();
        let b = form.bounds;
        let _ = writeln!(out, "## Baton chaos run: {} form\n", form.name);
        let _ = writeln!(
            out,
            "{} clients in flight (REST with Idempotency-Key 50 %, MCP 2026-07-28 tasks 25 %, MCP compatibility \
             handle 25 %; two end users; {}), Demo.Echo / Demo.Sleep {}-{} s / Demo.Fail {{retryable, times: 1}} in \
             equal parts. Bounds: principal {}, project {}, organization {}, backlog {}; {load_workers} workers of \
             capacity {}. Load ran {:.0} s; the whole test {:.0} s.\n",
            form.clients,
            all_gateways(s.gateways.len()),
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
        let _ =
            writeln!(out, "\n| admission scope | bound | max non-terminal observed ({} samples) |", occupancy.samples);
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
        let via: String = (1..s.gateways.len()).map(|g| format!(" via gateway {g} |")).collect();
        let _ = writeln!(out, "\n| fault | recovered via gateway 0 |{via}");
        let _ = writeln!(out, "|{}", " --- |".repeat(s.gateways.len() + 1));
        for r in &recoveries {
            let via: String = r.via.iter().map(|d| format!(" {} |", secs(*d))).collect();
            let _ = writeln!(out, "| {} |{via}", r.fault);
        }
        out.push_str(extra);
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
            if !s.killed_workers.contains(&worker.as_str()) {
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
}
