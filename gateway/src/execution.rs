//! What the gateway may tell about an execution without asking the
//! coordinator: whether its status is final, and whether a string can be an
//! execution id at all. Both facts live in `baton_proto::names`, shared with
//! the coordinator; this module is where the gateway reaches them.

use baton_proto::coordinator::v1::ExecutionView;

pub use baton_proto::names::is_execution_id;

/// Completed, failed and cancelled never change again.
pub fn is_terminal(view: &ExecutionView) -> bool {
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
