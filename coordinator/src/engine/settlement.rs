//! A worker's session: registration (tools, re-attaching running attempts),
//! heartbeats that keep leases, and settlements that are acknowledged only once
//! durable.

use super::sessions::{Outbox, Session};
use super::{Engine, Error, Result, now_ms};
use crate::authz::{self, Principal};
use crate::crypto::Field;
use crate::domain::{Event, Outcome};
use crate::store::{EventData, ToolRecord};
use baton_proto::worker::v1::{self as wpb, coordinator_message::Msg, settlement};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

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
    /// Validates and records a registration, opens the session, and re-attaches
    /// the attempts the worker says it is still running.
    pub async fn register(&self, reg: wpb::Register, outbox: Outbox) -> Result<Arc<Session>> {
        let principal = self.authenticate(Some(&format!("Bearer {}", reg.worker_token))).await?;
        let Principal::Worker { project_id, .. } = principal else {
            return Err(authz::Error::Forbidden("workers must register with a worker credential").into());
        };
        if reg.worker_id.is_empty() || reg.worker_id.len() > 128 {
            return Err(Error::Invalid("worker_id must be 1 to 128 characters".into()));
        }
        let tools = reg.tools.iter().map(tool_record).collect::<Result<Vec<_>>>()?;
        let now = now_ms();
        self.store.upsert_tools(&project_id, &tools, now).await?;
        self.store.upsert_worker(&reg.worker_id, &project_id, &self.options.id, now).await?;
        self.reclaim_undelivered(&reg, now).await?;
        let mut stop = Vec::new();
        let mut stop_now = Vec::new();
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
        let session = Arc::new(Session {
            connection: CONNECTIONS.fetch_add(1, Ordering::Relaxed),
            worker_id: reg.worker_id.clone(),
            project_id,
            tools: tools.into_iter().map(|t| t.name).collect(),
            outbox,
            free: AtomicI64::new(i64::from(reg.capacity.max(1)) - (reg.running.len() - stop.len()) as i64),
        });
        let registered = wpb::Registered {
            coordinator_id: self.options.id.clone(),
            heartbeat_interval_ms: (self.options.lease_ms / 3).max(100),
            stop,
        };
        session.send(Msg::Registered(registered)).await;
        for r in stop_now {
            session.stop(&r.execution_id, r.attempt, "cancelled").await;
        }
        // Answers the owner gave while this worker was away.
        for (execution_id, row) in self.store.undelivered_answers(&reg.worker_id).await? {
            if let Ok(m) = self.answer_message(&execution_id, &row) {
                session.send(Msg::InputResponse(m)).await;
            }
        }
        self.sessions.insert(session.clone());
        tracing::info!(worker_id = %session.worker_id, tools = session.tools.len(), "worker registered");
        self.wake_dispatch();
        Ok(session)
    }

    /// Leases this worker holds for attempts it neither runs nor is settling
    /// never reached it (worker ids are unique per process): make them claimable.
    async fn reclaim_undelivered(&self, reg: &wpb::Register, now: i64) -> Result<()> {
        let known: std::collections::HashSet<(&str, u32)> =
            reg.running.iter().chain(&reg.settling).map(|r| (r.execution_id.as_str(), r.attempt)).collect();
        for (id, attempt) in self.store.leased_to(&reg.worker_id).await? {
            if known.contains(&(id.as_str(), attempt)) {
                continue;
            }
            let event = Event::Undelivered { worker_id: reg.worker_id.clone(), attempt };
            if let Some(Ok(applied)) = self.store.apply(&id, &event, &EventData::default(), now).await? {
                tracing::warn!(execution_id = %id, attempt, "assignment never reached the worker; claimable again");
                self.after_commit(&applied.record, &applied.effects).await;
            }
        }
        Ok(())
    }

    pub async fn heartbeat(&self, session: &Session, hb: wpb::Heartbeat) -> Result<()> {
        let now = now_ms();
        for r in hb.running {
            let event = Event::Heartbeat {
                worker_id: session.worker_id.clone(),
                attempt: r.attempt,
                lease_until: now + self.options.lease_ms,
            };
            if let Some(Err(_)) | None = self.store.apply(&r.execution_id, &event, &EventData::default(), now).await? {
                // No longer ours (settled, failed or reassigned): tell the worker to stop.
                session.stop(&r.execution_id, r.attempt, "owner_lost").await;
            }
        }
        session.free.store(i64::from(hb.free_slots), Ordering::Release);
        if hb.free_slots > 0 {
            self.dispatch_wake.notify_one();
        }
        Ok(())
    }

    /// The event and sealed data a settlement stands for.
    fn settlement_event(&self, s: wpb::Settlement) -> Result<(String, Event, EventData)> {
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
        Ok((id, Event::Settle { attempt: s.attempt, outcome }, data))
    }

    /// Records settlements durably, all in one transaction when they can be;
    /// each answer says whether its settlement may be acknowledged. Duplicates
    /// and settlements of executions past retention are acknowledged too.
    pub async fn settle_batch(
        &self,
        session: &Session,
        settlements: Vec<wpb::Settlement>,
    ) -> Vec<(wpb::SettlementAck, Result<()>)> {
        let mut out = Vec::with_capacity(settlements.len());
        let mut items = Vec::with_capacity(settlements.len());
        for s in settlements {
            let ack = wpb::SettlementAck { execution_id: s.execution_id.clone(), attempt: s.attempt };
            match self.settlement_event(s) {
                Ok(item) => items.push((ack, item)),
                Err(e) => out.push((ack, Err(e))),
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
        for ((ack, (id, _, _)), result) in items.into_iter().zip(results) {
            match result {
                Ok(Some(Ok(applied))) => {
                    tracing::debug!(execution_id = %id, status = %applied.record.status(), "settled");
                    committed.push(applied);
                    out.push((ack, Ok(())));
                }
                Ok(Some(Err((ignored, _)))) => {
                    tracing::debug!(execution_id = %id, %ignored, "duplicate or stale settlement");
                    out.push((ack, Ok(())));
                }
                Ok(None) => out.push((ack, Ok(()))),
                Err(e) => out.push((ack, Err(e))),
            }
        }
        futures_util::future::join_all(committed.iter().map(|a| self.after_commit(&a.record, &a.effects))).await;
        session.return_slots(out.len() as i64);
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
