//! One watch socket: sends the execution's owner view when the socket opens
//! and on every status change, each input request once as it appears, and
//! ends with a last message saying why: the execution is terminal, the
//! watch's `timeout_seconds` passed, or the gateway is shutting down
//! (reconnect at once). Every view sent was read by the coordinator with the
//! caller's credential just before (a wait re-authenticates when it answers),
//! so a revoked credential or a lost access ends the socket with an error
//! instead of a view. What the client sends is read only to notice it left.

use crate::app::AppState;
use crate::coordinator::{Bearer, Scope};
use crate::rest::view;
use crate::waits::WaitPermit;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use baton_proto::coordinator::v1::{ExecutionStatus, ExecutionView, InputRequestState, ListExecutionChangesResponse};
use baton_proto::error::{ErrorCode, WireError};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;
use tokio::time::Instant;

/// The longest single coordinator wait of a watch on an execution that is
/// asking for input: a further request appears without a status change, so
/// it is seen within this. In any other status a new request brings a status
/// change, which ends the wait at once, so the wait lasts the whole watch (a
/// re-read per socket every few seconds was most of a parked watch's cost).
const INPUT_WAIT_CHUNK: Duration = Duration::from_secs(10);

/// An admitted watch: whose, of what, until when, and the first view.
pub(crate) struct Watch {
    pub(crate) state: AppState,
    pub(crate) bearer: Bearer,
    pub(crate) scope: Scope,
    pub(crate) execution_id: String,
    pub(crate) until: Instant,
    /// The view read and not yet sent: the first, then each change. Once
    /// sent only its status is kept (below), not the whole view, and the
    /// view is boxed so that a parked watch does not keep room for one.
    pub(crate) view: Option<Box<ExecutionView>>,
    /// The status of the last view sent.
    pub(crate) status: ExecutionStatus,
    /// Resuming: the missed changes, sent before the first view.
    pub(crate) replay: Vec<Value>,
    /// The wait place this socket holds while it is open (kept for its drop).
    pub(crate) _place: WaitPermit,
}

/// Why a watch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Terminal,
    TimedOut,
    Shutdown,
}

impl End {
    fn message(self, execution_id: &str) -> Value {
        let reason = match self {
            End::Terminal => "terminal",
            End::TimedOut => "timed_out",
            End::Shutdown => "shutdown",
        };
        json!({"type": "end", "execution_id": execution_id, "reason": reason,
               "timed_out": self == End::TimedOut, "shutdown": self == End::Shutdown})
    }

    fn close_code(self) -> u16 {
        match self {
            End::Terminal | End::TimedOut => close_code::NORMAL,
            End::Shutdown => close_code::AWAY,
        }
    }
}

/// What has been sent on this socket so far.
#[derive(Default)]
struct Sent {
    status: Option<i32>,
    requests: HashSet<String>,
}

impl Sent {
    /// The messages `view` calls for that were not sent yet.
    fn news(&mut self, view: &ExecutionView) -> Vec<Value> {
        let mut out = Vec::new();
        if self.status != Some(view.status) {
            self.status = Some(view.status);
            out.push(json!({"type": "execution", "seq": view.cursor, "execution": view::owner(view)}));
        }
        for r in view.input_requests.iter().filter(|r| r.state() == InputRequestState::Open) {
            if self.requests.insert(r.request_key.clone()) {
                out.push(json!({"type": "input_request", "execution_id": view.execution_id, "input_request": {
                    "request_key": r.request_key,
                    "message": r.message,
                    "requested_schema": serde_json::from_str::<Value>(&r.requested_schema_json).unwrap_or(Value::Null),
                }}));
            }
        }
        out
    }
}

/// The frames a resuming watch starts with: each change after `after`, in
/// order, or `events_gone` when those changes are no longer kept.
pub(crate) fn replay(execution_id: &str, after: i64, missed: &ListExecutionChangesResponse) -> Vec<Value> {
    if missed.gone {
        return vec![json!({"type": "events_gone", "execution_id": execution_id, "after": after})];
    }
    missed
        .changes
        .iter()
        .map(|c| {
            json!({"type": "change", "execution_id": execution_id, "seq": c.seq, "kind": c.event_name(),
                   "status": c.status().name(), "at": crate::json::rfc3339(c.at_ms)})
        })
        .collect()
}

async fn send(socket: &mut WebSocket, message: &Value) -> bool {
    socket.send(Message::Text(message.to_string().into())).await.is_ok()
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    // The client may be gone already; nothing is left to tell it then.
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}

fn error_message(e: &WireError) -> Value {
    // Every not-found about an execution reads the same.
    let message = if e.code == ErrorCode::NotFound { "execution not found" } else { e.message.as_str() };
    json!({"type": "error", "error": {"code": e.code.as_str(), "message": message}})
}

/// Runs `work` while reading the client's frames only to notice that it
/// left: None once it left, `Some(None)` when the gateway began shutting
/// down, `Some(Some(out))` when `work` is done.
async fn while_connected<F: std::future::Future>(
    socket: &mut WebSocket,
    state: &AppState,
    work: F,
) -> Option<Option<F::Output>> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            () = state.shutdown.cancelled() => return Some(None),
            incoming = socket.next() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return None,
                Some(Ok(_)) => continue,
            },
            out = &mut work => return Some(Some(out)),
        }
    }
}

/// Runs the watch until it ends or the client leaves.
///
/// The watch is boxed, and read in place rather than taken apart: a socket's
/// task lives as long as the socket, and every copy laid out in its future
/// is paid per open watch.
pub(crate) async fn run(mut socket: WebSocket, mut watch: Box<Watch>) {
    let mut sent = Sent::default();
    for message in std::mem::take(&mut watch.replay) {
        if !send(&mut socket, &message).await {
            return;
        }
    }
    loop {
        let Watch { state, bearer, scope, execution_id, until, view, status, replay: _, _place } = &mut *watch;
        let until = *until;
        // Taken apart here, not across the sends below: a view held over an
        // await would be laid out in this future for the socket's life.
        let news = view.take().map(|view| {
            *status = view.status();
            sent.news(&view)
        });
        for message in news.unwrap_or_default() {
            if !send(&mut socket, &message).await {
                return;
            }
        }
        let end = if status.is_terminal() {
            Some(End::Terminal)
        } else if Instant::now() >= until {
            Some(End::TimedOut)
        } else if state.shutdown.is_cancelled() {
            Some(End::Shutdown)
        } else {
            None
        };
        if let Some(end) = end {
            if send(&mut socket, &end.message(execution_id)).await {
                close(&mut socket, end.close_code(), "watch ended").await;
            }
            return;
        }
        let left = until.saturating_duration_since(Instant::now());
        let chunk = if *status == ExecutionStatus::InputRequired { left.min(INPUT_WAIT_CHUNK) } else { left };
        // Boxed: inline, the wait was laid out in this future twice (as the
        // local and inside `while_connected`), for as long as the socket is open.
        let wait = Box::pin(state.coordinator.wait(bearer, scope, execution_id, chunk, *status));
        let Some(waited) = while_connected(&mut socket, state, wait).await else { return };
        match waited {
            // The loop's head answers the shutdown.
            None => continue,
            Some(Ok(next)) => *view = Some(Box::new(next)),
            Some(Err(e)) if matches!(e.code, ErrorCode::Unavailable | ErrorCode::CapacityExceeded) => {
                // The coordinator is busy or out of reach for a moment: the
                // watch pauses as asked and waits again, rather than ending.
                let pause = Duration::from_millis(e.retry_after_ms.unwrap_or(1_000).clamp(100, 10_000))
                    .min(until.saturating_duration_since(Instant::now()));
                if while_connected(&mut socket, state, Box::pin(tokio::time::sleep(pause))).await.is_none() {
                    return;
                }
            }
            Some(Err(e)) => {
                let code = match e.code {
                    ErrorCode::Unauthenticated | ErrorCode::PermissionDenied | ErrorCode::NotFound => {
                        close_code::POLICY
                    }
                    _ => close_code::ERROR,
                };
                if send(&mut socket, &error_message(&e)).await {
                    close(&mut socket, code, "watch refused").await;
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_proto::coordinator::v1::InputRequest;

    fn view(status: ExecutionStatus, open: &[&str]) -> ExecutionView {
        ExecutionView {
            execution_id: "te_x".into(),
            status: status as i32,
            input_requests: open
                .iter()
                .map(|k| InputRequest {
                    request_key: (*k).into(),
                    state: InputRequestState::Open as i32,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn each_status_and_each_input_request_is_sent_once() {
        let mut sent = Sent::default();
        assert_eq!(sent.news(&view(ExecutionStatus::Working, &[])).len(), 1);
        assert!(sent.news(&view(ExecutionStatus::Working, &[])).is_empty(), "no change, nothing sent");
        let news = sent.news(&view(ExecutionStatus::InputRequired, &["k1"]));
        assert_eq!(
            news.iter().map(|m| m["type"].as_str().unwrap_or_default()).collect::<Vec<_>>(),
            ["execution", "input_request"]
        );
        let news = sent.news(&view(ExecutionStatus::InputRequired, &["k1", "k2"]));
        assert_eq!(news.len(), 1, "only the new request");
        assert_eq!(news[0]["input_request"]["request_key"], "k2");
    }

    #[test]
    fn a_resume_replays_the_changes_in_order_or_says_they_are_gone() {
        use baton_proto::coordinator::v1::ExecutionChange;
        let change = |seq, status: ExecutionStatus| {
            let mut change = ExecutionChange { seq, at_ms: 0, status: status as i32, ..Default::default() };
            change.write_event(baton_proto::coordinator::v1::TimelineEvent::Settled);
            change
        };
        let missed = ListExecutionChangesResponse {
            changes: vec![change(3, ExecutionStatus::Working), change(5, ExecutionStatus::Completed)],
            gone: false,
        };
        let frames = replay("te_x", 2, &missed);
        let seen: Vec<(i64, &str)> =
            frames.iter().map(|f| (f["seq"].as_i64().unwrap_or(0), f["status"].as_str().unwrap_or(""))).collect();
        assert_eq!(seen, [(3, "working"), (5, "completed")]);
        assert!(frames.iter().all(|f| f["type"] == "change"));
        let gone = replay("te_x", 2, &ListExecutionChangesResponse { changes: Vec::new(), gone: true });
        assert_eq!(gone, [json!({"type": "events_gone", "execution_id": "te_x", "after": 2})]);
    }

    #[test]
    fn end_messages_say_why() {
        let m = End::Shutdown.message("te_x");
        assert_eq!((m["shutdown"].as_bool(), m["timed_out"].as_bool()), (Some(true), Some(false)));
        assert_eq!(End::TimedOut.message("te_x")["timed_out"], true);
        assert_eq!(End::Shutdown.close_code(), close_code::AWAY);
    }
}

#[cfg(test)]
mod sizes {
    use super::*;

    fn output_size<A, B, R, F: Fn(A, B) -> R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    /// A socket's task lives as long as the watch: its future's size is paid
    /// per open watch (it was 4.6 KiB before the watch was boxed and read in
    /// place, the coordinator wait and the pause boxed, and no view held
    /// across a send).
    #[test]
    fn a_watch_socket_is_a_small_future() {
        let size = output_size(&|ws: WebSocket, w: Box<Watch>| run(ws, w));
        println!(
            "socket::run future: {size} bytes; WebSocket {}, Watch {}, ExecutionView {}",
            std::mem::size_of::<WebSocket>(),
            std::mem::size_of::<Watch>(),
            std::mem::size_of::<ExecutionView>()
        );
        assert!(size <= 2048, "a watch socket's future is {size} bytes");
    }
}
