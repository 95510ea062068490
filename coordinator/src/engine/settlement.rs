//! A worker's session: registration (tools, re-attaching running attempts),
//! heartbeats that keep leases, and settlements that are acknowledged only once
//! durable.

use super::sessions::{CloseReason, Outbox, Session};
use super::{Engine, Error, Result, now_ms};
use crate::authz::{self, Principal};
use crate::crypto::Field;
use crate::domain::{Event, Ignored, Outcome};
use crate::store::{EventData, ToolRecord};
use baton_proto::worker::v1::{self as wpb, coordinator_message::Msg, settlement};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// What became of one settlement.
pub enum Settled {
    /// Durable (or a duplicate, or stale): acknowledge it.
    Acked(wpb::SettlementAck),
    /// It named an attempt another worker holds: it changed nothing.
    Refused(wpb::SettlementAck),
    /// Not recorded; the worker resends it.
    Failed(wpb::SettlementAck, Error),
}

fn tool_record(t: &wpb::ToolRegistration) -> Result<ToolRecord> {
    if t.name.is_empty() || t.name.len() > 128 {
        return Err(Error::Invalid("tool name must be 1 to 128 characters".into()));
    }
    if t.task_time_input && !t.remote {
        return Err(Error::PolicyRefused(format!(
            "tool {:?} declares task-time input; hosted tools cannot pause for input",
            t.name
        )));
    }
    if t.required_client_capabilities.iter().any(|c| c.is_empty() || c.len() > 64 || c.contains(',')) {
        return Err(Error::Invalid(format!("tool {:?}: a required client capability must be a plain name", t.name)));
    }
    if !["forbidden", "optional", "required"].contains(&t.background.as_str()) {
        return Err(Error::Invalid(format!("tool {:?}: background must be forbidden, optional or required", t.name)));
    }
    if !serde_json::from_str::<serde_json::Value>(&t.input_schema_json).is_ok_and(|v| v.is_object()) {
        return Err(Error::Invalid(format!("tool {:?}: input schema must be a JSON object", t.name)));
    }
    Ok(ToolRecord {
        name: t.name.clone(),
        toolkit_name: t.toolkit_name.clone(),
        toolkit_version: t.toolkit_version.clone(),
        description: t.description.clone(),
        input_schema: t.input_schema_json.clone(),
        background: t.background.clone(),
        task_time_input: t.task_time_input,
        max_attempts: t.max_attempts.clamp(1, 10),
        max_ttl_ms: (t.max_ttl_ms > 0).then_some(t.max_ttl_ms),
        remote: t.remote,
        required_client_capabilities: t.required_client_capabilities.clone(),
    })
}

impl Engine {
    /// The capacity a session gets: what the worker declared, within the
    /// configured maximum.
    pub fn session_capacity(&self, declared: u32) -> u32 {
        declared.clamp(1, self.options.max_worker_capacity.max(1))
    }

    /// Validates and records a registration, opens the session, and re-attaches
    /// the attempts the worker says it is still running. The worker id is bound
    /// to the registering credential for good: a registration claiming an id
    /// another credential holds is refused and changes nothing.
    pub async fn register(&self, reg: wpb::Register, outbox: Outbox) -> Result<Arc<Session>> {
        let principal = self.authenticate(Some(&format!("Bearer {}", reg.worker_token))).await?;
        let Principal::Worker { credential_id, project_id, .. } = principal else {
            return Err(authz::Error::Forbidden("workers must register with a worker credential").into());
        };
        if reg.worker_id.is_empty() || reg.worker_id.len() > 128 || reg.worker_id.chars().any(char::is_control) {
            return Err(Error::Invalid("worker_id must be 1 to 128 printable characters".into()));
        }
        let tools = reg.tools.iter().map(tool_record).collect::<Result<Vec<_>>>()?;
        let now = now_ms();
        if !self.store.bind_worker(&reg.worker_id, &credential_id, &project_id, now).await? {
            tracing::warn!(
                worker_id = %reg.worker_id,
                %credential_id,
                "registration refused: the worker id belongs to another credential"
            );
            return Err(authz::Error::Forbidden("this worker id belongs to another credential").into());
        }
        self.store.upsert_tools(&project_id, &tools, now).await?;
        self.store.upsert_worker(&reg.worker_id, &project_id, &self.options.id, now).await?;
        self.reclaim_undelivered(&reg, now).await?;
        let mut stop = Vec::new();
        let mut stop_now = Vec::new();
        let max_running = self.session_capacity(u32::MAX) as usize;
        if reg.running.len() > max_running || reg.settling.len() > max_running {
            return Err(Error::Invalid("a worker cannot report more attempts than the maximum capacity".into()));
        }
        for r in &reg.running {
            let hb = Event::Heartbeat {
                worker_id: reg.worker_id.clone(),
                attempt: r.attempt,
                lease_until: now + self.options.lease_ms,
            };
            match self.store.apply(&r.execution_id, &hb, &EventData::default(), now).await? {
                Some(Ok(applied)) if applied.record.state.cancel_requested => stop_now.push(r.clone()),
                Some(Ok(_)) => {}
                _ => stop.push(r.clone()),
            }
        }
        let capacity = i64::from(self.session_capacity(reg.capacity));
        let session = Arc::new(Session::new(
            CONNECTIONS.fetch_add(1, Ordering::Relaxed),
            reg.worker_id.clone(),
            credential_id,
            project_id,
            tools.into_iter().map(|t| t.name).collect(),
            outbox,
            capacity,
        ));
        session.take_slots((reg.running.len() - stop.len()) as i64);
        let registered = wpb::Registered {
            coordinator_id: self.options.id.clone(),
            heartbeat_interval_ms: self.heartbeat_interval_ms(),
            stop,
        };
        session.send(Msg::Registered(registered));
        for r in stop_now {
            session.stop(&r.execution_id, r.attempt, "cancelled");
        }
        // Answers the owner gave while this worker was away.
        for (execution_id, row) in self.store.undelivered_answers(&reg.worker_id).await? {
            if let Ok(m) = self.answer_message(&execution_id, &row) {
                session.send(Msg::InputResponse(m));
            }
        }
        self.sessions.insert(session.clone());
        tracing::info!(worker_id = %session.worker_id, tools = session.tools.len(), "worker registered");
        self.wake_dispatch();
        Ok(session)
    }

    pub fn heartbeat_interval_ms(&self) -> i64 {
        (self.options.lease_ms / 3).max(100)
    }

    /// Leases this worker holds for attempts it neither runs nor is settling
    /// never reached it (worker ids are unique per process): make them claimable.
    async fn reclaim_undelivered(&self, reg: &wpb::Register, now: i64) -> Result<()> {
        let known: std::collections::HashSet<(&str, u32)> =
            reg.running.iter().chain(&reg.settling).map(|r| (r.execution_id.as_str(), r.attempt)).collect();
        let unknown: Vec<(String, u32)> = self
            .store
            .leased_to(&reg.worker_id)
            .await?
            .into_iter()
            .filter(|(id, attempt)| !known.contains(&(id.as_str(), *attempt)))
            .collect();
        self.undelivered(&reg.worker_id, unknown, now).await
    }

    /// Assignments that provably never reached `worker_id` (never queued, or
    /// still queued when its session ended): claimable again at once.
    pub async fn undelivered(&self, worker_id: &str, attempts: Vec<(String, u32)>, now: i64) -> Result<()> {
        for (id, attempt) in attempts {
            let event = Event::Undelivered { worker_id: worker_id.to_owned(), attempt };
            if let Some(Ok(applied)) = self.store.apply(&id, &event, &EventData::default(), now).await? {
                tracing::warn!(execution_id = %id, attempt, "assignment never reached the worker; claimable again");
                self.after_commit(&applied.record, &applied.effects).await;
            }
        }
        self.wake_dispatch();
        Ok(())
    }

    /// Ends, every heartbeat interval, the sessions whose credential was
    /// revoked: nothing more is assigned to them and their stream closes.
    pub async fn run_session_audit(self: Arc<Self>) {
        let every = std::time::Duration::from_millis(self.heartbeat_interval_ms().unsigned_abs());
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let sessions = self.sessions.snapshot();
            let mut ids: Vec<String> = sessions.iter().map(|s| s.credential_id.clone()).collect();
            ids.sort();
            ids.dedup();
            match self.store.revoked_among(&ids).await {
                Ok(revoked) => {
                    for s in sessions.iter().filter(|s| revoked.contains(&s.credential_id)) {
                        tracing::warn!(worker_id = %s.worker_id, "worker credential revoked; session ended");
                        self.sessions.remove(&s.worker_id, s.connection);
                        s.close(CloseReason::Revoked);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot check worker credentials"),
            }
        }
    }

    /// Keeps the leases the worker still holds. An attempt that is no longer
    /// its own gets a stop; one whose cancellation was requested gets the stop
    /// again on every heartbeat, so a lost stop cannot let it finish.
    pub async fn heartbeat(&self, session: &Session, hb: wpb::Heartbeat) -> Result<()> {
        let now = now_ms();
        // A worker runs at most its capacity; a longer list is not believed.
        let believed = usize::try_from(session.capacity).unwrap_or(0);
        for r in hb.running.into_iter().take(believed) {
            let event = Event::Heartbeat {
                worker_id: session.worker_id.clone(),
                attempt: r.attempt,
                lease_until: now + self.options.lease_ms,
            };
            match self.store.apply(&r.execution_id, &event, &EventData::default(), now).await? {
                Some(Ok(applied)) if applied.record.state.cancel_requested => {
                    session.stop(&r.execution_id, r.attempt, "cancelled");
                }
                Some(Ok(_)) => {}
                Some(Err((Ignored::NotHolder, _))) => {
                    session.refuse(&r.execution_id, r.attempt, "heartbeat");
                }
                // No longer ours (settled, failed or reassigned): tell the worker to stop.
                Some(Err(_)) | None => {
                    session.stop(&r.execution_id, r.attempt, "owner_lost");
                }
            }
        }
        session.set_free(hb.free_slots);
        if hb.free_slots > 0 {
            self.dispatch_wake.notify_one();
        }
        Ok(())
    }

    /// The event and sealed data a settlement stands for.
    fn settlement_event(&self, worker_id: &str, s: wpb::Settlement) -> Result<(String, Event, EventData)> {
        let id = s.execution_id;
        let (outcome, data) = match s.outcome {
            Some(settlement::Outcome::ResultJson(json)) => {
                let ct = self.ring.seal(&id, Field::Output, json.as_bytes())?;
                let payload_bytes = ct.len() as i64;
                (Outcome::Success, EventData { output_ct: Some(ct), payload_bytes, ..Default::default() })
            }
            Some(settlement::Outcome::Error(e)) => {
                let detail = (!e.detail_json.is_empty())
                    .then(|| self.ring.seal(&id, Field::ErrorDetail, e.detail_json.as_bytes()))
                    .transpose()?;
                let message: String = e.message.chars().take(2_000).collect();
                let data = EventData { error_message: Some(message), error_detail_ct: detail, ..Default::default() };
                (Outcome::ToolError { retryable: e.retryable }, data)
            }
            Some(settlement::Outcome::Cancelled(_)) => (Outcome::Cancelled, EventData::default()),
            Some(settlement::Outcome::UnsupportedInteraction(what)) => {
                let what: String = what.chars().take(200).collect();
                let message = format!("the remote server requested an unsupported interaction: {what}");
                (Outcome::UnsupportedInteraction, EventData { error_message: Some(message), ..Default::default() })
            }
            None => return Err(Error::Invalid("settlement without an outcome".into())),
        };
        Ok((id, Event::Settle { worker_id: worker_id.to_owned(), attempt: s.attempt, outcome }, data))
    }

    /// Records settlements durably, all in one transaction when they can be;
    /// each answer says whether its settlement may be acknowledged. Duplicates,
    /// settlements of attempts this worker no longer holds and of executions
    /// past retention are acknowledged too (they change nothing). A settlement
    /// of an attempt another worker holds is refused.
    pub async fn settle_batch(&self, session: &Session, settlements: Vec<wpb::Settlement>) -> Vec<Settled> {
        let mut out = Vec::with_capacity(settlements.len());
        let mut items = Vec::with_capacity(settlements.len());
        for s in settlements {
            let ack = wpb::SettlementAck { execution_id: s.execution_id.clone(), attempt: s.attempt };
            match self.settlement_event(&session.worker_id, s) {
                Ok(item) => items.push((ack, item)),
                Err(e) => out.push(Settled::Failed(ack, e)),
            }
        }
        let now = now_ms();
        let events: Vec<_> = items.iter().map(|(_, item)| item.clone()).collect();
        let results = match self.store.apply_batch(&events, now).await {
            Ok(r) => r.into_iter().map(Ok).collect::<Vec<_>>(),
            // A conflict in the shared transaction (a deadlock with another
            // writer, say): apply one by one instead.
            Err(_) => {
                let mut one_by_one = Vec::with_capacity(events.len());
                for (id, event, data) in &events {
                    one_by_one.push(self.store.apply(id, event, data, now).await.map_err(Error::from));
                }
                one_by_one
            }
        };
        let mut committed = Vec::new();
        let mut freed = 0;
        for ((ack, (id, _, _)), result) in items.into_iter().zip(results) {
            match result {
                Ok(Some(Ok(applied))) => {
                    tracing::debug!(execution_id = %id, status = %applied.record.status(), "settled");
                    committed.push(applied);
                    freed += 1;
                    out.push(Settled::Acked(ack));
                }
                Ok(Some(Err((Ignored::NotHolder, _)))) => out.push(Settled::Refused(ack)),
                Ok(Some(Err((ignored, _)))) => {
                    tracing::debug!(execution_id = %id, %ignored, "duplicate or stale settlement");
                    freed += 1;
                    out.push(Settled::Acked(ack));
                }
                Ok(None) => out.push(Settled::Acked(ack)),
                Err(e) => out.push(Settled::Failed(ack, e)),
            }
        }
        futures_util::future::join_all(committed.iter().map(|a| self.after_commit(&a.record, &a.effects))).await;
        session.return_slots(freed);
        self.dispatch_wake.notify_one();
        out
    }

    pub async fn disconnect(&self, session: &Session) {
        self.sessions.remove(&session.worker_id, session.connection);
        if self.sessions.get(&session.worker_id).is_none()
            && let Err(e) = self.store.remove_worker(&session.worker_id, &self.options.id).await
        {
            tracing::warn!(error = %e, "worker directory cleanup failed");
        }
        tracing::info!(worker_id = %session.worker_id, "worker disconnected");
    }
}
