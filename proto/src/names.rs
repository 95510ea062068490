//! The one spelling of every wire enum: the lowercase names that REST, MCP,
//! JSON and the database use (`input_required`, `owner_lost`, `mcp_native`…),
//! one table per enum. Everything that turns a wire enum into text, or text
//! into a wire enum, goes through `name` and `from_name`; nobody compares the
//! strings by hand. Also the shape of an execution id, which the gateway
//! checks without asking the coordinator.

use crate::coordinator::v1::{
    CancelOutcome, CancelState, ExecutionOutcome, ExecutionStatus, ExecutionType, FailureReason, InputRequestState,
    PrincipalKind, Role, Surface, TimelineEvent, WebhookDeliveryStatus,
};
use crate::worker::v1::{BackgroundPolicy, DeclineReason, InputAction, MessageKind, StopReason};

mod twins;

/// For each enum: `ALL` (every value but `Unspecified`, in declaration order),
/// `name` (empty for `Unspecified`) and `from_name` (`None` for any other
/// text, the empty one included).
macro_rules! names {
    ($($ty:ident { $($variant:ident => $name:literal,)+ })+) => {$(
        impl $ty {
            /// Every value but `Unspecified`, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The lowercase name; empty for `Unspecified`.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                    $ty::Unspecified => "",
                }
            }

            /// The value `name` names, if any.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }

            /// Every name, in declaration order (for schemas).
            pub fn names() -> impl Iterator<Item = &'static str> {
                Self::ALL.iter().map(|v| v.name())
            }

            /// A value sent twice, as this enum and as its deprecated string
            /// twin (decision 0051): the enum when it holds a value this
            /// build knows, else the value the string names, else
            /// `Unspecified` (a newer peer's value, or none sent).
            pub fn read_twin(value: i32, name: &str) -> Self {
                match Self::try_from(value) {
                    Ok(v) if v != $ty::Unspecified => v,
                    _ => Self::from_name(name).unwrap_or($ty::Unspecified),
                }
            }
        }
    )+};
}

names! {
    WebhookDeliveryStatus {
        Pending => "pending",
        Delivered => "delivered",
        Failed => "failed",
    }
    ExecutionStatus {
        Pending => "pending",
        Working => "working",
        InputRequired => "input_required",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
    CancelState {
        None => "none",
        Requested => "requested",
    }
    StopReason {
        Cancelled => "cancelled",
        DeadlineExceeded => "deadline_exceeded",
        OwnerLost => "owner_lost",
    }
    BackgroundPolicy {
        Forbidden => "forbidden",
        Optional => "optional",
        Required => "required",
    }
    InputAction {
        Accept => "accept",
        Decline => "decline",
        Cancel => "cancel",
    }
    CancelOutcome {
        Accepted => "accepted",
        Unsupported => "unsupported",
        AlreadyTerminal => "already_terminal",
        StopDeliveryUnknown => "stop_delivery_unknown",
        StopAlreadyRequested => "stop_already_requested",
    }
    PrincipalKind {
        EndUser => "end_user",
        ApiKey => "api_key",
        Worker => "worker",
    }
    ExecutionType {
        Immediate => "immediate",
        Scheduled => "scheduled",
    }
    InputRequestState {
        Open => "open",
        Answered => "answered",
    }
    MessageKind {
        Settlement => "settlement",
        Heartbeat => "heartbeat",
        RemoteTask => "remote_task",
        InputRequested => "input_requested",
        InputDelivered => "input_delivered",
    }
    Surface {
        Rest => "rest",
        McpNative => "mcp_native",
        McpCompat => "mcp_compat",
    }
    ExecutionOutcome {
        Success => "success",
        Failure => "failure",
    }
    FailureReason {
        ToolError => "tool_error",
        DeadlineExceeded => "deadline_exceeded",
        OwnerLost => "owner_lost",
        UnsupportedInteraction => "unsupported_interaction",
        InvocationRefused => "invocation_refused",
        ProtocolError => "protocol_error",
    }
    Role {
        Admin => "admin",
        Operator => "operator",
        Member => "member",
        ReadOnly => "read_only",
    }
    DeclineReason {
        AtCapacity => "at_capacity",
        Draining => "draining",
    }
    TimelineEvent {
        Created => "created",
        Claimed => "claimed",
        Settled => "settled",
        CancelRequested => "cancel_requested",
        LeaseLapsed => "lease_lapsed",
        OwnerLost => "owner_lost",
        DeadlineExceeded => "deadline_exceeded",
        Refused => "refused",
        Undelivered => "undelivered",
        RemoteTaskRecorded => "remote_task_recorded",
        InputRequested => "input_requested",
        InputAnswered => "input_answered",
    }
}

impl ExecutionStatus {
    /// Completed, failed and cancelled never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, ExecutionStatus::Completed | ExecutionStatus::Failed | ExecutionStatus::Cancelled)
    }
}

/// The prefix of every execution id.
pub const EXECUTION_ID_PREFIX: &str = "te_";
/// The base62 digits after the prefix (160 random bits).
pub const EXECUTION_ID_DIGITS: usize = 27;

/// `te_` followed by 27 base62 characters; anything else cannot name an
/// execution (the shape the coordinator mints).
pub fn is_execution_id(id: &str) -> bool {
    id.strip_prefix(EXECUTION_ID_PREFIX)
        .is_some_and(|rest| rest.len() == EXECUTION_ID_DIGITS && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks one enum against its `.proto` declaration: `ALL` holds every
    /// declared value but the unspecified one, each name is the value's proto
    /// name without the enum prefix, in lowercase, and names round-trip.
    macro_rules! check {
        ($ty:ident, $prefix:literal) => {{
            let declared: Vec<$ty> = (1..64).filter_map(|n| $ty::try_from(n).ok()).collect();
            assert_eq!($ty::ALL, declared.as_slice(), "{} ALL", stringify!($ty));
            for v in $ty::ALL.iter().copied() {
                let proto = v.as_str_name().strip_prefix($prefix).unwrap_or_default().to_ascii_lowercase();
                assert_eq!(v.name(), proto, "{}", stringify!($ty));
                assert_eq!($ty::from_name(v.name()), Some(v));
            }
            assert_eq!($ty::Unspecified.name(), "");
            assert_eq!($ty::from_name(""), None);
            assert_eq!($ty::from_name("unspecified"), None);
        }};
    }

    #[test]
    fn every_name_is_the_proto_name_in_lowercase_and_round_trips() {
        check!(ExecutionStatus, "EXECUTION_STATUS_");
        check!(CancelState, "CANCEL_STATE_");
        check!(StopReason, "STOP_REASON_");
        check!(BackgroundPolicy, "BACKGROUND_POLICY_");
        check!(InputAction, "INPUT_ACTION_");
        check!(CancelOutcome, "CANCEL_OUTCOME_");
        check!(PrincipalKind, "PRINCIPAL_KIND_");
        check!(ExecutionType, "EXECUTION_TYPE_");
        check!(InputRequestState, "INPUT_REQUEST_STATE_");
        check!(MessageKind, "MESSAGE_KIND_");
        check!(Surface, "SURFACE_");
        check!(ExecutionOutcome, "EXECUTION_OUTCOME_");
        check!(FailureReason, "FAILURE_REASON_");
        check!(TimelineEvent, "TIMELINE_EVENT_");
        check!(WebhookDeliveryStatus, "WEBHOOK_DELIVERY_STATUS_");
        check!(Role, "ROLE_");
        check!(DeclineReason, "DECLINE_REASON_");
    }

    #[test]
    fn a_twin_is_read_from_the_enum_first_then_from_the_string() {
        let known = FailureReason::OwnerLost as i32;
        // A sender of today fills both; one of 0.1 only the string.
        assert_eq!(FailureReason::read_twin(known, "owner_lost"), FailureReason::OwnerLost);
        assert_eq!(FailureReason::read_twin(0, "owner_lost"), FailureReason::OwnerLost);
        // The enum wins over a string that disagrees.
        assert_eq!(FailureReason::read_twin(known, "tool_error"), FailureReason::OwnerLost);
        // A newer sender's value, in both fields, is unknown here: unspecified.
        assert_eq!(FailureReason::read_twin(99, "meteor_strike"), FailureReason::Unspecified);
        assert_eq!(FailureReason::read_twin(99, "tool_error"), FailureReason::ToolError);
        assert_eq!(FailureReason::read_twin(0, ""), FailureReason::Unspecified);
    }

    #[test]
    fn exactly_three_statuses_are_terminal() {
        let terminal: Vec<_> = ExecutionStatus::ALL.iter().copied().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [ExecutionStatus::Completed, ExecutionStatus::Failed, ExecutionStatus::Cancelled]);
        assert!(!ExecutionStatus::Unspecified.is_terminal());
    }

    #[test]
    fn execution_ids_have_one_shape() {
        assert!(is_execution_id("te_0123456789ABCDEFGHIJabcdefg"));
        for id in [
            "",
            "te_",
            "te_short",
            "te_0123456789ABCDEFGHIJabcdef",
            "te_0123456789ABCDEFGHIJabcdefgh",
            "tx_0123456789ABCDEFGHIJabcdefg",
            "te_0123456789ABCDEFGHIJabcde-",
        ] {
            assert!(!is_execution_id(id), "{id}");
        }
    }
}
