//! What the gateway may tell about an execution without asking the
//! coordinator: whether a status is final, and whether a string can be an
//! execution id at all. Each fact is one function here, so when the status
//! vocabulary moves into `baton-proto` only this file changes.

use baton_proto::coordinator::v1::ExecutionView;

/// Completed, failed and cancelled never change again.
pub fn is_terminal(view: &ExecutionView) -> bool {
    matches!(view.status.as_str(), "completed" | "failed" | "cancelled")
}

/// `te_` followed by 27 base62 characters; anything else cannot name an
/// execution (the coordinator's id shape).
pub fn is_execution_id(id: &str) -> bool {
    id.strip_prefix("te_").is_some_and(|rest| rest.len() == 27 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_final_statuses_are_terminal() {
        let view = |status: &str| ExecutionView { status: status.to_owned(), ..Default::default() };
        for status in ["completed", "failed", "cancelled"] {
            assert!(is_terminal(&view(status)), "{status}");
        }
        for status in ["pending", "working", "input_required", ""] {
            assert!(!is_terminal(&view(status)), "{status}");
        }
    }

    #[test]
    fn execution_ids_have_one_shape() {
        assert!(is_execution_id("te_0123456789ABCDEFGHIJabcdefg"));
        for id in [
            "",
            "te_",
            "te_0123456789ABCDEFGHIJabcdef",
            "tx_0123456789ABCDEFGHIJabcdefg",
            "te_0123456789ABCDEFGHIJabcde-",
        ] {
            assert!(!is_execution_id(id), "{id}");
        }
    }
}
