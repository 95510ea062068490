//! `baton.coordinator.v1.Waits`: a gateway's one stream for all its parked
//! waits, over `engine::subscriptions`. Each `Watch` carries its waiter's own
//! `authorization` (the stream has none of its own), so every answer and
//! every push is read with a credential that may read it.

use super::api::Api;
use super::status::wire;
use crate::engine::Engine;
use crate::engine::subscriptions::{WatchIn, WatchOut};
use baton_proto::coordinator::v1::{self as pb, waits_server::Waits, watch_event, watch_request};
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// Answers and pushes queued toward one gateway; the engine's loop waits
/// when they are not drained.
const OUTBOX: usize = 1024;

pub(crate) struct WaitsService {
    pub(crate) engine: Arc<Engine>,
}

type Events = Pin<Box<dyn futures_util::Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Waits for WaitsService {
    type WatchExecutionsStream = Events;

    async fn watch_executions(&self, req: Request<Streaming<pb::WatchRequest>>) -> Result<Response<Events>, Status> {
        let incoming = futures_util::stream::unfold(req.into_inner(), |mut stream| async move {
            // A broken stream ends like a closed one: the gateway redials.
            let message = stream.message().await.ok().flatten()?;
            Some((message, stream))
        })
        .filter_map(|m| std::future::ready(incoming(m)));
        let (out, answers) = mpsc::channel(OUTBOX);
        let (wire_out, events) = mpsc::channel(OUTBOX);
        let engine = self.engine.clone();
        self.engine.spawn(engine.serve_watch_stream(Box::pin(incoming), out));
        let api = Api { engine: self.engine.clone() };
        self.engine.spawn(forward(api, answers, wire_out));
        Ok(Response::new(Box::pin(ReceiverStream::new(events))))
    }
}

use futures_util::StreamExt as _;

fn incoming(message: pb::WatchRequest) -> Option<WatchIn> {
    match message.kind? {
        watch_request::Kind::Watch(w) => Some(WatchIn::Watch {
            tag: w.tag,
            authorization: w.authorization,
            org_id: w.org_id,
            project_id: w.project_id,
            execution_id: w.execution_id,
        }),
        watch_request::Kind::Unwatch(u) => Some(WatchIn::Unwatch { execution_id: u.execution_id }),
    }
}

/// Turns the engine's answers into wire events (the owner view, with open
/// input requests) until either side ends.
async fn forward(
    api: Api,
    mut answers: mpsc::Receiver<WatchOut>,
    events: mpsc::Sender<Result<pb::WatchEvent, Status>>,
) {
    while let Some(answer) = answers.recv().await {
        let kind = match answer {
            WatchOut::Watched { tag, record } => match api.view(&record).await {
                Ok(view) => watch_event::Kind::Watched(watched(tag, &record, view)),
                Err(status) => refused(tag, &status),
            },
            WatchOut::Refused { tag, error } => {
                let error = wire(error);
                watch_event::Kind::Refused(pb::WatchRefused {
                    tag,
                    code: error.code.as_str().to_owned(),
                    message: error.message,
                })
            }
            WatchOut::Changed { record, reader } => match api.view(&record).await {
                Ok(view) => watch_event::Kind::Changed(pb::Watched { reader, ..watched(0, &record, view) }),
                // The next signal or periodic re-read tries again.
                Err(_) => continue,
            },
            WatchOut::Lapsed { execution_id } => watch_event::Kind::Lapsed(pb::WatchLapsed { execution_id }),
        };
        if events.send(Ok(pb::WatchEvent { kind: Some(kind) })).await.is_err() {
            return;
        }
    }
}

fn watched(tag: u64, record: &crate::store::ExecutionRecord, view: pb::ExecutionView) -> pb::Watched {
    pb::Watched { tag, version: record.version, execution: Some(view), reader: Vec::new() }
}

fn refused(tag: u64, status: &Status) -> watch_event::Kind {
    let error = baton_proto::error::WireError::from_status(status);
    watch_event::Kind::Refused(pb::WatchRefused { tag, code: error.code.as_str().to_owned(), message: error.message })
}
