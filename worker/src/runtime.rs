//! The worker runtime: dial a coordinator, register, run assignments, keep
//! leases with heartbeats, and resend settlements until acknowledged, across
//! reconnects and coordinator restarts. A session rejected for a permanent reason
//! (bad credential, refused tool) ends the worker with that error.

use crate::metrics::Metrics;
use crate::sdk::{Context, Failure, Tool};
use baton_proto::worker::v1::{
    self as wpb, WorkerMessage, coordinator_message::Msg, settlement, worker_message,
    worker_session_client::WorkerSessionClient,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

#[derive(Clone, Debug)]
pub struct Options {
    pub coordinator_url: String,
    pub token: String,
    pub worker_id: String,
    pub capacity: u32,
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
    #[error("invalid coordinator url: {0}")]
    Url(String),
}

type Key = (String, u32);

#[derive(Default)]
struct State {
    running: HashMap<Key, CancellationToken>,
    /// Settlements sent but not yet acknowledged; resent after every reconnect.
    unacked: HashMap<Key, wpb::Settlement>,
    outbox: Option<mpsc::Sender<WorkerMessage>>,
    /// Set at shutdown: take no new work, finish and settle what runs.
    draining_since: Option<tokio::time::Instant>,
}

pub struct Worker {
    options: Options,
    /// In registration order: clients list tools in the order the author gave.
    tools: Vec<(String, Arc<dyn Tool>)>,
    state: Mutex<State>,
    pub metrics: Metrics,
    tasks: TaskTracker,
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
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            incarnation.copy_from_slice(&(nanos ^ u64::from(std::process::id()) << 40).to_le_bytes()[..6]);
        }
        let suffix: String = incarnation.iter().map(|b| format!("{b:02x}")).collect();
        options.worker_id = format!("{}.{suffix}", options.worker_id);
        let tools = tools.into_iter().map(|t| (t.spec().name, t)).collect();
        Arc::new(Worker {
            options,
            tools,
            state: Mutex::new(State::default()),
            metrics: Metrics::default(),
            tasks: TaskTracker::new(),
        })
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A poisoned lock means a panic elsewhere already; keep serving with its data.
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    fn registration(&self) -> wpb::Register {
        let tools = self
            .tools
            .iter()
            .map(|(_, t)| {
                let s = t.spec();
                wpb::ToolRegistration {
                    name: s.name,
                    toolkit_name: s.toolkit_name,
                    toolkit_version: s.toolkit_version,
                    description: s.description,
                    input_schema_json: s.input_schema.to_string(),
                    background: s.background.as_str().to_owned(),
                    task_time_input: s.task_time_input,
                    max_attempts: s.max_attempts,
                    max_ttl_ms: s.max_ttl.map_or(0, |d| d.as_millis() as i64),
                    remote: false,
                }
            })
            .collect();
        let attempt = |(id, attempt): &Key| wpb::RunningAttempt { execution_id: id.clone(), attempt: *attempt };
        let (running, settling) =
            self.with_state(|s| (s.running.keys().map(attempt).collect(), s.unacked.keys().map(attempt).collect()));
        wpb::Register {
            worker_id: self.options.worker_id.clone(),
            worker_token: self.options.token.clone(),
            tools,
            capacity: self.options.capacity,
            running,
            settling,
        }
    }

    /// Runs until `shutdown`, then drains: it reports no free slots, lets running
    /// tools finish and keeps the session until their settlements are
    /// acknowledged, for at most `drain`; whatever still runs then is stopped.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, drain: Duration) -> Result<(), Error> {
        let mut backoff = Duration::from_millis(100);
        while !self.drained(drain) {
            match self.clone().session(&shutdown, drain).await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(SessionEnd::Refused(why)) => return Err(Error::Refused(why)),
                Err(SessionEnd::Transport(why)) => {
                    tracing::warn!(error = %why, "coordinator session failed; reconnecting");
                }
            }
            self.with_state(|s| s.outbox = None);
            if self.drained(drain) {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled(), if !self.draining() => self.start_draining(),
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        self.tasks.close();
        let unfinished = self.with_state(|s| {
            s.running.values().for_each(CancellationToken::cancel);
            s.running.len() + s.unacked.len()
        });
        if unfinished > 0 {
            tracing::warn!(unfinished, "drain period over; stopped what still ran");
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), self.tasks.wait()).await;
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
            Some(since) => (s.running.is_empty() && s.unacked.is_empty()) || since.elapsed() >= drain,
            None => false,
        })
    }

    async fn session(self: Arc<Self>, shutdown: &CancellationToken, drain: Duration) -> Result<(), SessionEnd> {
        let mut client = WorkerSessionClient::connect(self.options.coordinator_url.clone())
            .await
            .map_err(|e| SessionEnd::Transport(e.to_string()))?;
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
                    let _ = tx.send(self.heartbeat()).await;
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
            match m {
                Msg::Registered(r) => {
                    tracing::info!(coordinator_id = %r.coordinator_id, "registered");
                    heartbeat = tokio::time::interval(Duration::from_millis(
                        u64::try_from(r.heartbeat_interval_ms).unwrap_or(2_000).max(100),
                    ));
                    for s in r.stop {
                        self.cancel_running(&(s.execution_id, s.attempt));
                    }
                    let pending: Vec<_> = self.with_state(|s| {
                        s.outbox = Some(tx.clone());
                        s.unacked.values().cloned().collect()
                    });
                    for settlement in pending {
                        let _ = tx.send(msg(worker_message::Msg::Settlement(settlement))).await;
                    }
                }
                Msg::Assignment(a) => self.clone().start(a),
                Msg::Stop(s) => self.cancel_running(&(s.execution_id, s.attempt)),
                // Remote MCP relays (issue #7) are handled by the remote driver.
                Msg::Ack(_) | Msg::InputResponse(_) => {}
                Msg::SettlementAck(ack) => {
                    self.with_state(|s| s.unacked.remove(&(ack.execution_id, ack.attempt)));
                }
            }
        }
    }

    fn heartbeat(&self) -> WorkerMessage {
        let (running, busy, draining) = self.with_state(|s| {
            let running: Vec<_> = s
                .running
                .keys()
                .map(|(id, attempt)| wpb::RunningAttempt { execution_id: id.clone(), attempt: *attempt })
                .collect();
            let busy = running.len();
            (running, busy, s.draining_since.is_some())
        });
        let free_slots = if draining { 0 } else { (self.options.capacity as usize).saturating_sub(busy) as u32 };
        msg(worker_message::Msg::Heartbeat(wpb::Heartbeat { running, free_slots }))
    }

    fn cancel_running(&self, key: &Key) {
        self.with_state(|s| {
            if let Some(token) = s.running.get(key) {
                token.cancel();
            }
        });
    }

    fn start(self: Arc<Self>, a: wpb::Assignment) {
        let key = (a.execution_id.clone(), a.attempt);
        let cancel = CancellationToken::new();
        let already = self.with_state(|s| {
            // A redelivered assignment for an attempt already running or settled is ignored.
            let known = s.running.contains_key(&key) || s.unacked.contains_key(&key);
            if !known {
                s.running.insert(key.clone(), cancel.clone());
            }
            known
        });
        if already {
            return;
        }
        let span =
            tracing::info_span!("tool", execution_id = %a.execution_id, tool = %a.tool_name, attempt = a.attempt);
        baton_proto::trace::adopt_traceparent(&a.traceparent, &span);
        let worker = self.clone();
        self.tasks.spawn(
            async move {
                let outcome = worker.invoke(&a, cancel).await;
                let settlement = wpb::Settlement {
                    execution_id: a.execution_id.clone(),
                    attempt: a.attempt,
                    outcome: Some(outcome),
                };
                let outbox = worker.with_state(|s| {
                    s.running.remove(&key);
                    s.unacked.insert(key.clone(), settlement.clone());
                    s.outbox.clone()
                });
                if let Some(tx) = outbox {
                    let _ = tx.send(msg(worker_message::Msg::Settlement(settlement))).await;
                }
            }
            .instrument(span),
        );
    }

    async fn invoke(&self, a: &wpb::Assignment, cancel: CancellationToken) -> settlement::Outcome {
        let Some((_, tool)) = self.tools.iter().find(|(name, _)| *name == a.tool_name) else {
            return settlement::Outcome::Error(wpb::ToolError {
                message: format!("this worker does not serve {:?}", a.tool_name),
                retryable: false,
                detail_json: String::new(),
            });
        };
        let input = serde_json::from_str(&a.input_json).unwrap_or(serde_json::Value::Null);
        let deadline = millis_to_time(a.deadline_ms);
        // The deadline also stops the tool, even if the coordinator's stop is lost;
        // a small margin lets the coordinator's own verdict normally come first.
        let until_deadline =
            deadline.duration_since(SystemTime::now()).unwrap_or_default() + Duration::from_millis(250);
        let guard = cancel.clone();
        let deadline_timer = tokio::spawn(async move {
            tokio::time::sleep(until_deadline).await;
            guard.cancel();
        });
        let (progress, mut progress_rx) = mpsc::unbounded_channel();
        let cx = Context { execution_id: a.execution_id.clone(), attempt: a.attempt, cancel, deadline, progress };
        self.metrics.invoked(&a.tool_name);
        let outbox = self.with_state(|s| s.outbox.clone());
        let forward = tokio::spawn(async move {
            while let Some((execution_id, attempt, message)) = progress_rx.recv().await {
                if let Some(tx) = &outbox {
                    let _ = tx
                        .send(msg(worker_message::Msg::Progress(wpb::Progress { execution_id, attempt, message })))
                        .await;
                }
            }
        });
        let result = tool.call(input, cx).await;
        deadline_timer.abort();
        forward.abort();
        match result {
            Ok(output) => settlement::Outcome::ResultJson(output.to_json().to_string()),
            Err(Failure::Cancelled) => settlement::Outcome::Cancelled(true),
            Err(Failure::Error { message, retryable, detail }) => settlement::Outcome::Error(wpb::ToolError {
                message,
                retryable,
                detail_json: if detail.is_null() { String::new() } else { detail.to_string() },
            }),
        }
    }
}

enum SessionEnd {
    Refused(String),
    Transport(String),
}

impl SessionEnd {
    fn from_status(status: tonic::Status) -> Self {
        use tonic::Code;
        match status.code() {
            Code::Unauthenticated | Code::PermissionDenied | Code::InvalidArgument => {
                SessionEnd::Refused(status.message().to_owned())
            }
            _ => SessionEnd::Transport(status.message().to_owned()),
        }
    }
}
