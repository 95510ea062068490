//! Closed sets that 0.1 sent as strings (decision 0051). Each is now an enum
//! field, sent together with its deprecated string twin while peers of 0.1
//! are inside the version window. This is the one place the twins are read
//! and written: a reader takes the enum and falls back to the string
//! (`read_twin`); a writer fills both. Everything else sees the enum only.
#![allow(deprecated)]

use crate::coordinator::v1::{
    CompletePersonSignInResponse, ExecutionChange, ExecutionView, FailureReason, Role, TimelineEvent, WhoAmIResponse,
};
use crate::worker::v1::{AssignmentDeclined, DeclineReason};

/// The text REST, MCP and the watch socket show for a twin: a known value's
/// name, else what the sender spelled (a newer peer's value, passed on as
/// 0.1 passed on every value), empty when it sent none.
fn shown<'a>(name: &'static str, sent: &'a str) -> &'a str {
    if name.is_empty() { sent } else { name }
}

impl ExecutionView {
    /// Why it failed; `Unspecified` unless failed (or a reason this build
    /// does not know).
    pub fn read_failure_reason(&self) -> FailureReason {
        FailureReason::read_twin(self.failure, &self.failure_reason)
    }

    /// The reason as REST and MCP spell it; empty unless failed.
    pub fn failure_reason_name(&self) -> &str {
        shown(self.read_failure_reason().name(), &self.failure_reason)
    }

    pub fn write_failure_reason(&mut self, reason: FailureReason) {
        self.failure = reason as i32;
        self.failure_reason = reason.name().to_owned();
    }
}

impl ExecutionChange {
    pub fn read_event(&self) -> TimelineEvent {
        TimelineEvent::read_twin(self.event, &self.kind)
    }

    /// The event as the watch socket spells it.
    pub fn event_name(&self) -> &str {
        shown(self.read_event().name(), &self.kind)
    }

    pub fn write_event(&mut self, event: TimelineEvent) {
        self.event = event as i32;
        self.kind = event.name().to_owned();
    }
}

impl WhoAmIResponse {
    /// An API key's role; `Unspecified` for other principals.
    pub fn read_role(&self) -> Role {
        Role::read_twin(self.project_role, &self.role)
    }

    pub fn write_role(&mut self, role: Role) {
        self.project_role = role as i32;
        self.role = role.name().to_owned();
    }
}

impl CompletePersonSignInResponse {
    pub fn read_role(&self) -> Role {
        Role::read_twin(self.project_role, &self.role)
    }

    /// The role as the sign-in page names it.
    pub fn role_name(&self) -> &str {
        shown(self.read_role().name(), &self.role)
    }

    pub fn write_role(&mut self, role: Role) {
        self.project_role = role as i32;
        self.role = role.name().to_owned();
    }
}

impl AssignmentDeclined {
    pub fn read_reason(&self) -> DeclineReason {
        DeclineReason::read_twin(self.cause, &self.reason)
    }

    pub fn write_reason(&mut self, reason: DeclineReason) {
        self.cause = reason as i32;
        self.reason = reason.name().to_owned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_fills_both_and_a_reader_of_either_release_understands_it() {
        let mut view = ExecutionView::default();
        view.write_failure_reason(FailureReason::ToolError);
        assert_eq!((view.failure, view.failure_reason.as_str()), (FailureReason::ToolError as i32, "tool_error"));
        assert_eq!(view.read_failure_reason(), FailureReason::ToolError);

        let mut declined = AssignmentDeclined::default();
        declined.write_reason(DeclineReason::Draining);
        assert_eq!((declined.cause, declined.reason.as_str()), (DeclineReason::Draining as i32, "draining"));

        let mut who = WhoAmIResponse::default();
        who.write_role(Role::ReadOnly);
        assert_eq!((who.project_role, who.role.as_str()), (Role::ReadOnly as i32, "read_only"));

        let mut change = ExecutionChange::default();
        change.write_event(TimelineEvent::CancelRequested);
        assert_eq!((change.event, change.kind.as_str()), (TimelineEvent::CancelRequested as i32, "cancel_requested"));
    }

    #[test]
    fn a_sender_of_0_1_fills_only_the_string() {
        let view = ExecutionView { failure_reason: "owner_lost".into(), ..Default::default() };
        assert_eq!(view.read_failure_reason(), FailureReason::OwnerLost);
        assert_eq!(view.failure_reason_name(), "owner_lost");
        let declined = AssignmentDeclined { reason: "at_capacity".into(), ..Default::default() };
        assert_eq!(declined.read_reason(), DeclineReason::AtCapacity);
        let who = WhoAmIResponse { role: "admin".into(), ..Default::default() };
        assert_eq!(who.read_role(), Role::Admin);
        let signed_in = CompletePersonSignInResponse { role: "operator".into(), ..Default::default() };
        assert_eq!((signed_in.read_role(), signed_in.role_name()), (Role::Operator, "operator"));
        let change = ExecutionChange { kind: "settled".into(), ..Default::default() };
        assert_eq!((change.read_event(), change.event_name()), (TimelineEvent::Settled, "settled"));
    }

    #[test]
    fn a_newer_senders_value_is_unspecified_and_shown_as_sent() {
        let view = ExecutionView { failure: 42, failure_reason: "meteor_strike".into(), ..Default::default() };
        assert_eq!(view.read_failure_reason(), FailureReason::Unspecified);
        assert_eq!(view.failure_reason_name(), "meteor_strike");
        let who = WhoAmIResponse { project_role: 42, role: "auditor".into(), ..Default::default() };
        assert_eq!(who.read_role(), Role::Unspecified);
        let declined = AssignmentDeclined { cause: 42, reason: "sleepy".into(), ..Default::default() };
        assert_eq!(declined.read_reason(), DeclineReason::Unspecified);
        let change = ExecutionChange { event: 42, kind: "teleported".into(), ..Default::default() };
        assert_eq!((change.read_event(), change.event_name()), (TimelineEvent::Unspecified, "teleported"));
        // Nothing sent: nothing shown.
        assert_eq!(ExecutionView::default().failure_reason_name(), "");
    }
}
