//! Dispatch: lease due pending executions to this replica's idle workers in
//! batches (one commit per batch) and send the assignments. Woken at once by new
//! work (locally or over the bus); a slow tick covers scheduled runs and lost
//! signals.

use super::{Engine, now_ms};
use crate::admission::Ticket;
use crate::crypto::Field;
use baton_proto::coordinator::v1::{DeliverCancelRequest, DeliverInputRequest, peer_client::PeerClient};
use baton_proto::worker::v1::{self as wpb, coordinator_message::Msg};
use std::sync::Arc;
use std::time::Duration;

const BATCH: i64 = 128;
const TICK: Duration = Duration::from_millis(500);

impl Engine {
    pub async fn run_dispatcher(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.dispatch_wake.notified() => {}
                _ = tokio::time::sleep(TICK) => {}
            }
            while self.dispatch_round().await {
                if self.shutdown.is_cancelled() {
                    return;
                }
            }
        }
    }

    /// One pass over idle sessions; true when anything was assigned.
    async fn dispatch_round(&self) -> bool {
        let mut assigned = false;
        for session in self.sessions.snapshot() {
            let slots = session.take_slots(BATCH);
            if slots == 0 {
                continue;
            }
            let now = now_ms();
            let claimed = match self
                .store
                .claim(
                    &session.project_id,
                    &session.tools,
                    &session.worker_id,
                    slots as u32,
                    now,
                    now + self.options.lease_ms,
                )
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    session.return_slots(slots);
                    tracing::warn!(error = %e, "claim failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            session.return_slots(slots - claimed.len() as i64);
            // Leaving the backlog and waking waiters are independent of the
            // assignments: do them for the whole batch at once.
            let bookkeeping = futures_util::future::join_all(claimed.iter().map(|c| async move {
                if let Err(e) = self.admission.started(&Ticket::from_record(&c.record), now).await {
                    tracing::warn!(error = %e, "admission backlog release failed");
                }
                self.changed(&c.record.id);
            }));
            for c in &claimed {
                assigned = true;
                let record = &c.record;
                let input = match record.input_ct.as_deref().map(|ct| self.ring.open(&record.id, Field::Input, ct)) {
                    Some(Ok(bytes)) => String::from_utf8(bytes).unwrap_or_default(),
                    None => "{}".to_owned(),
                    Some(Err(e)) => {
                        // The lease lapses and the execution fails owner_lost: the tool never ran.
                        tracing::error!(error = %e, execution_id = %record.id, "cannot open stored input");
                        continue;
                    }
                };
                let span = tracing::info_span!("dispatch", execution_id = %record.id, tool = %record.tool_name, attempt = c.attempt);
                // One trace per execution: dispatch continues the start request's trace.
                baton_proto::trace::adopt_traceparent(record.traceparent.as_deref().unwrap_or_default(), &span);
                let traceparent = {
                    let _enter = span.enter();
                    baton_proto::trace::current_traceparent()
                };
                // A recorded remote task is resumed, never called again; answers the
                // previous owner had not relayed travel with the assignment.
                let (resume_remote_task_id, pending_input) = match &record.remote_task_id {
                    Some(task) if record.state.remote_task => {
                        (task.clone(), self.pending_answers(&record.id).await.unwrap_or_default())
                    }
                    _ => (String::new(), Vec::new()),
                };
                let sent = session
                    .send(Msg::Assignment(wpb::Assignment {
                        execution_id: record.id.clone(),
                        attempt: c.attempt,
                        tool_name: record.tool_name.clone(),
                        input_json: input,
                        deadline_ms: record.execution_deadline,
                        traceparent,
                        resume_remote_task_id,
                        pending_input,
                    }))
                    .await;
                if !sent {
                    tracing::warn!(execution_id = %record.id, "worker session closed before assignment; lease will lapse");
                }
            }
            bookkeeping.await;
        }
        assigned
    }
}

/// Asks the replica at `url` to deliver a stop to a worker session it holds.
pub(super) async fn deliver_via_peer(
    url: &str,
    worker_id: &str,
    execution_id: &str,
    attempt: u32,
    reason: &str,
) -> bool {
    let call = async {
        let mut client = PeerClient::connect(url.to_owned()).await.ok()?;
        let mut request = tonic::Request::new(DeliverCancelRequest {
            worker_id: worker_id.to_owned(),
            execution_id: execution_id.to_owned(),
            attempt,
            reason: reason.to_owned(),
        });
        request.set_timeout(Duration::from_secs(3));
        baton_proto::trace::inject(request.metadata_mut());
        client.deliver_cancel(request).await.ok().map(|r| r.into_inner().delivered)
    };
    tokio::time::timeout(Duration::from_secs(5), call).await.ok().flatten().unwrap_or(false)
}

/// Asks the replica at `url` to relay an owner's answer to a worker session it holds.
pub(super) async fn deliver_input_via_peer(url: &str, worker_id: &str, m: wpb::InputResponse) -> bool {
    let call = async {
        let mut client = PeerClient::connect(url.to_owned()).await.ok()?;
        let mut request = tonic::Request::new(DeliverInputRequest {
            worker_id: worker_id.to_owned(),
            execution_id: m.execution_id,
            attempt: m.attempt,
            remote_key: m.remote_key,
            action: m.action,
            content_json: m.content_json,
        });
        request.set_timeout(Duration::from_secs(3));
        client.deliver_input(request).await.ok().map(|r| r.into_inner().delivered)
    };
    tokio::time::timeout(Duration::from_secs(5), call).await.ok().flatten().unwrap_or(false)
}
