//! The six statuses an execution can be in, and the reasons it can fail.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Pending,
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 6] =
        [Status::Pending, Status::Working, Status::InputRequired, Status::Completed, Status::Failed, Status::Cancelled];

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an execution failed. Visible to every reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// The tool reported an error (after its last permitted attempt).
    ToolError,
    DeadlineExceeded,
    OwnerLost,
    UnsupportedInteraction,
    /// Refused before the tool ran (policy forbids it).
    InvocationRefused,
    /// The tool's server failed the call at protocol level instead of
    /// answering with a result (a remote MCP server's JSON-RPC error).
    ProtocolError,
}

impl FailureReason {
    pub const ALL: [FailureReason; 6] = [
        FailureReason::ToolError,
        FailureReason::DeadlineExceeded,
        FailureReason::OwnerLost,
        FailureReason::UnsupportedInteraction,
        FailureReason::InvocationRefused,
        FailureReason::ProtocolError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::ToolError => "tool_error",
            FailureReason::DeadlineExceeded => "deadline_exceeded",
            FailureReason::OwnerLost => "owner_lost",
            FailureReason::UnsupportedInteraction => "unsupported_interaction",
            FailureReason::InvocationRefused => "invocation_refused",
            FailureReason::ProtocolError => "protocol_error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        for r in FailureReason::ALL {
            assert_eq!(FailureReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(Status::parse("done"), None);
    }

    #[test]
    fn background_policies_are_stored_as_the_wire_names_them() {
        for b in [Background::Forbidden, Background::Optional, Background::Required] {
            assert_eq!(Background::parse(b.as_str()), Some(b));
        }
        assert_eq!(Background::parse("forbidden"), Some(Background::Forbidden));
        assert_eq!(Background::parse(""), None);
        assert_eq!(Background::parse("sometimes"), None);
    }

    #[test]
    fn exactly_three_statuses_are_terminal() {
        let terminal: Vec<_> = Status::ALL.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [Status::Completed, Status::Failed, Status::Cancelled]);
    }
}

/// What an entry of an execution's event log records: `Event::name` of each
/// logged event, and `created`, written with the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Created,
    Claimed,
    Settled,
    CancelRequested,
    LeaseLapsed,
    OwnerLost,
    DeadlineExceeded,
    Refused,
    Undelivered,
    RemoteTaskRecorded,
    InputRequested,
    InputAnswered,
}

impl EventKind {
    pub const ALL: [EventKind; 12] = [
        EventKind::Created,
        EventKind::Claimed,
        EventKind::Settled,
        EventKind::CancelRequested,
        EventKind::LeaseLapsed,
        EventKind::OwnerLost,
        EventKind::DeadlineExceeded,
        EventKind::Refused,
        EventKind::Undelivered,
        EventKind::RemoteTaskRecorded,
        EventKind::InputRequested,
        EventKind::InputAnswered,
    ];

    /// The stored spelling (the wire's `TimelineEvent` names).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Created => "created",
            EventKind::Claimed => "claimed",
            EventKind::Settled => "settled",
            EventKind::CancelRequested => "cancel_requested",
            EventKind::LeaseLapsed => "lease_lapsed",
            EventKind::OwnerLost => "owner_lost",
            EventKind::DeadlineExceeded => "deadline_exceeded",
            EventKind::Refused => "refused",
            EventKind::Undelivered => "undelivered",
            EventKind::RemoteTaskRecorded => "remote_task_recorded",
            EventKind::InputRequested => "input_requested",
            EventKind::InputAnswered => "input_answered",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Whether a tool may run in the background, as its worker registered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Background {
    /// Only a foreground MCP call: a REST start is refused.
    Forbidden,
    Optional,
    Required,
}

impl Background {
    /// The stored spelling (the wire's `BackgroundPolicy` names).
    pub fn as_str(self) -> &'static str {
        match self {
            Background::Forbidden => "forbidden",
            Background::Optional => "optional",
            Background::Required => "required",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Background::Forbidden, Background::Optional, Background::Required].into_iter().find(|b| b.as_str() == s)
    }
}

/// Where an execution was started: its REST route, an MCP task (or a
/// foreground MCP call), or the MCP compatibility handle. A start that names
/// none is a REST start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Surface {
    #[default]
    Rest,
    McpNative,
    McpCompat,
}

impl Surface {
    /// The stored spelling (the wire's `Surface` names).
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Rest => "rest",
            Surface::McpNative => "mcp_native",
            Surface::McpCompat => "mcp_compat",
        }
    }
}
