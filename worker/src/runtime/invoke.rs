//! Running one hosted tool: its input, its deadline, its progress reports
//! (throttled), and the settlement its outcome becomes.

use super::{Worker, millis_to_time, msg};
use crate::sdk::{Context, Failure, Progress, ProgressSink};
use crate::wire::{PROGRESS_INTERVAL, progress_message};
use baton_proto::worker::v1::{self as wpb, settlement, worker_message};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

impl Worker {
    pub(super) async fn invoke(&self, a: &wpb::Assignment, cancel: CancellationToken) -> settlement::Outcome {
        let Some((_, tool)) = self.tools.iter().find(|(name, _)| *name == a.tool_name) else {
            return settlement::Outcome::Error(wpb::ToolError {
                message: format!("this worker does not serve {:?}", a.tool_name),
                retryable: false,
                detail_json: String::new(),
                protocol_error: true,
            });
        };
        // The coordinator sends only input it checked against the tool's
        // schema; anything else is not run with a stand-in.
        let Ok(input) = serde_json::from_str(&a.input_json) else {
            return settlement::Outcome::Error(wpb::ToolError {
                message: "the assignment's input is not JSON".into(),
                retryable: false,
                detail_json: String::new(),
                protocol_error: true,
            });
        };
        let deadline = millis_to_time(a.deadline_ms);
        // The deadline also stops the tool, even if the coordinator's stop is lost;
        // a small margin lets the coordinator's own verdict normally come first.
        let guard = cancel.clone();
        let deadline_timer = self.tasks.spawn("tool deadline", async move {
            baton_proto::clock::sleep_until(deadline + Duration::from_millis(250)).await;
            guard.cancel();
        });
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<Progress>();
        let progress: ProgressSink = Arc::new(move |p| {
            let _ = progress_tx.send(p);
        });
        let cx = Context { execution_id: a.execution_id.clone(), attempt: a.attempt, cancel, deadline, progress };
        self.metrics.invoked(&a.tool_name);
        let outbox = self.with_state(|s| s.outbox.clone());
        let (execution_id, attempt) = (a.execution_id.clone(), a.attempt);
        // Throttled: the first report goes at once, then at most one per
        // interval, always the latest (callers see the latest, never a history).
        // When the tool ends, what is still queued goes at once, before the
        // settlement: the last report is the one callers keep.
        let ended = CancellationToken::new();
        let ending = ended.clone();
        let forward = self.tasks.spawn("tool progress", async move {
            loop {
                let next = tokio::select! {
                    biased;
                    p = progress_rx.recv() => p,
                    () = ending.cancelled() => progress_rx.try_recv().ok(),
                };
                let Some(mut p) = next else { break };
                while let Ok(newer) = progress_rx.try_recv() {
                    p = newer;
                }
                if let Some(tx) = &outbox {
                    let report = progress_message(&execution_id, attempt, p);
                    let _ = tx.send(msg(worker_message::Msg::Progress(report))).await;
                }
                tokio::select! {
                    () = tokio::time::sleep(PROGRESS_INTERVAL) => {}
                    () = ending.cancelled() => {}
                }
            }
        });
        let result = tool.call(input, cx).await;
        deadline_timer.abort();
        ended.cancel();
        // Bounded: a full outbox must not hold the settlement back.
        let _ = tokio::time::timeout(Duration::from_secs(1), forward).await;
        match result {
            Ok(output) => settlement::Outcome::ResultJson(output.to_json().to_string()),
            Err(Failure::Cancelled) => settlement::Outcome::Cancelled(true),
            Err(Failure::Error { message, retryable, detail }) => settlement::Outcome::Error(wpb::ToolError {
                message,
                retryable,
                detail_json: if detail.is_null() { String::new() } else { detail.to_string() },
                protocol_error: false,
            }),
            Err(Failure::Protocol { message, detail }) => settlement::Outcome::Error(wpb::ToolError {
                message,
                retryable: false,
                detail_json: if detail.is_null() { String::new() } else { detail.to_string() },
                protocol_error: true,
            }),
        }
    }
}
