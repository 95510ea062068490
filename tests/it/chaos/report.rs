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
