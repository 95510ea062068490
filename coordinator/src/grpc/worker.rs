//! `baton.worker.v1.WorkerSession`: one bidirectional stream per worker.
//! Callable with a worker credential only (checked at `register`); every later
//! message is checked against the lease it names, under the session's bound
//! worker id. Settlements are acknowledged only after they are durable.

use super::status::to_status;
use crate::engine::{CloseReason, Engine, Session, Settled, now_ms, outbox};
use baton_proto::worker::v1::{
    CoordinatorMessage, WorkerMessage, coordinator_message::Msg, worker_message, worker_session_server::WorkerSession,
};
use futures_util::FutureExt as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_util::sync::WaitForCancellationFutureOwned;
use tonic::{Request, Response, Status, Streaming};

pub struct WorkerService {
    pub engine: Arc<Engine>,
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
        let (tx, rx) = outbox(self.engine.session_capacity(register.capacity));
        let session = self.engine.register(register, tx).await.map_err(to_status)?;
        let engine = self.engine.clone();
        let reading = session.clone();
        self.engine.tasks.spawn(async move {
            let session = reading;
            loop {
                let next = tokio::select! {
                    _ = engine.shutdown.cancelled() => break,
                    _ = session.closed.cancelled() => break,
                    m = incoming.message() => m,
                };
                let first = match next {
                    Ok(Some(WorkerMessage { msg: Some(m) })) => m,
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => break,
                };
                // Take whatever else is already waiting, so settlements that
                // arrive together share one transaction (one commit).
                let mut batch = vec![first];
                let mut closed = false;
                while batch.len() < MAX_BATCH {
                    match incoming.message().now_or_never() {
                        Some(Ok(Some(WorkerMessage { msg: Some(m) }))) => batch.push(m),
                        Some(Ok(Some(_))) => {}
                        Some(Ok(None) | Err(_)) => {
                            closed = true;
                            break;
                        }
                        None => break,
                    }
                }
                handle_batch(&engine, &session, batch).await;
                if closed {
                    break;
                }
            }
            engine.disconnect(&session).await;
        });
        let closed = Box::pin(session.closed.clone().cancelled_owned());
        Ok(Response::new(Outgoing { rx, session, closed, engine: self.engine.clone(), ended: false }))
    }
}

/// The coordinator's half of a session. Ends with an error status when this
/// replica closes the session; when it is dropped, assignments still queued
/// provably never reached the worker and are made claimable at once.
pub struct Outgoing {
    rx: mpsc::Receiver<Result<CoordinatorMessage, Status>>,
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
                _ => Status::aborted("this worker registered again on another connection"),
            };
            return Poll::Ready(Some(Err(status)));
        }
        if self.closed.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.rx.poll_recv(cx)
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        self.rx.close();
        let mut undelivered = Vec::new();
        while let Ok(m) = self.rx.try_recv() {
            if let Ok(CoordinatorMessage { msg: Some(Msg::Assignment(a)) }) = m {
                undelivered.push((a.execution_id, a.attempt));
            }
        }
        if undelivered.is_empty() {
            return;
        }
        let engine = self.engine.clone();
        let worker_id = self.session.worker_id.clone();
        self.engine.tasks.spawn(async move {
            if let Err(e) = engine.undelivered(&worker_id, undelivered, now_ms()).await {
                tracing::warn!(error = %e, "undelivered assignments wait for their lease to lapse");
            }
        });
    }
}

async fn handle_batch(engine: &Engine, session: &Session, batch: Vec<worker_message::Msg>) {
    let mut settlements = Vec::new();
    for msg in batch {
        let handled = match msg {
            worker_message::Msg::Settlement(s) => {
                settlements.push(s);
                Ok(())
            }
            worker_message::Msg::Heartbeat(hb) => engine.heartbeat(session, hb).await,
            worker_message::Msg::Progress(p) => {
                tracing::debug!(execution_id = %p.execution_id, "progress");
                Ok(())
            }
            worker_message::Msg::Register(_) => Ok(()),
            worker_message::Msg::RemoteTaskStarted(m) => engine.remote_task_started(session, m).await,
            worker_message::Msg::InputRequested(m) => engine.input_requested(session, m).await,
            worker_message::Msg::InputDelivered(m) => engine.input_delivered(session, m).await,
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
    for settled in engine.settle_batch(session, settlements).await {
        match settled {
            Settled::Acked(ack) => {
                session.send(Msg::SettlementAck(ack));
            }
            Settled::Refused(ack) => {
                session.refuse(&ack.execution_id, ack.attempt, "settlement");
            }
            Settled::Failed(_, e) => {
                tracing::warn!(error = %e, worker_id = %session.worker_id, "settlement not applied")
            }
        }
    }
}
