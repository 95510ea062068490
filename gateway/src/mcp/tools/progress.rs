//! A legacy (2025-11-25) call that waits on SSE and carried a `progressToken`:
//! while it waits, each new progress report of the tool goes out as a
//! `notifications/progress` on the same stream, then the result. Progress is
//! not a status change, so the wait is sliced short to see it.

use super::{WAIT_SLICE, asks, input_required};
use crate::execution::is_terminal;
use crate::mcp::context::{Ctx, Outgoing, Reply};
use crate::mcp::error::RpcError;
use crate::mcp::task_view;
use crate::waits::WaitPermit;
use baton_proto::coordinator::v1::ExecutionView;
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

/// How often a waiting call looks for new progress.
const PROGRESS_SLICE: Duration = Duration::from_millis(500);

struct Waiting {
    ctx: Ctx,
    view: ExecutionView,
    mrtr: bool,
    token: Value,
    /// The report last sent (`updated_at_ms`), so each goes out once.
    sent_at: Option<i64>,
    done: bool,
    _place: Option<WaitPermit>,
}

/// The MCP notification for the view's progress, if there is news since `sent_at`.
fn notification(view: &ExecutionView, token: &Value, sent_at: Option<i64>) -> Option<(Value, i64)> {
    let p = view.progress.as_ref().filter(|p| Some(p.updated_at_ms) != sent_at)?;
    let mut params = json!({"progressToken": token, "progress": p.current});
    if p.total > 0.0 {
        params["total"] = p.total.into();
    }
    if !p.message.is_empty() {
        params["message"] = p.message.clone().into();
    }
    Some((json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}), p.updated_at_ms))
}

pub(super) fn wait_on_stream(
    ctx: &Ctx,
    view: ExecutionView,
    mrtr: bool,
    place: Option<WaitPermit>,
    token: Value,
) -> Reply {
    let start = Waiting { ctx: ctx.clone(), view, mrtr, token, sent_at: None, done: false, _place: place };
    let stream = futures_util::stream::unfold(start, |mut w| async move {
        if w.done {
            return None;
        }
        loop {
            if let Some((message, at)) = notification(&w.view, &w.token, w.sent_at) {
                w.sent_at = Some(at);
                return Some((Outgoing::Message(message), w));
            }
            if is_terminal(&w.view) {
                w.done = true;
                let out = finish(&w.ctx, w.view.clone()).await;
                return Some((out, w));
            }
            if w.mrtr && asks(&w.view) {
                w.done = true;
                let out = match input_required(&w.ctx, &w.view).await {
                    Ok(result) => Outgoing::Result(result),
                    Err(e) => Outgoing::Error(e),
                };
                return Some((out, w));
            }
            let caller = &w.ctx.caller;
            let slice = PROGRESS_SLICE.min(WAIT_SLICE);
            let wait =
                caller.coordinator().wait(&caller.bearer, &caller.scope, &w.view.execution_id, slice, w.view.status());
            w.view = match caller.state.unless_shutdown(wait).await {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    w.done = true;
                    return Some((Outgoing::Error(e.into()), w));
                }
                // Calling again would start another execution: not resumable.
                None => {
                    w.done = true;
                    let e = RpcError::shutting_down(&w.view.execution_id, false);
                    return Some((Outgoing::Error(e), w));
                }
            };
        }
    });
    Reply::Stream(stream.boxed())
}

async fn finish(ctx: &Ctx, view: ExecutionView) -> Outgoing {
    let snap = match task_view::complete(&ctx.caller, view).await {
        Ok(s) => s,
        Err(e) => return Outgoing::Error(e.into()),
    };
    match task_view::outcome(&snap) {
        Some(Ok(result)) => Outgoing::Result(result),
        Some(Err(e)) => Outgoing::Error(e),
        None => Outgoing::Error(RpcError::internal()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_proto::coordinator::v1::ExecutionProgress;

    #[test]
    fn each_report_is_notified_once_with_the_callers_token() {
        let mut view = ExecutionView::default();
        assert!(notification(&view, &json!("t"), None).is_none(), "no report yet");
        view.progress =
            Some(ExecutionProgress { current: 2.0, total: 5.0, message: "step 2".into(), updated_at_ms: 10 });
        let (n, at) = notification(&view, &json!(7), None).expect("news");
        assert_eq!(n["params"], json!({"progressToken": 7, "progress": 2.0, "total": 5.0, "message": "step 2"}));
        assert!(notification(&view, &json!(7), Some(at)).is_none(), "sent once");
    }
}
