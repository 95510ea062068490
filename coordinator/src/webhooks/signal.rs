//! What a lifecycle signal says. Thin on purpose: the execution id, the state
//! it entered, two timestamps and a one-line summary built from metadata (tool
//! name, state, the system's failure reason), never from an input, output or
//! error text a tool wrote. Receivers fetch the execution for anything more.

use crate::domain::{FailureReason, Millis, Status};
use crate::store::ExecutionRecord;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A signal to write with the transition that causes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Signal {
    /// The `webhook-id`: minted once, sent on every attempt to every endpoint.
    pub(crate) message_id: String,
    pub(crate) project_id: String,
    pub(crate) execution_id: String,
    pub(crate) state: &'static str,
    /// The exact body that is signed and sent.
    pub(crate) body: String,
}

/// Whether entering `status` is signalled (never pending or working).
pub(crate) fn signalled(status: Status) -> bool {
    matches!(status, Status::InputRequired | Status::Completed | Status::Failed | Status::Cancelled)
}

fn rfc3339(ms: Millis) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

fn reason_text(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::ToolError => "the tool reported an error",
        FailureReason::DeadlineExceeded => "the execution deadline passed",
        FailureReason::OwnerLost => "the worker running it stopped responding",
        FailureReason::UnsupportedInteraction => "the tool requested an unsupported interaction",
        FailureReason::InvocationRefused => "the tool's execution policy refused it",
        FailureReason::ProtocolError => "the tool's server failed the call with a protocol error",
    }
}

/// The summary line: metadata only.
pub(crate) fn summary(after: &ExecutionRecord) -> String {
    let tool = &after.tool_name;
    match after.status() {
        Status::InputRequired => format!("{tool} is waiting for input"),
        Status::Completed => format!("{tool} completed"),
        Status::Failed => match after.failure_reason() {
            Some(reason) => format!("{tool} failed: {}", reason_text(reason)),
            None => format!("{tool} failed"),
        },
        Status::Cancelled => format!("{tool} was cancelled"),
        Status::Pending | Status::Working => format!("{tool} is {}", after.status().as_str()),
    }
}

/// The signal a transition from `before` to `after` owes, if any: only on
/// entering a signalled state.
pub(crate) fn of_transition(before: &ExecutionRecord, after: &ExecutionRecord) -> Option<Signal> {
    let status = after.status();
    if !signalled(status) || before.status() == status {
        return None;
    }
    let body = serde_json::json!({
        "execution_id": after.id.as_str(),
        "state": status.as_str(),
        "created_at": rfc3339(after.created_at),
        "updated_at": rfc3339(after.updated_at),
        "summary": summary(after),
    });
    Some(Signal {
        message_id: crate::domain::id::random_id("msg_", 160),
        project_id: after.project_id.clone(),
        execution_id: after.id.to_string(),
        state: status.as_str(),
        body: body.to_string(),
    })
}
