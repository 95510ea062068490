//! Runs one attempt of a remote tool: calls it (as a task when the server
//! supports tasks), records the remote task with the coordinator before relying
//! on it, polls it at the server's interval, relays input requests and
//! answers, cancels it when asked, and yields the settlement. An attempt that
//! resumes a recorded task never calls the tool again.

use super::RemoteTool;
use super::client::{Client, Dialect};
use super::link::{Relay, Uplink};
use super::task::{Called, TaskRef, result_json};
use super::transport::{CallError, Incoming};
use baton_proto::worker::v1::{self as wpb, MessageKind, StopReason, settlement::Outcome, worker_message::Msg};
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const RESEND: Duration = Duration::from_secs(2);
const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// How an attempt ends here.
#[derive(Debug, PartialEq)]
pub(crate) enum Flow {
    Settle(Outcome),
    /// Leave the remote task alone and settle nothing: the worker is going
    /// away or the coordinator gave the attempt to another owner.
    Abandon,
}

/// The remote server failed the call (a JSON-RPC error, no usable answer):
/// a protocol failure, which the caller sees as one, not the tool's own
/// `isError` result (that arrives as a result and is passed on as it is).
fn error(message: impl Into<String>, detail: Option<&Value>) -> Flow {
    Flow::Settle(Outcome::Error(wpb::ToolError {
        message: message.into(),
        retryable: false,
        detail_json: detail.map(Value::to_string).unwrap_or_default(),
        protocol_error: true,
    }))
}

/// How a call that got no result settles; `task_known` when a remote task
/// was started (or recorded by an earlier owner).
fn failure(e: CallError, task_known: bool) -> Flow {
    match e {
        CallError::Unsupported(what) => Flow::Settle(Outcome::UnsupportedInteraction(what)),
        CallError::Rpc { code, message, data } => error(message, Some(&json!({"code": code, "data": data}))),
        CallError::Transport(_) if !task_known => {
            error("the remote tool call's outcome is unknown (no answer from the server)", None)
        }
        other => error(other.to_string(), None),
    }
}

/// What the 2025-11-25 `tasks/result` reader passes on.
enum StreamEvent {
    Msg(Incoming),
    Closed(Option<CallError>),
}

pub(crate) struct Driver<'a> {
    tool: &'a RemoteTool,
    client: Arc<Client>,
    a: &'a wpb::Assignment,
    up: &'a dyn Uplink,
    relay: &'a mut mpsc::UnboundedReceiver<Relay>,
    abandon: CancellationToken,
    deadline: SystemTime,
    task: Option<TaskRef>,
    recorded: bool,
    published: HashSet<String>,
    delivered: HashSet<String>,
    to_publish: Vec<wpb::InputRequestSpec>,
    answers: VecDeque<wpb::InputResponse>,
    stop: Option<StopReason>,
    cancel_sent: bool,
    outcome: Option<Flow>,
    last_message: Option<String>,
    stream: Option<(mpsc::Receiver<StreamEvent>, tokio::task::JoinHandle<()>)>,
}

impl Drop for Driver<'_> {
    fn drop(&mut self) {
        if let Some((_, h)) = self.stream.take() {
            h.abort();
        }
    }
}

impl<'a> Driver<'a> {
    pub(crate) fn new(
        tool: &'a RemoteTool,
        a: &'a wpb::Assignment,
        up: &'a dyn Uplink,
        relay: &'a mut mpsc::UnboundedReceiver<Relay>,
        abandon: CancellationToken,
    ) -> Self {
        Driver {
            tool,
            client: tool.client.clone(),
            a,
            up,
            relay,
            abandon,
            deadline: UNIX_EPOCH + Duration::from_millis(u64::try_from(a.deadline_ms).unwrap_or(0)),
            task: None,
            recorded: false,
            published: HashSet::new(),
            delivered: HashSet::new(),
            to_publish: Vec::new(),
            answers: VecDeque::new(),
            stop: None,
            cancel_sent: false,
            outcome: None,
            last_message: None,
            stream: None,
        }
    }

    /// `None`: abandoned, settle nothing.
    pub(crate) async fn run(mut self) -> Option<Outcome> {
        match self.drive().await {
            Flow::Settle(o) => Some(o),
            Flow::Abandon => None,
        }
    }

    async fn drive(&mut self) -> Flow {
        if !self.a.resume_remote_task_id.is_empty() {
            self.task = Some(TaskRef::decode(&self.a.resume_remote_task_id));
            self.recorded = true;
            self.answers.extend(self.a.pending_input.iter().cloned());
            tracing::info!("resuming the recorded remote task");
        } else {
            match self.start().await {
                Ok(()) => {}
                Err(flow) => return flow,
            }
        }
        match self.poll_loop().await {
            Ok(never) => match never {},
            Err(flow) => flow,
        }
    }

    fn remaining(&self) -> Duration {
        self.deadline.duration_since(baton_proto::clock::now()).unwrap_or_default()
    }

    /// Relays the remote server's progress (the coordinator throttles what it stores).
    async fn progress(&self, current: f64, total: Option<f64>, message: String) {
        let p = crate::wire::progress_message(
            &self.a.execution_id,
            self.a.attempt,
            crate::sdk::Progress { current, total, message },
        );
        self.up.send(Msg::Progress(p)).await;
    }

    /// Calls the tool once (retrying only while the server provably never got
    /// the request), and records the remote task if one was created.
    async fn start(&mut self) -> Result<(), Flow> {
        let arguments: Value = serde_json::from_str(&self.a.input_json).unwrap_or(json!({}));
        let mut params = json!({"name": self.tool.remote_name, "arguments": arguments});
        if self.tool.as_task && self.client.dialect == Dialect::V2025 {
            params["task"] = json!({"ttl": self.remaining().as_millis() as u64});
        }
        if !self.tool.as_task {
            params["_meta"] = json!({"progressToken": self.a.execution_id});
        }
        let session = self.client.session();
        let client = self.client.clone();
        let answer = self
            .retrying(false, move || {
                let (client, params) = (client.clone(), params.clone());
                async move { client.call("tools/call", params, None, None).await }
            })
            .await?;
        match Called::parse(answer, self.client.dialect) {
            Called::Result(r) => Err(Flow::Settle(Outcome::ResultJson(result_json(&r)))),
            Called::InputRequired(_) => {
                Err(Flow::Settle(Outcome::UnsupportedInteraction("input_required before a task was created".into())))
            }
            Called::Task(t) => {
                let session =
                    if self.client.dialect == Dialect::V2025 { self.client.session().or(session) } else { None };
                let task = TaskRef { id: t.id.clone(), session };
                self.task = Some(task.clone());
                let m = Msg::RemoteTaskStarted(wpb::RemoteTaskStarted {
                    execution_id: self.a.execution_id.clone(),
                    attempt: self.a.attempt,
                    remote_task_id: task.encode(),
                    remote_ttl_ms: t.ttl_ms.filter(|t| *t > 0).unwrap_or(0),
                });
                self.await_ack(m, MessageKind::RemoteTask).await?;
                self.recorded = true;
                self.on_state(t).await
            }
        }
    }

    /// Repeats `f` while the failure is transient (for calls that are not
    /// safe to repeat, only while the request provably never arrived), with
    /// backoff, until the deadline.
    async fn retrying<T, F, Fut>(&mut self, idempotent: bool, mut f: F) -> Result<T, Flow>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
    {
        let mut backoff = Duration::from_millis(200);
        loop {
            let remaining = self.remaining();
            let relay = &mut *self.relay;
            let abandon = &self.abandon;
            let e = tokio::select! {
                r = f() => match r {
                    Ok(v) => return Ok(v),
                    Err(e) => e,
                },
                _ = tokio::time::sleep(remaining) => return Err(self.timed_out().await),
                _ = abandon.cancelled() => return Err(Flow::Abandon),
                r = relay.recv() => {
                    match r {
                        Some(Relay::Input(i)) => self.answers.push_back(i),
                        Some(Relay::Ack(_)) => {}
                        None => return Err(Flow::Abandon),
                        // Before a task exists the call itself is what stops:
                        // dropping it closes its request.
                        Some(Relay::Stop(reason)) if self.task.is_none() && reason != StopReason::OwnerLost => {
                            return Err(Flow::Settle(Outcome::Cancelled(true)));
                        }
                        Some(Relay::Stop(reason)) => self.on_stop(reason).await?,
                    }
                    continue;
                }
            };
            let again = matches!(e, CallError::Unreached(_)) || (idempotent && e.is_transient());
            if !again {
                return Err(self.failed(e));
            }
            tracing::warn!(error = %e, "remote server unavailable; retrying");
            let pause = backoff.min(self.remaining());
            self.pause(pause).await?;
            if self.remaining().is_zero() {
                return Err(self.timed_out().await);
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    fn failed(&self, e: CallError) -> Flow {
        failure(e, self.recorded || self.task.is_some())
    }

    /// The deadline passed: ask the remote task to stop, report a stop.
    async fn timed_out(&mut self) -> Flow {
        self.cancel_remote().await;
        Flow::Settle(Outcome::Cancelled(true))
    }

    /// Sends `m` until the coordinator acknowledges it with `kind`.
    async fn await_ack(&mut self, m: Msg, kind: MessageKind) -> Result<(), Flow> {
        loop {
            self.up.send(m.clone()).await;
            let resend = tokio::time::sleep(RESEND);
            tokio::pin!(resend);
            loop {
                tokio::select! {
                    r = self.relay.recv() => match r {
                        Some(Relay::Ack(k)) if k == kind => return Ok(()),
                        Some(Relay::Ack(_)) => {}
                        Some(Relay::Input(i)) => self.answers.push_back(i),
                        Some(Relay::Stop(reason)) => {
                            self.on_stop(reason).await?;
                            return Ok(());
                        }
                        None => return Err(Flow::Abandon),
                    },
                    _ = &mut resend => break,
                    _ = self.abandon.cancelled() => return Err(Flow::Abandon),
                }
            }
        }
    }

    /// A stop from the coordinator. `owner_lost` leaves a recorded task to its
    /// next owner; an unrecorded one nobody else can find is cancelled.
    async fn on_stop(&mut self, reason: StopReason) -> Result<(), Flow> {
        if reason == StopReason::OwnerLost {
            if !self.recorded {
                self.cancel_remote().await;
            }
            return Err(Flow::Abandon);
        }
        self.stop = Some(reason);
        Ok(())
    }

    /// Best effort `tasks/cancel`; `Some(true)` when the server confirmed it.
    async fn cancel_remote(&mut self) -> Option<bool> {
        let task = self.task.clone()?;
        self.cancel_sent = true;
        let r = self.client.short("tasks/cancel", json!({"taskId": task.id}), task.session.as_deref()).await;
        match (self.client.dialect, r) {
            (Dialect::V2025, Ok(v)) => Some(v["status"] == "cancelled"),
            (_, Ok(_)) => Some(false),
            (_, Err(e)) => {
                tracing::info!(error = %e, "remote tasks/cancel");
                None
            }
        }
    }
}

/// Values no remote state can produce: the poll loop only ends by `Err`.
pub(crate) enum Never {}

mod poll;

#[cfg(test)]
mod tests {
    use super::*;

    /// A remote server's JSON-RPC error, or no usable answer, is the server
    /// failing the call: it settles as a protocol error (the caller gets a
    /// JSON-RPC error), never as the tool's own `isError` failure.
    #[test]
    fn a_remote_protocol_failure_settles_as_a_protocol_error() {
        let rpc = CallError::Rpc { code: -32603, message: "upstream exploded".into(), data: None };
        let lost = CallError::Transport("reset".into());
        for (e, message) in [(rpc, "upstream exploded"), (lost, "the remote tool call's outcome is unknown")] {
            let Flow::Settle(Outcome::Error(err)) = failure(e, false) else { panic!("an error settlement") };
            assert!(err.protocol_error && !err.retryable, "{err:?}");
            assert!(err.message.starts_with(message), "{err:?}");
        }
        let asked = failure(CallError::Unsupported("sampling".into()), true);
        assert_eq!(asked, Flow::Settle(Outcome::UnsupportedInteraction("sampling".into())));
    }
}
