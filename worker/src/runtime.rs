//! The worker runtime: dial a coordinator, register, run assignments, keep
//! leases with heartbeats, and resend settlements until acknowledged, across
//! reconnects and coordinator restarts. A session rejected for a permanent reason
//! (bad credential, refused tool) ends the worker with that error.

mod attempts;
mod invoke;

use crate::metrics::Metrics;
use crate::reconnect::Reconnect;
use crate::remote::link::{Relay, Uplink};
use crate::remote::{RemoteServer, RemoteTool};
use crate::sdk::Tool;
use crate::supervise::Supervisor;
use crate::wire::registration_of;
use attempts::{Attempts, Key, Start};
use baton_proto::worker::v1::{
    self as wpb, DeclineReason, MessageKind, StopReason, WorkerMessage, coordinator_message::Msg, worker_message,
    worker_session_client::WorkerSessionClient,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

#[derive(Clone, Debug)]
pub struct Options {
    pub coordinator_url: String,
    /// Further coordinators, tried in turn with `coordinator_url` whenever
    /// the current one cannot be reached (see `crate::reconnect`).
    pub coordinator_urls: Vec<String>,
    pub token: String,
    pub worker_id: String,
    pub capacity: u32,
    /// Remote MCP servers whose tools this worker serves (discovered at start).
    pub remote_servers: Vec<RemoteServer>,
    /// For an `https://` coordinator: the CA that verifies it and this worker's
    /// client certificate (mTLS); `None` trusts the system roots. Unused for `http://`.
    pub tls: Option<tonic::transport::ClientTlsConfig>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("worker_id", &self.options.worker_id).finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the coordinator refused this worker: {0}")]
    Refused(String),
    /// Every coordinator refused this SDK's version (docs/upgrading.md); the
    /// coordinator's words name both versions and the way out. Not retried:
    /// only an upgrade (of the worker or the coordinators) changes the answer.
    #[error("the coordinator does not support this worker's SDK version: {0}")]
    Incompatible(String),
    #[error("invalid coordinator url: {0}")]
    Url(String),
}

#[derive(Default)]
struct State {
    /// Every attempt started here and not yet acknowledged as settled.
    attempts: Attempts,
    outbox: Option<mpsc::Sender<WorkerMessage>>,
    /// Set at shutdown: take no new work, finish and settle what runs.
    draining_since: Option<tokio::time::Instant>,
}

pub struct Worker {
    options: Options,
    /// In registration order: clients list tools in the order the author gave.
    tools: Vec<(String, Arc<dyn Tool>)>,
    /// Tools of remote MCP servers, set once discovery at start succeeded.
    remote: std::sync::OnceLock<Vec<RemoteTool>>,
    state: Mutex<State>,
    pub metrics: Metrics,
    /// Tool runs and their helpers, awaited (briefly) when the worker stops.
    tasks: Supervisor,
}

fn msg(m: worker_message::Msg) -> WorkerMessage {
    WorkerMessage { msg: Some(m) }
}

fn millis_to_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl Worker {
    /// `options.worker_id` is a base name: each process appends its own
    /// incarnation, because the coordinator trusts a worker id to remember every
    /// attempt it started (see `Register.settling`).
    pub fn new(mut options: Options, tools: Vec<Arc<dyn Tool>>) -> Arc<Self> {
        let mut incarnation = [0u8; 6];
        if getrandom::fill(&mut incarnation).is_err() {
            // Unique enough per host: pid and start time.
            let nanos = baton_proto::clock::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            incarnation.copy_from_slice(&(nanos ^ u64::from(std::process::id()) << 40).to_le_bytes()[..6]);
        }
        let suffix: String = incarnation.iter().map(|b| format!("{b:02x}")).collect();
        options.worker_id = format!("{}.{suffix}", options.worker_id);
        Self::incarnation(options, tools)
    }

    /// A worker whose `options.worker_id` is already this incarnation's own
    /// (never used by an earlier process): the deterministic simulation names
    /// its workers itself.
    pub fn incarnation(options: Options, tools: Vec<Arc<dyn Tool>>) -> Arc<Self> {
        let tools = tools.into_iter().map(|t| (t.spec().name, t)).collect();
        Arc::new(Worker {
            options,
            tools,
            remote: std::sync::OnceLock::new(),
            state: Mutex::new(State::default()),
            metrics: Metrics::default(),
            tasks: Supervisor::new(),
        })
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A poisoned lock means a panic elsewhere already; keep serving with its data.
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// The registration this worker opens a session with.
    pub fn registration(&self) -> wpb::Register {
        let tools = self
            .tools
            .iter()
            .map(|(_, t)| registration_of(t.spec(), false))
            .chain(self.remote_tools().iter().map(|t| registration_of(t.spec.clone(), true)))
            .collect();
        let (running, settling, _) = self.held();
        wpb::Register {
            worker_id: self.options.worker_id.clone(),
            worker_token: self.options.token.clone(),
            tools,
            capacity: self.options.capacity,
            running,
            settling,
            sdk_version: baton_proto::version::own(env!("CARGO_PKG_VERSION")).to_string(),
        }
    }

    /// Runs until `shutdown`, then drains: it reports no free slots, lets running
    /// tools finish and keeps the session until their settlements are
    /// acknowledged, for at most `drain`; whatever still runs then is stopped.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, drain: Duration) -> Result<(), Error> {
        if !self.options.remote_servers.is_empty() && self.remote.get().is_none() {
            let Some(found) = crate::remote::discover_all(&self.options.remote_servers, &shutdown).await else {
                return Ok(());
            };
            let hosted: std::collections::HashSet<&str> = self.tools.iter().map(|(n, _)| n.as_str()).collect();
            let mut seen = std::collections::HashSet::new();
            let found = found
                .into_iter()
                .filter(|t| {
                    let fresh = !hosted.contains(t.spec.name.as_str()) && seen.insert(t.spec.name.clone());
                    if !fresh {
                        tracing::warn!(tool = %t.spec.name, "a remote tool of this name is already served; skipped");
                    }
                    fresh
                })
                .collect();
            let _ = self.remote.set(found);
        }
        let mut reconnect = Reconnect::new(&self.options.coordinator_url, &self.options.coordinator_urls);
        // Coordinators that refused this SDK's version in a row: in a rolling
        // upgrade another may take it, but once each has said no, it is over.
        let mut incompatible = 0;
        while !self.drained(drain) {
            let url = reconnect.endpoint().to_owned();
            match self.clone().session(&url, &shutdown, drain).await {
                Ok(()) => {}
                Err(SessionEnd::Refused(why)) => return Err(Error::Refused(why)),
                Err(SessionEnd::Incompatible(why)) => {
                    incompatible += 1;
                    if incompatible >= reconnect.count() {
                        return Err(Error::Incompatible(why));
                    }
                    tracing::error!(coordinator = %url, "{why}; trying another coordinator");
                }
                Err(SessionEnd::Transport(why)) => {
                    tracing::warn!(coordinator = %url, error = %why, "coordinator session failed; reconnecting");
                }
            }
            // The outbox is set once the coordinator accepted the registration.
            let registered = self.detach();
            if registered {
                incompatible = 0;
            }
            let pause = reconnect.ended(registered);
            if self.drained(drain) {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled(), if !self.draining() => self.start_draining(),
                _ = tokio::time::sleep(pause) => {}
            }
        }
        let unfinished = self.with_state(|s| {
            s.attempts.cancel_all();
            s.attempts.len()
        });
        if unfinished > 0 {
            tracing::warn!(unfinished, "drain period over; stopped what still ran");
        }
        let _ = self.tasks.shutdown(Duration::from_secs(2)).await;
        Ok(())
    }

    fn draining(&self) -> bool {
        self.with_state(|s| s.draining_since.is_some())
    }

    fn start_draining(&self) {
        self.with_state(|s| {
            s.draining_since.get_or_insert_with(tokio::time::Instant::now);
        });
        tracing::info!("draining: finishing running tools, taking no new work");
    }

    /// Draining, and either idle (nothing running or unsettled) or out of time.
    fn drained(&self, drain: Duration) -> bool {
        self.with_state(|s| match s.draining_since {
            Some(since) => s.attempts.is_empty() || since.elapsed() >= drain,
            None => false,
        })
    }

    async fn session(
        self: Arc<Self>,
        url: &str,
        shutdown: &CancellationToken,
        drain: Duration,
    ) -> Result<(), SessionEnd> {
        let channel = crate::dial::connect(url, self.options.tls.as_ref())
            .await
            .map_err(|e| SessionEnd::Transport(e.to_string()))?;
        let mut client = WorkerSessionClient::new(channel);
        let (tx, rx) = mpsc::channel(1024);
        tx.send(msg(worker_message::Msg::Register(self.registration())))
            .await
            .map_err(|_| SessionEnd::Transport("session closed".into()))?;
        let mut incoming = match client.session(ReceiverStream::new(rx)).await {
            Ok(r) => r.into_inner(),
            Err(status) => return Err(SessionEnd::from_status(status)),
        };
        let mut heartbeat = tokio::time::interval(Duration::from_secs(2));
        let mut drain_check = tokio::time::interval(Duration::from_millis(50));
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled(), if !self.draining() => {
                    self.start_draining();
                    let _ = tx.send(self.heartbeat()).await;
                    continue;
                }
                _ = drain_check.tick(), if self.draining() => {
                    if self.drained(drain) {
                        return Ok(());
                    }
                    continue;
                }
                _ = heartbeat.tick() => {
                    for m in self.beat(heartbeat.period(), tokio::time::Instant::now()) {
                        let _ = tx.send(m).await;
                    }
                    continue;
                }
                m = incoming.message() => m,
            };
            let m = match next {
                Ok(Some(wpb::CoordinatorMessage { msg: Some(m) })) => m,
                Ok(Some(_)) => continue,
                Ok(None) => return Err(SessionEnd::Transport("coordinator closed the session".into())),
                Err(status) => return Err(SessionEnd::from_status(status)),
            };
            if let Some(period) = self.receive(m, &tx).await {
                heartbeat = tokio::time::interval(period);
            }
        }
    }

    /// Acts on one message from the coordinator, whatever carried it (the
    /// gRPC session, or the deterministic simulation in `baton-proof`); `tx`
    /// is the session's way back. A registration answers with the heartbeat
    /// period the coordinator asks for.
    pub async fn receive(self: &Arc<Self>, m: Msg, tx: &mpsc::Sender<WorkerMessage>) -> Option<Duration> {
        match m {
            Msg::Registered(r) => {
                tracing::info!(coordinator_id = %r.coordinator_id, "registered");
                let period = Duration::from_millis(u64::try_from(r.heartbeat_interval_ms).unwrap_or(2_000).max(100));
                for s in r.stop {
                    self.stop(&(s.execution_id, s.attempt), StopReason::OwnerLost);
                }
                let pending: Vec<_> = self.with_state(|s| {
                    s.outbox = Some(tx.clone());
                    s.attempts.unacknowledged()
                });
                for settlement in pending {
                    let _ = tx.send(msg(worker_message::Msg::Settlement(settlement))).await;
                }
                return Some(period);
            }
            Msg::Assignment(a) => self.clone().start(a),
            Msg::Stop(s) => {
                let reason = s.reason();
                self.stop(&(s.execution_id, s.attempt), reason);
            }
            Msg::Ack(a) => {
                let kind = a.kind();
                self.relay(&(a.execution_id, a.attempt), Relay::Ack(kind));
            }
            Msg::InputResponse(r) => self.relay(&(r.execution_id.clone(), r.attempt), Relay::Input(r)),
            Msg::SettlementAck(ack) => {
                self.with_state(|s| s.attempts.acknowledged(&(ack.execution_id, ack.attempt)));
            }
            // The coordinator says this worker does not hold the attempt: what
            // it sent changed nothing, and sending it again would not either.
            Msg::Refused(r) => {
                let kind = r.kind();
                tracing::error!(execution_id = %r.execution_id, attempt = r.attempt, kind = kind.name(), code = %r.code, "coordinator refused a message: {}", r.message);
                let key = (r.execution_id, r.attempt);
                if kind == MessageKind::Settlement {
                    self.with_state(|s| s.attempts.acknowledged(&key));
                } else {
                    self.stop(&key, StopReason::OwnerLost);
                }
            }
        }
        None
    }

    /// What a heartbeat tick sends: the heartbeat, then every settlement still
    /// unacknowledged `period` after it was last sent (marked as sent `now`).
    pub fn beat(&self, period: Duration, now: tokio::time::Instant) -> Vec<WorkerMessage> {
        let overdue = self.overdue_settlements(period, now).into_iter();
        std::iter::once(self.heartbeat()).chain(overdue.map(|s| msg(worker_message::Msg::Settlement(s)))).collect()
    }

    /// The session ended: messages wait for the next one. True when it had
    /// been registered.
    pub fn detach(&self) -> bool {
        self.with_state(|s| s.outbox.take().is_some())
    }

    /// Unacknowledged settlements last sent more than `after` before `now`,
    /// marked as sent at `now`.
    fn overdue_settlements(&self, after: Duration, now: tokio::time::Instant) -> Vec<wpb::Settlement> {
        self.with_state(|s| s.attempts.overdue(after, now))
    }

    /// The attempts this worker runs, those it is settling, and whether it drains.
    fn held(&self) -> (Vec<wpb::RunningAttempt>, Vec<wpb::RunningAttempt>, bool) {
        let attempt = |(id, attempt): &Key| wpb::RunningAttempt { execution_id: id.clone(), attempt: *attempt };
        self.with_state(|s| {
            (
                s.attempts.running().map(attempt).collect(),
                s.attempts.settling().map(attempt).collect(),
                s.draining_since.is_some(),
            )
        })
    }

    fn heartbeat(&self) -> WorkerMessage {
        let (running, settling, draining) = self.held();
        let busy = running.len();
        let free_slots = if draining { 0 } else { (self.options.capacity as usize).saturating_sub(busy) as u32 };
        msg(worker_message::Msg::Heartbeat(wpb::Heartbeat { running, free_slots, settling }))
    }

    fn remote_tools(&self) -> &[RemoteTool] {
        self.remote.get().map_or(&[], Vec::as_slice)
    }

    /// The coordinator's stop: a remote driver decides what it means for its
    /// remote task; a hosted tool is cancelled.
    fn stop(&self, key: &Key, reason: StopReason) {
        self.with_state(|s| s.attempts.stop(key, reason));
    }

    /// Routes an acknowledgement or an answer to the driver of `key`, if it runs here.
    fn relay(&self, key: &Key, r: Relay) {
        self.with_state(|s| s.attempts.relay(key, r));
    }

    fn start(self: Arc<Self>, a: wpb::Assignment) {
        let key = (a.execution_id.clone(), a.attempt);
        let cancel = CancellationToken::new();
        let remote = self.remote_tools().iter().find(|t| t.spec.name == a.tool_name).cloned();
        let (relay_tx, relay) = match remote {
            Some(_) => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        // A redelivered assignment for an attempt already running or settled is
        // ignored; one beyond capacity, or arriving while draining, is declined:
        // capacity is a hard bound, and the coordinator gives the work to another.
        let capacity = self.options.capacity as usize;
        let (start, draining) = self.with_state(|s| {
            if s.draining_since.is_some() {
                return (Start::Full, true);
            }
            (s.attempts.start(key.clone(), cancel.clone(), relay_tx, capacity), false)
        });
        match start {
            Start::Started => {}
            Start::Known => return,
            Start::Full => {
                let reason = if draining { DeclineReason::Draining } else { DeclineReason::AtCapacity };
                tracing::info!(execution_id = %a.execution_id, attempt = a.attempt, reason = reason.name(), "assignment declined");
                let mut declined = wpb::AssignmentDeclined {
                    execution_id: a.execution_id.clone(),
                    attempt: a.attempt,
                    ..Default::default()
                };
                declined.write_reason(reason);
                // Sent in order with everything else; if the session is gone, the
                // next registration does not list the attempt, which proves the same.
                if let Some(tx) = self.with_state(|s| s.outbox.clone()) {
                    self.tasks.spawn("assignment declined", async move {
                        let _ = tx.send(msg(worker_message::Msg::Declined(declined))).await;
                    });
                }
                return;
            }
        }
        // Named as the GenAI conventions name a tool execution.
        let span = tracing::info_span!(
            "tool",
            otel.name = %format!("execute_tool {}", a.tool_name),
            otel.kind = "consumer",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %a.tool_name,
            execution_id = %a.execution_id,
            attempt = a.attempt,
        );
        baton_proto::trace::adopt_traceparent(&a.traceparent, &span);
        let worker = self.clone();
        self.tasks.spawn(
            "tool attempt",
            async move {
                let running = worker.metrics.running();
                let outcome = match (remote, relay) {
                    (Some(tool), Some(mut relay)) => {
                        if a.resume_remote_task_id.is_empty() {
                            worker.metrics.invoked(&a.tool_name);
                        }
                        let up = WorkerUplink(worker.clone());
                        crate::remote::driver::Driver::new(&tool, &a, &up, &mut relay, cancel).run().await
                    }
                    _ => Some(worker.invoke(&a, cancel).await),
                };
                drop(running);
                let Some(outcome) = outcome else {
                    // Abandoned: the recorded remote task is left to its next owner.
                    worker.with_state(|s| s.attempts.abandoned(&key));
                    return;
                };
                let settlement = wpb::Settlement {
                    execution_id: a.execution_id.clone(),
                    attempt: a.attempt,
                    outcome: Some(outcome),
                };
                let outbox = worker.with_state(|s| {
                    s.attempts.settled(key, settlement.clone(), tokio::time::Instant::now());
                    s.outbox.clone()
                });
                if let Some(tx) = outbox {
                    let _ = tx.send(msg(worker_message::Msg::Settlement(settlement))).await;
                }
            }
            .instrument(span),
        );
    }
}

/// A remote driver's line to the coordinator: the worker's current session.
struct WorkerUplink(Arc<Worker>);

#[tonic::async_trait]
impl Uplink for WorkerUplink {
    async fn send(&self, m: worker_message::Msg) -> bool {
        let outbox = self.0.with_state(|s| s.outbox.clone());
        match outbox {
            Some(tx) => tx.send(msg(m)).await.is_ok(),
            None => false,
        }
    }
}

enum SessionEnd {
    Refused(String),
    Incompatible(String),
    Transport(String),
}

impl SessionEnd {
    fn from_status(status: tonic::Status) -> Self {
        use baton_proto::error::{ErrorCode, WireError};
        use tonic::Code;
        if WireError::from_status(&status).code == ErrorCode::VersionUnsupported {
            return SessionEnd::Incompatible(status.message().to_owned());
        }
        match status.code() {
            Code::Unauthenticated | Code::PermissionDenied | Code::InvalidArgument => {
                SessionEnd::Refused(status.message().to_owned())
            }
            _ => SessionEnd::Transport(status.message().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests;
