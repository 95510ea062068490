//! Dispatch: lease due pending executions to this replica's idle workers in
//! batches (one commit per batch) and send the assignments. Woken at once by new
//! work (locally or over the bus); a slow tick covers scheduled runs and lost
//! signals.

use super::sessions::Session;
use crate::crypto::Field;
use crate::engine::messages::{Assignment, AttemptRef, Command};
use crate::engine::{Engine, ticket};
use crate::store::Claimed;
use baton_proto::clock::now_ms;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const BATCH: i64 = 128;

/// What one dispatch round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// Something was assigned: there may be more.
    Assigned,
    /// Nothing was due, or no session had room.
    Idle,
    /// A claim failed in the store (its sessions' slots were given back).
    ClaimFailed,
}
const TICK: Duration = Duration::from_millis(500);

impl Engine {
    pub(crate) async fn run_dispatcher(self: Arc<Self>) {
        loop {
            let ticked = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                // New work, here or on another replica.
                _ = self.dispatch_wake.notified() => false,
                // Slots came free: worth a round only if work may be waiting.
                _ = self.slots_wake.notified() => {
                    if !self.pending_seen.load(Ordering::Relaxed) {
                        continue;
                    }
                    false
                }
                _ = tokio::time::sleep(TICK) => true,
            };
            // The tick is the net for wake-ups that never came: while nothing
            // is due it costs one read, not a locked claim per session.
            if ticked && !self.worth_a_round().await {
                continue;
            }
            loop {
                let round = self.dispatch_round().await;
                if round == Round::Idle || self.shutdown.is_cancelled() {
                    break;
                }
                if round == Round::ClaimFailed {
                    // The store refused a claim: let it recover before asking again.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Whether a periodic round could claim anything: a session here has
    /// room and some pending execution is due (a failed read says yes).
    pub(in crate::engine) async fn worth_a_round(&self) -> bool {
        if !self.sessions.snapshot().iter().any(|s| s.room() > 0 && s.free() > 0) {
            return false;
        }
        match self.store.any_claimable(now_ms()).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "reading whether work is due failed; claiming anyway");
                true
            }
        }
    }

    /// One pass over idle sessions. The dispatcher loops on it; the
    /// deterministic simulation calls it as one of its steps.
    pub async fn dispatch_round(&self) -> Round {
        let mut assigned = false;
        let mut failed = false;
        for session in self.sessions.snapshot() {
            // Never claim more than the session's outbox can take without
            // waiting: a worker that stops reading stops getting work.
            let slots = session.take_slots(BATCH.min(session.room()));
            if slots == 0 {
                continue;
            }
            let now = now_ms();
            let claimed = match self
                .store
                .claim(
                    &session.project_id,
                    &session.tools,
                    &session.worker_id,
                    slots as u32,
                    now,
                    now + self.options.lease_ms,
                )
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    session.return_slots(slots);
                    tracing::warn!(error = %e, "claim failed");
                    failed = true;
                    continue;
                }
            };
            session.return_slots(slots - claimed.len() as i64);
            if (claimed.len() as i64) < slots {
                self.pending_seen.store(false, Ordering::Relaxed);
            }
            // Leaving the backlog and waking waiters are independent of the
            // assignments: do them for the whole batch at once.
            let bookkeeping = futures_util::future::join_all(claimed.iter().map(|c| async move {
                if let Err(e) = self.admission.started(&ticket(&c.record), now).await {
                    tracing::warn!(error = %e, "admission backlog release failed");
                }
                self.changed(&c.record);
            }));
            let mut undelivered = Vec::new();
            for c in &claimed {
                assigned = true;
                if let Some(refused) = self.assign(&session, c).await {
                    undelivered.push(refused);
                }
            }
            bookkeeping.await;
            if !undelivered.is_empty() {
                session.return_slots(undelivered.len() as i64);
                if let Err(e) = self.undelivered(&session.worker_id, undelivered, now_ms()).await {
                    tracing::warn!(error = %e, "undelivered assignments wait for their lease to lapse");
                }
            }
        }
        match (failed, assigned) {
            (true, _) => Round::ClaimFailed,
            (false, true) => Round::Assigned,
            (false, false) => Round::Idle,
        }
    }

    /// Sends claimed attempt `c` to `session`, the worker its lease names
    /// (without waiting); answers the attempt when it could not be queued,
    /// which proves it never reached the worker.
    pub(in crate::engine) async fn assign(&self, session: &Session, c: &Claimed) -> Option<AttemptRef> {
        let record = &c.record;
        if c.attempt == 1 {
            self.metrics.first_attempt(record);
        }
        let input = match record.input_ct.as_deref().map(|ct| self.ring.open(record.id.as_str(), Field::Input, ct)) {
            Some(Ok(bytes)) => String::from_utf8(bytes).unwrap_or_default(),
            None => "{}".to_owned(),
            Some(Err(e)) => {
                // The lease lapses and the execution fails owner_lost: the tool never ran.
                tracing::error!(error = %e, execution_id = %record.id, "cannot open stored input");
                return None;
            }
        };
        let span = tracing::info_span!(
            "dispatch",
            otel.name = %format!("dispatch {}", record.tool_name),
            otel.kind = "producer",
            gen_ai.tool.name = %record.tool_name,
            execution_id = %record.id,
            attempt = c.attempt,
        );
        // One trace per execution: dispatch continues the start request's trace.
        baton_proto::trace::adopt_traceparent(record.traceparent.as_deref().unwrap_or_default(), &span);
        let traceparent = {
            let _enter = span.enter();
            baton_proto::trace::current_traceparent()
        };
        // A recorded remote task is resumed, never called again; answers the
        // previous owner had not relayed travel with the assignment.
        let (resume_remote_task_id, pending_input) = match &record.remote_task_id {
            Some(task) if record.state.remote_task => {
                (task.clone(), self.pending_answers(&record.id).await.unwrap_or_default())
            }
            _ => (String::new(), Vec::new()),
        };
        let sent = session.send(Command::Assign(Assignment {
            attempt: AttemptRef::new(&record.id, c.attempt),
            tool_name: record.tool_name.clone(),
            input_json: input,
            deadline_ms: record.execution_deadline,
            traceparent,
            resume_remote_task_id,
            pending_input,
        }));
        // Never queued, so never delivered: claimable again now, not owner_lost a lease later.
        (!sent).then(|| AttemptRef::new(&record.id, c.attempt))
    }
}
