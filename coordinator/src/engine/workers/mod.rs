//! The worker side of the engine. Here: worker sessions over their life:
//! registration (tools, the worker id bound to its credential, re-attaching
//! running attempts), the messages a session sends (heartbeats that keep
//! leases, settlements acknowledged only once durable, remote-task and input
//! records), revocation, and disconnect. `sessions` holds this replica's live
//! sessions and their outboxes; `dispatch` leases pending work to them.

mod dispatch;
pub(super) mod sessions;

#[cfg(test)]
pub(super) use dispatch::Round;

use super::messages::{
    AttemptRef, Command, DeclineReason, Heartbeat, InputDelivered, InputRequested, MessageKind, Registration,
    RemoteTaskStarted, Reported, Settlement,
};
use super::{Engine, Error, Result, Scope};
use crate::audit::{action, outcome};
use crate::authz::{self, Principal};
use crate::crypto::Field;
use crate::domain::{Event, ExecutionId, Ignored, Outcome, StopReason};
use crate::options::ToolLimits;
use crate::store::{self, Applied, EventData, ExecutionRecord, OwnedElsewhere, ToolChange, ToolRecord};
use baton_proto::clock::now_ms;
use sessions::{CloseReason, Outbox, Session, SessionIdentity};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What renewing one lease did: the transition, or why it was ignored.
type Renewed = Option<std::result::Result<Applied, (Ignored, ExecutionRecord)>>;

/// A message from a worker, after registration.
#[derive(Clone, Debug)]
pub enum FromWorker {
    Heartbeat(Heartbeat),
    Settlement(Settlement),
    Progress {
        attempt: AttemptRef,
        /// `current` of `total` (0 = unknown).
        current: f64,
        total: f64,
        message: String,
    },
    RemoteTaskStarted(RemoteTaskStarted),
    InputRequested(InputRequested),
    InputDelivered(InputDelivered),
    /// The worker did not start an assignment (at capacity, or draining).
    Declined(AttemptRef, DeclineReason),
}

static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// What became of one settlement.
#[derive(Debug)]
pub(crate) enum Settled {
    /// Durable (or a duplicate, or stale): acknowledged.
    Acked(AttemptRef),
    /// It named an attempt another worker holds: it changed nothing.
    Refused(AttemptRef),
    /// Not recorded; the worker resends it.
    Failed(Error),
}

/// Checks a declared tool and clamps what the worker may not decide alone.
/// MCP's tool-name alphabet: nothing a log line, a terminal or a client's
/// parser could read as anything but a name.
fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

fn validated(mut t: ToolRecord, limits: ToolLimits) -> Result<ToolRecord> {
    if !is_tool_name(&t.name) {
        // Quoted and escaped: the name is the worker's, and this error is logged.
        let shown: String = t.name.chars().take(140).collect();
        return Err(Error::Invalid(format!("tool name {shown:?} must be 1 to 128 of A-Z a-z 0-9 _ - . /")));
    }
    for (what, text) in [("toolkit name", &t.toolkit_name), ("toolkit version", &t.toolkit_version)] {
        if text.len() > 128 || text.chars().any(char::is_control) {
            return Err(Error::Invalid(format!(
                "tool {:?}: {what} must be at most 128 bytes without control characters",
                t.name
            )));
        }
    }
    for (what, bytes, limit, setting) in [
        ("description", t.description.len(), limits.max_description_bytes, "coordinator.max_tool_description_bytes"),
        ("input schema", t.input_schema.len(), limits.max_schema_bytes, "coordinator.max_tool_schema_bytes"),
    ] {
        if bytes > limit {
            return Err(Error::Invalid(format!(
                "tool {:?}: {what} is {bytes} bytes, over {setting} ({limit})",
                t.name
            )));
        }
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
    // `grpc` reads the policy; none is one the wire named that this release does not know.
    if t.background.is_none() {
        return Err(Error::Invalid(format!("tool {:?}: background must be forbidden, optional or required", t.name)));
    }
    if !serde_json::from_str::<serde_json::Value>(&t.input_schema).is_ok_and(|v| v.is_object()) {
        return Err(Error::Invalid(format!("tool {:?}: input schema must be a JSON object", t.name)));
    }
    // Compiled (and cached) now: a schema callers' input could never be checked against is refused.
    crate::schema::check(&t.input_schema).map_err(|e| Error::Invalid(format!("tool {:?}: {e}", t.name)))?;
    metadata_checked(&t)?;
    t.max_attempts = t.max_attempts.clamp(1, 10);
    t.max_ttl_ms = t.max_ttl_ms.filter(|ms| *ms > 0);
    Ok(t)
}

/// MCP metadata is shown to clients as declared; it must at least be the
/// JSON shape MCP gives it, and of a size a tool list can carry.
fn metadata_checked(t: &ToolRecord) -> Result<()> {
    let m = &t.metadata;
    let bad = |what: &str| Err(Error::Invalid(format!("tool {:?}: {what}", t.name)));
    if m.title.len() > 256 || m.title.chars().any(char::is_control) {
        return bad("title must be at most 256 bytes without control characters");
    }
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    if !m.annotations.is_empty() && !json(&m.annotations).is_some_and(|v| v.is_object()) {
        return bad("annotations must be a JSON object");
    }
    if !m.output_schema.is_empty() && !json(&m.output_schema).is_some_and(|v| v.is_object()) {
        return bad("output schema must be a JSON object");
    }
    if !m.icons.is_empty() && !json(&m.icons).is_some_and(|v| v.is_array()) {
        return bad("icons must be a JSON array");
    }
    if m.annotations.len() + m.output_schema.len() + m.icons.len() > 256 << 10 {
        return bad("metadata must be at most 256 KiB");
    }
    Ok(())
}

impl Engine {
    /// The capacity a session gets: what the worker declared, within the
    /// configured maximum.
    pub(crate) fn session_capacity(&self, declared: u32) -> u32 {
        declared.clamp(1, self.options.max_worker_capacity.max(1))
    }

    /// Validates and records a registration, opens the session, and re-attaches
    /// the attempts the worker says it is still running. The worker id is bound
    /// to the registering credential for good: a registration claiming an id
    /// another credential holds is refused and changes nothing.
    pub(crate) async fn register(&self, mut reg: Registration, outbox: Outbox) -> Result<Arc<Session>> {
        let principal = self.authenticate(Some(&format!("Bearer {}", reg.worker_token))).await?;
        let Principal::Worker { credential_id, project_id, org_id } = principal.clone() else {
            return Err(authz::Error::Forbidden("workers must register with a worker credential").into());
        };
        if reg.worker_id.is_empty() || reg.worker_id.len() > 128 || reg.worker_id.chars().any(char::is_control) {
            return Err(Error::Invalid("worker_id must be 1 to 128 printable characters".into()));
        }
        // A remote server's tool whose schema cannot be compiled (say, a `$ref`
        // to a URL) is left out rather than refusing the worker: the author of
        // that server is not this worker's author, and the other tools still work.
        if reg.capacity == 0 {
            return Err(Error::Invalid("capacity must be at least 1".into()));
        }
        let limits = self.options.tool_limits;
        // A remote server's tool that fails a check (a schema that does not
        // compile, a name or description out of bounds) is left out rather
        // than refusing the worker: the author of that server is not this
        // worker's author, and the other tools still work.
        let mut tools = Vec::with_capacity(reg.tools.len());
        for t in std::mem::take(&mut reg.tools) {
            let remote = t.remote;
            match validated(t, limits) {
                Ok(t) => tools.push(t),
                Err(e) if remote => tracing::warn!(worker_id = %reg.worker_id, error = %e, "remote tool left out"),
                Err(e) => return Err(e),
            }
        }
        let now = now_ms();
        let group = self.store.worker_group(&credential_id).await?.ok_or(authz::Error::Unauthenticated)?;
        if !self.store.bind_worker(&reg.worker_id, &credential_id, &group, &project_id, now).await? {
            tracing::warn!(
                worker_id = %reg.worker_id,
                %credential_id,
                "registration refused: the worker id belongs to another worker identity"
            );
            return Err(authz::Error::Forbidden("this worker id belongs to another worker identity").into());
        }
        // The leases the worker still holds are renewed first, in one
        // transaction: a worker back from a coordinator crash with a full
        // load must be re-attached well inside its lease.
        let max_running = self.session_capacity(u32::MAX) as usize;
        if reg.running.len() > max_running || reg.settling.len() > max_running {
            return Err(Error::Invalid("a worker cannot report more attempts than the maximum capacity".into()));
        }
        // The attempts it is still settling too: their settlements are sent
        // again once the session is open, and must find the lease still held.
        let held: Vec<AttemptRef> = reg.running.iter().chain(&reg.settling).cloned().collect();
        let renewed = self.renew_leases(&reg.worker_id, &held, now).await;
        let (mut stop, mut stop_now) = (Vec::new(), Vec::new());
        for (r, renewed) in reg.running.iter().zip(renewed) {
            match renewed? {
                Some(Ok(applied)) if applied.record.state.cancel_requested => stop_now.push(r.clone()),
                Some(Ok(_)) => {}
                _ => stop.push(r.clone()),
            }
        }
        let scope = Scope { org_id: &org_id, project_id: &project_id };
        let changes = match self.store.register_tools(&project_id, &group, &tools, now).await? {
            Ok(changes) => changes,
            Err(OwnedElsewhere { tool }) => {
                tracing::warn!(
                    worker_id = %reg.worker_id,
                    %credential_id,
                    tool = %tool,
                    "registration refused: the tool belongs to another worker identity"
                );
                let why = Some("the tool belongs to another worker identity".to_owned());
                self.audit(&principal, scope, action::TOOL_REGISTER, Some(&tool), outcome::REFUSED, why).await?;
                return Err(
                    authz::Error::Forbidden("a tool of this registration belongs to another worker identity").into()
                );
            }
        };
        for (tool, change) in changes {
            let (action, detail) = match change {
                ToolChange::Unchanged => continue,
                ToolChange::Added => (action::TOOL_REGISTER, format!("new tool of identity {group}")),
                ToolChange::Claimed { from } if from.is_empty() => {
                    (action::TOOL_REGISTER, format!("unowned tool claimed by identity {group}"))
                }
                ToolChange::Claimed { from } => {
                    (action::TOOL_REGISTER, format!("claimed by identity {group} from {from}, which has no live token"))
                }
                ToolChange::Changed => (action::TOOL_UPDATE, "definition changed by its owner".to_owned()),
            };
            self.audit(&principal, scope, action, Some(&tool), outcome::ALLOWED, Some(detail)).await?;
        }
        self.store.upsert_worker(&reg.worker_id, &project_id, &self.options.id, now).await?;
        self.reclaim_undelivered(&reg, now).await?;
        let capacity = i64::from(self.session_capacity(reg.capacity));
        let who = SessionIdentity {
            worker_id: reg.worker_id.clone(),
            credential_id,
            group,
            project_id,
            tools: tools.into_iter().map(|t| t.name).collect(),
            capacity,
        };
        let session = Arc::new(Session::new(CONNECTIONS.fetch_add(1, Ordering::Relaxed), who, outbox));
        session.take_slots((reg.running.len() - stop.len()) as i64);
        session.send(Command::Registered {
            coordinator_id: self.options.id.clone(),
            heartbeat_interval_ms: self.heartbeat_interval_ms(),
            stop,
        });
        for r in stop_now {
            session.stop(&r.execution_id, r.attempt, StopReason::Cancelled);
        }
        // Answers the owner gave while this worker was away.
        for (execution_id, row) in self.store.undelivered_answers(&reg.worker_id).await? {
            if let Ok(answer) = self.answer_message(&execution_id, &row) {
                session.send(Command::Answer(answer));
            }
        }
        self.sessions.insert(session.clone());
        tracing::info!(worker_id = %session.worker_id, tools = session.tools.len(), "worker registered");
        self.wake_dispatch();
        Ok(session)
    }

    pub(crate) fn heartbeat_interval_ms(&self) -> i64 {
        (self.options.lease_ms / 3).max(100)
    }

    /// Leases this worker holds for attempts it neither runs nor is settling
    /// never reached it (worker ids are unique per process): make them claimable.
    async fn reclaim_undelivered(&self, reg: &Registration, now: i64) -> Result<()> {
        let known: std::collections::HashSet<&AttemptRef> = reg.running.iter().chain(&reg.settling).collect();
        let unknown: Vec<AttemptRef> =
            self.store.leased_to(&reg.worker_id).await?.into_iter().filter(|a| !known.contains(a)).collect();
        self.undelivered(&reg.worker_id, unknown, now).await
    }

    /// Assignments that provably never reached `worker_id` (never queued, or
    /// still queued when its session ended): claimable again at once.
    ///
    /// The proof exists only now (nobody will report the attempt again), so a
    /// database that is briefly away (a restart) is waited for rather than
    /// letting the lease lapse into `owner_lost`.
    pub(crate) async fn undelivered(&self, worker_id: &str, attempts: Vec<AttemptRef>, now: i64) -> Result<()> {
        const TRIES: u32 = 40;
        for AttemptRef { execution_id: id, attempt } in attempts {
            let event = Event::Undelivered { worker_id: worker_id.to_owned(), attempt };
            let mut tries = 0;
            let applied = loop {
                match self.store.apply(&id, &event, &EventData::default(), now).await {
                    Err(e) if e.is_unavailable() && tries < TRIES && !self.shutdown.is_cancelled() => {
                        tries += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                    }
                    other => break other?,
                }
            };
            if let Some(Ok(applied)) = applied {
                tracing::warn!(execution_id = %id, attempt, "assignment never reached the worker; claimable again");
                self.after_commit(&applied).await;
            }
        }
        self.wake_dispatch();
        Ok(())
    }

    /// Ends, every heartbeat interval, the sessions whose credential was
    /// revoked: nothing more is assigned to them and their stream closes.
    pub(crate) async fn run_session_audit(self: Arc<Self>) {
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
            if let Err(e) = self.end_disowned(&sessions).await {
                tracing::warn!(error = %e, "cannot check tool owners");
            }
        }
    }

    /// Ends the sessions serving a tool an administrator gave to another
    /// identity: from then on only the new owner's workers receive its runs.
    async fn end_disowned(&self, sessions: &[Arc<Session>]) -> Result<()> {
        let mut projects: Vec<&str> = sessions.iter().map(|s| s.project_id.as_str()).collect();
        projects.sort_unstable();
        projects.dedup();
        for project in projects {
            let owners: std::collections::HashMap<String, String> =
                self.store.tool_owners(project).await?.into_iter().collect();
            for s in sessions.iter().filter(|s| s.project_id == project) {
                let disowned = s.tools.iter().find(|t| owners.get(*t).is_some_and(|o| !o.is_empty() && *o != s.group));
                if let Some(tool) = disowned {
                    tracing::warn!(worker_id = %s.worker_id, tool = %tool, "tool given to another identity; session ended");
                    self.sessions.remove(&s.worker_id, s.connection);
                    s.close(CloseReason::Disowned);
                }
            }
        }
        Ok(())
    }

    /// Keeps the leases the worker still holds. An attempt that is no longer
    /// its own gets a stop; one whose cancellation was requested gets the stop
    /// again on every heartbeat, so a lost stop cannot let it finish.
    pub(crate) async fn heartbeat(&self, session: &Session, hb: Heartbeat) -> Result<()> {
        let now = now_ms();
        // A worker runs at most its capacity; a longer list is not believed.
        let believed = usize::try_from(session.capacity).unwrap_or(0);
        let running: Vec<AttemptRef> = hb.running.into_iter().take(believed).collect();
        let settling = hb.settling.into_iter().take(believed);
        let held: Vec<AttemptRef> = running.iter().cloned().chain(settling).collect();
        // A settling attempt's renewal needs no answer: once its settlement
        // is stored the lease is gone, and the acknowledgement tells the worker.
        let results = self.renew_leases(&session.worker_id, &held, now).await;
        for (r, result) in running.into_iter().zip(results) {
            match result {
                Ok(Some(Ok(applied))) if applied.record.state.cancel_requested => {
                    session.stop(&r.execution_id, r.attempt, StopReason::Cancelled);
                }
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err((Ignored::NotHolder, _)))) => {
                    session.refuse(r, MessageKind::Heartbeat);
                }
                // No longer ours (settled, failed or reassigned): tell the worker to stop.
                Ok(Some(Err(_)) | None) => {
                    session.stop(&r.execution_id, r.attempt, StopReason::OwnerLost);
                }
                // Not renewed this time; the next heartbeat tries again.
                Err(e) => tracing::warn!(error = %e, execution_id = %r.execution_id, "lease not renewed"),
            }
        }
        session.set_free(hb.free_slots);
        if hb.free_slots > 0 {
            self.slots_wake.notify_one();
        }
        Ok(())
    }

    /// Renews `worker_id`'s leases of `running`, all in one transaction (one
    /// by one only if the batch fails): a busy worker's heartbeat, or its
    /// registration after a reconnect, must not take longer than the lease it
    /// renews. One answer per attempt, in order.
    async fn renew_leases(&self, worker_id: &str, running: &[AttemptRef], now: i64) -> Vec<store::Result<Renewed>> {
        let lease_until = now + self.options.lease_ms;
        let items: Vec<(ExecutionId, Event, EventData)> = running
            .iter()
            .map(|r| {
                let event = Event::Heartbeat { worker_id: worker_id.to_owned(), attempt: r.attempt, lease_until };
                (r.execution_id.clone(), event, EventData::default())
            })
            .collect();
        match self.store.apply_batch(&items, now).await {
            Ok(results) => results.into_iter().map(Ok).collect(),
            Err(_) => {
                let mut one_by_one = Vec::with_capacity(items.len());
                for (id, event, data) in &items {
                    one_by_one.push(self.store.apply(id, event, data, now).await);
                }
                one_by_one
            }
        }
    }

    /// Keeps a tool's latest progress on its execution, where every reader
    /// sees it. Only the lease holder's report counts; one for an attempt
    /// this session does not hold changes nothing.
    async fn progress(&self, session: &Session, attempt: AttemptRef, report: (f64, f64, &str)) -> Result<()> {
        let recorded = self
            .store
            .record_progress(&attempt.execution_id, attempt.attempt, &session.worker_id, report, now_ms())
            .await?;
        if !recorded {
            tracing::debug!(execution_id = %attempt.execution_id, worker_id = %session.worker_id, "progress for an attempt not held; dropped");
        }
        Ok(())
    }

    /// The event and sealed data a settlement stands for.
    fn settlement_event(&self, worker_id: &str, s: Settlement) -> Result<(ExecutionId, Event, EventData)> {
        let id = s.attempt.execution_id;
        let (outcome, data) = match s.outcome {
            Some(Reported::Result(json)) => {
                let ct = self.ring.seal(id.as_str(), Field::Output, json.as_bytes())?;
                let payload_bytes = ct.len() as i64;
                (Outcome::Success, EventData { output_ct: Some(ct), payload_bytes, ..Default::default() })
            }
            Some(Reported::ToolError { message, retryable, detail_json, protocol }) => {
                let detail = (!detail_json.is_empty())
                    .then(|| self.ring.seal(id.as_str(), Field::ErrorDetail, detail_json.as_bytes()))
                    .transpose()?;
                let message: String = message.chars().take(2_000).collect();
                let payload_bytes = detail.as_ref().map_or(0, |d| d.len() as i64);
                let data = EventData {
                    error_message: Some(message),
                    error_detail_ct: detail,
                    payload_bytes,
                    ..Default::default()
                };
                let outcome = if protocol { Outcome::ProtocolError } else { Outcome::ToolError { retryable } };
                (outcome, data)
            }
            Some(Reported::Cancelled) => (Outcome::Cancelled, EventData::default()),
            Some(Reported::UnsupportedInteraction(what)) => {
                let what: String = what.chars().take(200).collect();
                let message = format!("the remote server requested an unsupported interaction: {what}");
                (Outcome::UnsupportedInteraction, EventData { error_message: Some(message), ..Default::default() })
            }
            None => return Err(Error::Invalid("settlement without an outcome".into())),
        };
        Ok((id, Event::Settle { worker_id: worker_id.to_owned(), attempt: s.attempt.attempt, outcome }, data))
    }

    /// Applies what a session sent, in order; settlements that arrived together
    /// share one transaction (one commit). Answers go back on the session.
    pub async fn handle(&self, session: &Session, batch: Vec<FromWorker>) {
        let mut settlements = Vec::new();
        for msg in batch {
            let handled = match msg {
                FromWorker::Settlement(s) => {
                    settlements.push(s);
                    Ok(())
                }
                FromWorker::Heartbeat(hb) => self.heartbeat(session, hb).await,
                FromWorker::Progress { attempt, current, total, message } => {
                    self.progress(session, attempt, (current, total, &message)).await
                }
                FromWorker::RemoteTaskStarted(m) => self.remote_task_started(session, m).await,
                FromWorker::InputRequested(m) => self.input_requested(session, m).await,
                FromWorker::InputDelivered(m) => self.input_delivered(session, m).await,
                FromWorker::Declined(attempt, why) => {
                    // Nothing more for this session until its next heartbeat says it has room.
                    tracing::debug!(worker_id = %session.worker_id, reason = why.as_str(), "assignment declined");
                    session.set_free(0);
                    self.undelivered(&session.worker_id, vec![attempt], now_ms()).await
                }
            };
            if let Err(e) = handled {
                tracing::warn!(error = %e, worker_id = %session.worker_id, "worker message not applied");
            }
        }
        if settlements.is_empty() {
            return;
        }
        // Acknowledged only once durable; what failed is resent by the worker,
        // here or on another replica.
        for settled in self.settle_batch(session, settlements).await {
            match settled {
                Settled::Acked(attempt) => {
                    session.send(Command::SettlementAck(attempt));
                }
                Settled::Refused(attempt) => {
                    session.refuse(attempt, MessageKind::Settlement);
                }
                Settled::Failed(e) => {
                    tracing::warn!(error = %e, worker_id = %session.worker_id, "settlement not applied")
                }
            }
        }
    }

    /// Records settlements durably, all in one transaction when they can be;
    /// each answer says whether its settlement may be acknowledged. Duplicates,
    /// settlements of attempts this worker no longer holds and of executions
    /// past retention are acknowledged too (they change nothing). A settlement
    /// of an attempt another worker holds is refused.
    pub(crate) async fn settle_batch(&self, session: &Session, settlements: Vec<Settlement>) -> Vec<Settled> {
        let mut out = Vec::with_capacity(settlements.len());
        let mut items = Vec::with_capacity(settlements.len());
        for s in settlements {
            let ack = s.attempt.clone();
            match self.settlement_event(&session.worker_id, s) {
                Ok(item) => items.push((ack, item)),
                Err(e) => out.push(Settled::Failed(e)),
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
                Err(e) => out.push(Settled::Failed(e)),
            }
        }
        futures_util::future::join_all(committed.iter().map(|a| self.after_commit(a))).await;
        session.return_slots(freed);
        self.slots_wake.notify_one();
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
