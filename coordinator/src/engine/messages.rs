//! What workers tell the engine and what the engine tells them, in the engine's
//! own terms. `grpc/worker.rs` and `grpc/peer.rs` translate to and from the wire;
//! nothing in the engine sees a generated type.

pub use crate::domain::AttemptRef;
use crate::domain::StopReason;
use crate::store::ToolRecord;

/// A worker opening a session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Registration {
    pub(crate) worker_id: String,
    pub(crate) worker_token: String,
    /// As declared; the engine validates them.
    pub(crate) tools: Vec<ToolRecord>,
    pub(crate) capacity: u32,
    /// Attempts it still runs from an earlier session.
    pub(crate) running: Vec<AttemptRef>,
    /// Attempts it finished whose settlement is not yet acknowledged.
    pub(crate) settling: Vec<AttemptRef>,
}

#[derive(Clone, Debug, Default)]
pub struct Heartbeat {
    pub(crate) running: Vec<AttemptRef>,
    pub(crate) free_slots: u32,
    /// Settled and sent, not yet acknowledged: leases renewed, never stopped.
    pub(crate) settling: Vec<AttemptRef>,
}

/// How the worker says an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reported {
    /// `{"content": [...], "structuredContent": ...}`
    Result(String),
    ToolError {
        message: String,
        retryable: bool,
        detail_json: String,
        /// The server failed the call at protocol level (see the wire's `ToolError`).
        protocol: bool,
    },
    /// The tool stopped because it was asked to.
    Cancelled,
    /// A remote server asked for an interaction Baton does not support.
    UnsupportedInteraction(String),
}

#[derive(Clone, Debug)]
pub struct Settlement {
    pub(crate) attempt: AttemptRef,
    /// `None` when the worker sent no outcome: refused as invalid.
    pub(crate) outcome: Option<Reported>,
}

/// The remote tool call created a remote task (remote MCP servers).
#[derive(Clone, Debug)]
pub struct RemoteTaskStarted {
    pub(crate) attempt: AttemptRef,
    pub(crate) remote_task_id: String,
    /// The remote task's ttl; a shorter one shortens the deadline.
    pub(crate) remote_ttl_ms: i64,
}

/// A remote server's request for the owner's input.
#[derive(Clone, Debug)]
pub(crate) struct RemoteInputRequest {
    pub(crate) remote_key: String,
    pub(crate) message: String,
    pub(crate) requested_schema_json: String,
}

#[derive(Clone, Debug)]
pub struct InputRequested {
    pub(crate) attempt: AttemptRef,
    pub(crate) requests: Vec<RemoteInputRequest>,
}

/// The worker relayed an owner's answer to the remote server.
#[derive(Clone, Debug)]
pub struct InputDelivered {
    pub(crate) attempt: AttemptRef,
    pub(crate) remote_key: String,
}

/// An owner's answer, relayed to the lease holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputAnswer {
    pub(crate) attempt: AttemptRef,
    pub(crate) remote_key: String,
    /// The action's lowercase name, as the owner gave it (`grpc` reads it
    /// back into the wire enum).
    pub(crate) action: String,
    pub(crate) content_json: String,
}

/// Work for a worker.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub(crate) attempt: AttemptRef,
    pub(crate) tool_name: String,
    pub(crate) input_json: String,
    pub(crate) deadline_ms: i64,
    pub(crate) traceparent: String,
    /// Set when this attempt already started a remote task: resume it, never call again.
    pub(crate) resume_remote_task_id: String,
    /// Answers the previous owner had not relayed yet.
    pub(crate) pending_input: Vec<InputAnswer>,
}

/// Which worker message an acknowledgement or a refusal is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    Settlement,
    Heartbeat,
    RemoteTask,
    InputRequested,
    InputDelivered,
}

/// Why a worker declined an assignment. Every reason is handled alike (the
/// attempt never reached the tool, so it is claimable again); it is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclineReason {
    AtCapacity,
    Draining,
    /// None stated, or one this release does not know (a newer worker's).
    Unknown,
}

impl DeclineReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DeclineReason::AtCapacity => "at_capacity",
            DeclineReason::Draining => "draining",
            DeclineReason::Unknown => "unknown",
        }
    }
}

/// What the engine tells a worker.
#[derive(Clone, Debug)]
pub enum Command {
    Registered {
        coordinator_id: String,
        heartbeat_interval_ms: i64,
        stop: Vec<AttemptRef>,
    },
    Assign(Assignment),
    Stop {
        attempt: AttemptRef,
        reason: StopReason,
    },
    SettlementAck(AttemptRef),
    /// A remote-task record or published input requests are durable.
    Ack {
        attempt: AttemptRef,
        kind: MessageKind,
    },
    Answer(InputAnswer),
    /// The message named an attempt this worker does not hold; it changed nothing.
    Refused {
        attempt: AttemptRef,
        kind: MessageKind,
    },
}

/// An open input request, as its owner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenInputRequest {
    pub(crate) request_key: String,
    pub(crate) message: String,
    pub(crate) requested_schema_json: String,
}

/// The owner's answer to a published request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OwnerAnswer {
    /// The action's lowercase name (accept, decline or cancel), spelled by
    /// `grpc`; empty when the caller named no action.
    pub(crate) action: String,
    pub(crate) content_json: String,
}
