//! The properties, checked after every step against the tools' own record
//! of their calls and against the store:
//! - at most one call of the business tool per attempt;
//! - a tool that may not be retried called at most once per execution;
//! - a terminal state (and its result) never changes;
//! - the result the owner reads is the one the current attempt's call returned;
//! - the owner's unfinished executions within their deadline never exceed its bound.

use super::tools::{self, ONCE};
use super::world::PRINCIPAL_BOUND;
use super::{Sim, Violation};
use baton_coordinator::domain::ExecutionId;
use std::collections::BTreeMap;

impl Sim {
    pub(super) async fn check(&mut self) -> Result<(), Violation> {
        if let Some(what) = self.owner_misread.take() {
            return Err(self.violation(what));
        }
        let (per_attempt, once) = self.calls.with(|calls| {
            let mut per_attempt: BTreeMap<(String, u32), u32> = BTreeMap::new();
            let mut once: BTreeMap<String, u32> = BTreeMap::new();
            for c in calls.iter() {
                *per_attempt.entry((c.execution_id.clone(), c.attempt)).or_default() += 1;
                if c.tool == ONCE {
                    *once.entry(c.execution_id.clone()).or_default() += 1;
                }
            }
            (per_attempt, once)
        });
        if let Some(((id, attempt), n)) = per_attempt.iter().find(|(_, n)| **n > 1) {
            return Err(self.violation(format!("{}#{attempt} called {n} times", self.label(id))));
        }
        if let Some((id, n)) = once.iter().find(|(_, n)| **n > 1) {
            return Err(
                self.violation(format!("{} of a tool that may not be retried called {n} times", self.label(id)))
            );
        }
        // Admission holds an execution until it ends or its deadline passes
        // (then the sweeper ends it), in Redis as in memory.
        let open = self.plain.open_executions().await.map_err(|e| self.violation(format!("store: {e}")))?;
        let held = open.iter().filter(|o| o.execution_deadline > self.now).count() as u64;
        if held > PRINCIPAL_BOUND {
            return Err(self.violation(format!("{held} unfinished executions over a bound of {PRINCIPAL_BOUND}")));
        }
        let ids: Vec<String> = self.owned.iter().filter_map(|o| o.id.clone()).collect();
        for id in ids {
            let typed = ExecutionId::parse(&id).ok_or_else(|| self.violation(format!("malformed id {id}")))?;
            let record = self.plain.get_execution(&typed).await.map_err(|e| self.violation(format!("store: {e}")))?;
            let Some(record) = record else { return Err(self.violation(format!("{} vanished", self.label(&id)))) };
            if !record.status().is_terminal() {
                if self.terminal.contains_key(&id) {
                    return Err(self.violation(format!("{} left its terminal state", self.label(&id))));
                }
                continue;
            }
            let reading = (format!("{:?} {:?}", record.status(), record.failure_reason()), record.output_ct.clone());
            match self.terminal.get(&id) {
                None => {
                    let line = format!("{} ended {}", self.label(&id), reading.0);
                    self.terminal.insert(id.clone(), reading);
                    self.note(line);
                }
                Some(first) if *first != reading => {
                    return Err(self.violation(format!(
                        "{} ended as {} and later read {}",
                        self.label(&id),
                        first.0,
                        reading.0
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The owner reads an execution's result, and it must be the one the
    /// current attempt's call returned.
    pub(super) async fn read(&mut self) {
        let Some(i) = self.some_started() else { return };
        let Some(c) = (0..self.coordinators.len()).find(|c| self.coordinators[*c].is_some()) else { return };
        let (Some(engine), Some(id)) = (self.coordinators[c].clone(), self.owned[i].id.clone()) else { return };
        match engine.result(Some(&self.bearer()), self.scope(), &id).await {
            Ok(read) => {
                let status = read.record.status();
                let attempts = read.record.state.attempts;
                let nonce = read.result.as_deref().and_then(nonce_in);
                self.note(format!("e{i} read: {status:?}, attempt {attempts}, nonce {nonce:?}"));
                if read.result.is_some() {
                    let returned = nonce.and_then(|n| tools::results(&self.calls).get(&n).cloned());
                    if returned != Some((id.clone(), attempts)) {
                        self.owner_misread =
                            Some(format!("e{i} read a result of {returned:?}, not of its current attempt {attempts}"));
                    }
                }
            }
            Err(e) => self.note(format!("e{i} read failed: {e}")),
        }
    }

    pub(super) async fn all_ended(&self) -> bool {
        let mut ended = true;
        for o in &self.owned {
            match &o.id {
                Some(id) => ended &= self.terminal.contains_key(id),
                None => ended &= o.rejected,
            }
        }
        ended
    }

    /// Every execution ended: the tally of how.
    pub(super) async fn check_end(&mut self) -> Result<(), Violation> {
        for o in &self.owned {
            let Some(id) = &o.id else { continue };
            let Some((status, _)) = self.terminal.get(id) else { continue };
            let record = match ExecutionId::parse(id) {
                Some(id) => self.plain.get_execution(&id).await.ok().flatten(),
                None => None,
            };
            let attempts = record.map_or(0, |r| r.state.attempts);
            match status.split(' ').next() {
                Some("Completed") => {
                    self.tally.completed += 1;
                    if attempts > 1 {
                        self.tally.retried_completed += 1;
                    }
                }
                Some("Cancelled") => self.tally.cancelled += 1,
                _ if status.contains("OwnerLost") => {
                    self.tally.failed += 1;
                    self.tally.owner_lost += 1;
                }
                _ => self.tally.failed += 1,
            }
        }
        Ok(())
    }
}

/// The nonce a simulated tool's result carries.
fn nonce_in(result: &str) -> Option<u64> {
    let at = result.find("sim-nonce-")? + "sim-nonce-".len();
    let digits: String = result[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
