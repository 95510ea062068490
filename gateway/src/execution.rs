//! What the gateway may tell about an execution without asking the
//! coordinator: whether its status is final, and whether a string can be an
//! execution id at all. Both facts live in `baton_proto::names`, shared with
//! the coordinator; this module is where the gateway reaches them.

use baton_proto::coordinator::v1::{ExecutionProgress, ExecutionView};

pub(crate) use baton_proto::names::is_execution_id;

/// The running tool's latest progress as REST shows it (`progress`): `current`
/// of `total` (null when unknown), its message and when it was reported; null
/// before the first report.
pub(crate) fn progress(progress: Option<&ExecutionProgress>) -> serde_json::Value {
    match progress {
        None => serde_json::Value::Null,
        Some(p) => serde_json::json!({
            "current": p.current,
            "total": if p.total > 0.0 { serde_json::json!(p.total) } else { serde_json::Value::Null },
            "message": p.message,
            "updated_at": crate::json::rfc3339(p.updated_at_ms),
        }),
    }
}

/// The progress as one line for MCP's `statusMessage`: the tool's message,
/// else its numbers; `None` before the first report or once the execution ended.
pub(crate) fn progress_line(view: &ExecutionView) -> Option<String> {
    let p = view.progress.as_ref().filter(|_| !is_terminal(view))?;
    Some(match (p.message.is_empty(), p.total > 0.0) {
        (false, _) => p.message.clone(),
        (true, true) => format!("{} of {}", p.current, p.total),
        (true, false) => format!("{} done", p.current),
    })
}

/// Completed, failed and cancelled never change again.
pub(crate) fn is_terminal(view: &ExecutionView) -> bool {
    view.status().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_proto::coordinator::v1::ExecutionStatus;

    #[test]
    fn only_final_statuses_are_terminal() {
        let view = |status: ExecutionStatus| ExecutionView { status: status as i32, ..Default::default() };
        for status in [ExecutionStatus::Completed, ExecutionStatus::Failed, ExecutionStatus::Cancelled] {
            assert!(is_terminal(&view(status)), "{status:?}");
        }
        for status in [
            ExecutionStatus::Pending,
            ExecutionStatus::Working,
            ExecutionStatus::InputRequired,
            ExecutionStatus::Unspecified,
        ] {
            assert!(!is_terminal(&view(status)), "{status:?}");
        }
        assert!(!is_terminal(&ExecutionView { status: 99, ..Default::default() }), "an unknown status");
    }
}
