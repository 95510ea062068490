//! `baton.worker.v1.WorkerSession`: one bidirectional stream per worker.
//! Settlements are acknowledged only after they are durable.

use super::status::to_status;
use crate::engine::{Engine, Session};
use baton_proto::worker::v1::{
    CoordinatorMessage, WorkerMessage, coordinator_message::Msg, worker_message, worker_session_server::WorkerSession,
};
use futures_util::FutureExt as _;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

pub struct WorkerService {
    pub engine: Arc<Engine>,
}

/// Most worker messages applied together.
const MAX_BATCH: usize = 256;

type Outgoing = Pin<Box<dyn Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl WorkerSession for WorkerService {
    type SessionStream = Outgoing;

    async fn session(&self, req: Request<Streaming<WorkerMessage>>) -> Result<Response<Outgoing>, Status> {
        let mut incoming = req.into_inner();
        let first = incoming.message().await?.and_then(|m| m.msg);
        let Some(worker_message::Msg::Register(register)) = first else {
            return Err(Status::invalid_argument("the first message of a session must be register"));
        };
        let (tx, rx) = mpsc::channel(1024);
        let session = self.engine.register(register, tx.clone()).await.map_err(to_status)?;
        let engine = self.engine.clone();
        self.engine.tasks.spawn(async move {
            loop {
                let next = tokio::select! {
                    _ = engine.shutdown.cancelled() => break,
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
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
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
            worker_message::Msg::InputDelivered(m) => engine.input_delivered(m).await,
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
    for (ack, settled) in engine.settle_batch(session, settlements).await {
        match settled {
            Ok(()) => {
                session.send(Msg::SettlementAck(ack)).await;
            }
            Err(e) => tracing::warn!(error = %e, worker_id = %session.worker_id, "settlement not applied"),
        }
    }
}
