//! A worker's session with a coordinator, as the network carries it. Down
//! (to the worker), messages wait first in the coordinator's outbox, where
//! they provably have not left, then on the wire, where a break loses them
//! unseen. Up (to the coordinator), whatever the worker sent is on the wire.
//! A stream keeps its order; the faults a run adds on top of that are
//! duplicated and reordered worker messages, and breaks.

use baton_coordinator::engine::Session;
use baton_coordinator::grpc::worker::Outgoing;
use baton_proto::worker::v1::{WorkerMessage, coordinator_message::Msg};
use futures_util::{FutureExt, StreamExt};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;

pub(super) struct Link {
    pub coordinator: usize,
    pub session: Arc<Session>,
    outgoing: Option<Outgoing>,
    pub down: VecDeque<Msg>,
    pub up_tx: mpsc::Sender<WorkerMessage>,
    up_rx: mpsc::Receiver<WorkerMessage>,
    pub up: VecDeque<WorkerMessage>,
    /// The coordinator ended the session (another registration replaced it).
    pub ended_by_coordinator: bool,
}

impl Link {
    pub(super) fn new(coordinator: usize, session: Arc<Session>, outgoing: Outgoing) -> Self {
        let (up_tx, up_rx) = mpsc::channel(1024);
        Link {
            coordinator,
            session,
            outgoing: Some(outgoing),
            down: VecDeque::new(),
            up_tx,
            up_rx,
            up: VecDeque::new(),
            ended_by_coordinator: false,
        }
    }

    /// Moves one message from the coordinator's outbox onto the wire; false
    /// when there was none.
    pub(super) fn pull_down(&mut self) -> bool {
        let Some(outgoing) = self.outgoing.as_mut() else { return false };
        match outgoing.next().now_or_never() {
            Some(Some(Ok(m))) => {
                if let Some(m) = m.msg {
                    self.down.push_back(m);
                }
                true
            }
            Some(Some(Err(_)) | None) => {
                self.ended_by_coordinator = true;
                false
            }
            None => false,
        }
    }

    /// Whatever the worker sent goes on the wire.
    pub(super) fn pull_up(&mut self) {
        while let Ok(m) = self.up_rx.try_recv() {
            self.up.push_back(m);
        }
    }

    /// The stream broke with the coordinator alive: it learns of it and
    /// reports what never left its outbox.
    pub(super) async fn broken(mut self) -> Arc<Session> {
        if let Some(outgoing) = self.outgoing.take() {
            outgoing.close().await;
        }
        self.session
    }

    /// The coordinator died: nothing of its side is reported.
    pub(super) fn crashed(mut self) {
        if let Some(outgoing) = self.outgoing.take() {
            outgoing.crashed();
        }
    }
}

/// A message to a worker, for the trace.
pub(super) fn describe_down(m: &baton_proto::worker::v1::coordinator_message::Msg) -> String {
    use baton_proto::worker::v1::coordinator_message::Msg;
    match m {
        Msg::Registered(r) => format!("registered (stop {})", r.stop.len()),
        Msg::Assignment(a) => format!("assign {}#{}", a.execution_id, a.attempt),
        Msg::Stop(s) => format!("stop {}#{} {:?}", s.execution_id, s.attempt, s.reason()),
        Msg::SettlementAck(a) => format!("settlement ack {}#{}", a.execution_id, a.attempt),
        Msg::Ack(a) => format!("ack {}#{}", a.execution_id, a.attempt),
        Msg::InputResponse(r) => format!("input {}#{}", r.execution_id, r.attempt),
        Msg::Refused(r) => format!("refused {}#{} {:?}", r.execution_id, r.attempt, r.kind()),
    }
}

/// A message from a worker, for the trace.
pub(super) fn describe_up(m: &WorkerMessage) -> String {
    use baton_proto::worker::v1::{settlement::Outcome, worker_message::Msg};
    match &m.msg {
        Some(Msg::Heartbeat(h)) => format!("heartbeat (running {}, settling {})", h.running.len(), h.settling.len()),
        Some(Msg::Settlement(s)) => {
            let what = match &s.outcome {
                Some(Outcome::ResultJson(_)) => "result",
                Some(Outcome::Error(e)) if e.retryable => "retryable error",
                Some(Outcome::Error(_)) => "error",
                Some(Outcome::Cancelled(_)) => "cancelled",
                _ => "other",
            };
            format!("settlement {}#{} {what}", s.execution_id, s.attempt)
        }
        Some(Msg::Declined(d)) => format!("declined {}#{}", d.execution_id, d.attempt),
        Some(other) => format!("{:?}", std::mem::discriminant(other)),
        None => "empty".into(),
    }
}
