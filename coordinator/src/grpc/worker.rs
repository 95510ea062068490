//! `baton.worker.v1.WorkerSession`: one bidirectional stream per worker.
//! Callable with a worker credential only (checked at `register`); every later
//! message is checked against the lease it names, under the session's bound
//! worker id. Settlements are acknowledged only after they are durable.

use super::convert::{decline_reason, input_action, message_kind, stop_reason};
use super::status::to_status;
use crate::domain::{Background, ExecutionId};
use crate::engine::messages::{
    AttemptRef, Command, Heartbeat, InputAnswer, InputDelivered, InputRequested, Registration, RemoteInputRequest,
    RemoteTaskStarted, Reported, Settlement,
};
use crate::engine::{CloseReason, Engine, FromWorker, Session, outbox};
use crate::store::{ToolMetadata, ToolRecord};
use baton_proto::clock::now_ms;
use baton_proto::error::ErrorCode;
use baton_proto::worker::v1::{
    self as wpb, CoordinatorMessage, WorkerMessage, coordinator_message::Msg, settlement, worker_message,
    worker_session_server::WorkerSession,
};
use futures_util::FutureExt as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_util::sync::WaitForCancellationFutureOwned;
use tonic::{Request, Response, Status, Streaming};

pub(crate) struct WorkerService {
    pub(crate) engine: Arc<Engine>,
}

/// Most worker messages applied together.
const MAX_BATCH: usize = 256;

#[tonic::async_trait]
impl WorkerSession for WorkerService {
    type SessionStream = Outgoing;

    async fn session(&self, req: Request<Streaming<WorkerMessage>>) -> Result<Response<Outgoing>, Status> {
        let mut incoming = req.into_inner();
        let first = incoming.message().await?.and_then(|m| m.msg);
        let Some(worker_message::Msg::Register(register)) = first else {
            return Err(Status::invalid_argument("the first message of a session must be register"));
        };
        // Before the credential is read or a tool registered: a refused SDK changes nothing.
        let counted = super::skew::admit_worker(&register.sdk_version)?;
        let (session, outgoing) = accept(&self.engine, register).await?;
        let engine = self.engine.clone();
        let reading = session.clone();
        self.engine.spawn(async move {
            let (session, _counted) = (reading, counted);
            loop {
                let next = tokio::select! {
                    _ = engine.shutdown().cancelled() => break,
                    _ = session.closed.cancelled() => break,
                    m = incoming.message() => m,
                };
                let mut batch = Vec::new();
                match next {
                    Ok(Some(m)) => batch.extend(from_worker(m)),
                    Ok(None) | Err(_) => break,
                }
                // Take whatever else is already waiting, so settlements that
                // arrive together share one transaction (one commit).
                let mut closed = false;
                while batch.len() < MAX_BATCH {
                    match incoming.message().now_or_never() {
                        Some(Ok(Some(m))) => batch.extend(from_worker(m)),
                        Some(Ok(None) | Err(_)) => {
                            closed = true;
                            break;
                        }
                        None => break,
                    }
                }
                engine.handle(&session, batch).await;
                if closed {
                    break;
                }
            }
            engine.disconnect(&session).await;
        });
        Ok(Response::new(outgoing))
    }
}

/// Registers the worker of `register` and opens the coordinator's half of its
/// session. What carries the messages is the caller's: the gRPC stream here,
/// or the deterministic simulation (`baton-proof`), which delivers each
/// message to [`Engine::handle`] through [`from_worker`] as the reading loop
/// above does.
pub async fn accept(engine: &Arc<Engine>, register: wpb::Register) -> Result<(Arc<Session>, Outgoing), Status> {
    let (tx, rx) = outbox(engine.session_capacity(register.capacity));
    let session = engine.register(registration(register), tx).await.map_err(to_status)?;
    let closed = Box::pin(session.closed.clone().cancelled_owned());
    let outgoing = Outgoing { rx, session: session.clone(), closed, engine: engine.clone(), ended: false };
    Ok((session, outgoing))
}

/// The coordinator's half of a session. Ends with an error status when this
/// replica closes the session; when it is dropped, assignments still queued
/// provably never reached the worker and are made claimable at once.
pub struct Outgoing {
    rx: mpsc::Receiver<Command>,
    session: Arc<Session>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    engine: Arc<Engine>,
    ended: bool,
}

impl Stream for Outgoing {
    type Item = Result<CoordinatorMessage, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.session.closed.is_cancelled() {
            self.ended = true;
            let status = match self.session.close_reason() {
                Some(CloseReason::Revoked) => Status::unauthenticated("the worker credential was revoked"),
                Some(CloseReason::Disowned) => {
                    Status::permission_denied("a tool of this worker was given to another worker identity")
                }
                _ => Status::aborted("this worker registered again on another connection"),
            };
            return Poll::Ready(Some(Err(status)));
        }
        if self.closed.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.rx.poll_recv(cx).map(|c| c.map(|c| Ok(CoordinatorMessage { msg: Some(to_worker(c)) })))
    }
}

impl Outgoing {
    /// The coordinator process died with this session: nothing it held is
    /// reported anywhere (the leases lapse instead), unlike an ended stream.
    pub fn crashed(mut self) {
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
    }

    /// The stream ended while this coordinator lives: what dropping does in
    /// the background, awaited (the deterministic simulation's way).
    pub async fn close(mut self) {
        let undelivered = self.undelivered();
        if !undelivered.is_empty() {
            report_undelivered(&self.engine, &self.session.worker_id, undelivered).await;
        }
    }

    /// Assignments still queued, which provably never reached the worker.
    fn undelivered(&mut self) -> Vec<AttemptRef> {
        self.rx.close();
        let mut undelivered = Vec::new();
        while let Ok(command) = self.rx.try_recv() {
            if let Command::Assign(a) = command {
                undelivered.push(a.attempt);
            }
        }
        undelivered
    }
}

async fn report_undelivered(engine: &Engine, worker_id: &str, undelivered: Vec<AttemptRef>) {
    if let Err(e) = engine.undelivered(worker_id, undelivered, now_ms()).await {
        tracing::warn!(error = %e, "undelivered assignments wait for their lease to lapse");
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        let undelivered = self.undelivered();
        if undelivered.is_empty() {
            return;
        }
        let engine = self.engine.clone();
        let worker_id = self.session.worker_id.clone();
        self.engine.spawn(async move { report_undelivered(&engine, &worker_id, undelivered).await });
    }
}

/// The attempt a worker names. Baton only ever hands out well-formed ids, so
/// a message naming another shape cannot concern any execution: it is read
/// as no message at all.
fn attempt(execution_id: &str, attempt: u32) -> Option<AttemptRef> {
    let parsed = ExecutionId::parse(execution_id).map(|execution_id| AttemptRef { execution_id, attempt });
    if parsed.is_none() {
        tracing::warn!(attempt, "worker message names a malformed execution id; ignored");
    }
    parsed
}

fn running(list: Vec<wpb::RunningAttempt>) -> Vec<AttemptRef> {
    list.into_iter().filter_map(|r| attempt(&r.execution_id, r.attempt)).collect()
}

pub(super) fn registration(r: wpb::Register) -> Registration {
    let tools = r
        .tools
        .into_iter()
        .map(|t| ToolRecord {
            // A policy this release does not know is none, which the engine refuses.
            background: Background::parse(t.background().name()),
            name: t.name,
            toolkit_name: t.toolkit_name,
            toolkit_version: t.toolkit_version,
            description: t.description,
            input_schema: t.input_schema_json,
            task_time_input: t.task_time_input,
            max_attempts: t.max_attempts,
            max_ttl_ms: Some(t.max_ttl_ms),
            remote: t.remote,
            required_client_capabilities: t.required_client_capabilities,
            cancel_unsupported: t.cancel_unsupported,
            // Only an administrator disables a tool; a registration never does.
            disabled: false,
            metadata: ToolMetadata {
                title: t.title,
                annotations: t.annotations_json,
                output_schema: t.output_schema_json,
                icons: t.icons_json,
            },
        })
        .collect();
    Registration {
        worker_id: r.worker_id,
        worker_token: r.worker_token,
        tools,
        capacity: r.capacity,
        running: running(r.running),
        settling: running(r.settling),
    }
}

/// The engine's reading of a worker message; a second `register` and empty
/// messages mean nothing.
pub fn from_worker(m: WorkerMessage) -> Option<FromWorker> {
    use worker_message::Msg as W;
    Some(match m.msg? {
        W::Register(_) => return None,
        W::Heartbeat(hb) => FromWorker::Heartbeat(Heartbeat {
            running: running(hb.running),
            free_slots: hb.free_slots,
            settling: running(hb.settling),
        }),
        W::Settlement(s) => FromWorker::Settlement(Settlement {
            attempt: attempt(&s.execution_id, s.attempt)?,
            outcome: s.outcome.map(|o| match o {
                settlement::Outcome::ResultJson(json) => Reported::Result(json),
                settlement::Outcome::Error(e) => Reported::ToolError {
                    message: e.message,
                    retryable: e.retryable,
                    detail_json: e.detail_json,
                    protocol: e.protocol_error,
                },
                settlement::Outcome::Cancelled(_) => Reported::Cancelled,
                settlement::Outcome::UnsupportedInteraction(what) => Reported::UnsupportedInteraction(what),
            }),
        }),
        W::Progress(p) => FromWorker::Progress {
            attempt: attempt(&p.execution_id, p.attempt)?,
            current: p.current,
            total: p.total,
            message: p.message,
        },
        W::RemoteTaskStarted(m) => FromWorker::RemoteTaskStarted(RemoteTaskStarted {
            attempt: attempt(&m.execution_id, m.attempt)?,
            remote_task_id: m.remote_task_id,
            remote_ttl_ms: m.remote_ttl_ms,
        }),
        W::InputRequested(m) => FromWorker::InputRequested(InputRequested {
            attempt: attempt(&m.execution_id, m.attempt)?,
            requests: m
                .requests
                .into_iter()
                .map(|r| RemoteInputRequest {
                    remote_key: r.remote_key,
                    message: r.message,
                    requested_schema_json: r.requested_schema_json,
                })
                .collect(),
        }),
        W::Declined(d) => {
            let why = decline_reason(d.read_reason());
            FromWorker::Declined(attempt(&d.execution_id, d.attempt)?, why)
        }
        W::InputDelivered(m) => FromWorker::InputDelivered(InputDelivered {
            attempt: attempt(&m.execution_id, m.attempt)?,
            remote_key: m.remote_key,
        }),
    })
}

fn running_attempt(a: AttemptRef) -> wpb::RunningAttempt {
    wpb::RunningAttempt { execution_id: a.execution_id.into_string(), attempt: a.attempt }
}

fn answer(a: InputAnswer) -> wpb::InputResponse {
    wpb::InputResponse {
        execution_id: a.attempt.execution_id.into_string(),
        attempt: a.attempt.attempt,
        remote_key: a.remote_key,
        action: input_action(&a.action) as i32,
        content_json: a.content_json,
    }
}

fn to_worker(c: Command) -> Msg {
    match c {
        Command::Registered { coordinator_id, heartbeat_interval_ms, stop } => Msg::Registered(wpb::Registered {
            coordinator_id,
            heartbeat_interval_ms,
            stop: stop.into_iter().map(running_attempt).collect(),
        }),
        Command::Assign(a) => Msg::Assignment(wpb::Assignment {
            execution_id: a.attempt.execution_id.into_string(),
            attempt: a.attempt.attempt,
            tool_name: a.tool_name,
            input_json: a.input_json,
            deadline_ms: a.deadline_ms,
            traceparent: a.traceparent,
            resume_remote_task_id: a.resume_remote_task_id,
            pending_input: a.pending_input.into_iter().map(answer).collect(),
        }),
        Command::Stop { attempt, reason } => Msg::Stop(wpb::Stop {
            execution_id: attempt.execution_id.into_string(),
            attempt: attempt.attempt,
            reason: stop_reason(reason) as i32,
        }),
        Command::SettlementAck(a) => {
            Msg::SettlementAck(wpb::SettlementAck { execution_id: a.execution_id.into_string(), attempt: a.attempt })
        }
        Command::Ack { attempt, kind: k } => Msg::Ack(wpb::Ack {
            execution_id: attempt.execution_id.into_string(),
            attempt: attempt.attempt,
            kind: message_kind(k) as i32,
        }),
        Command::Answer(a) => Msg::InputResponse(answer(a)),
        Command::Refused { attempt, kind: k } => Msg::Refused(wpb::Refused {
            execution_id: attempt.execution_id.into_string(),
            attempt: attempt.attempt,
            kind: message_kind(k) as i32,
            code: ErrorCode::PermissionDenied.as_str().into(),
            message: "this worker does not hold the named attempt".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settlement(execution_id: &str) -> WorkerMessage {
        WorkerMessage {
            msg: Some(worker_message::Msg::Settlement(wpb::Settlement {
                execution_id: execution_id.into(),
                attempt: 1,
                outcome: Some(settlement::Outcome::ResultJson("{}".into())),
            })),
        }
    }

    #[test]
    fn a_worker_message_naming_a_malformed_execution_id_is_no_message() {
        let good = ExecutionId::generate();
        assert!(matches!(
            from_worker(settlement(good.as_str())),
            Some(FromWorker::Settlement(s)) if s.attempt == AttemptRef::new(&good, 1)
        ));
        for bad in ["", "te_1", "te_../../etc", &format!("{good}x")] {
            assert!(from_worker(settlement(bad)).is_none(), "{bad:?}");
        }
        let heartbeat = WorkerMessage {
            msg: Some(worker_message::Msg::Heartbeat(wpb::Heartbeat {
                running: vec![
                    wpb::RunningAttempt { execution_id: "te_nope".into(), attempt: 1 },
                    wpb::RunningAttempt { execution_id: good.to_string(), attempt: 2 },
                ],
                ..Default::default()
            })),
        };
        let Some(FromWorker::Heartbeat(hb)) = from_worker(heartbeat) else { panic!("a heartbeat") };
        assert_eq!(hb.running, [AttemptRef::new(&good, 2)], "only the well-formed attempt is read");
    }
}
