//! What workers tell the engine and what the engine tells them, in the engine's
//! own terms. `grpc/worker.rs` and `grpc/peer.rs` translate to and from the wire;
//! nothing in the engine sees a generated type.

use crate::domain::StopReason;
use crate::store::ToolRecord;

/// One attempt of one execution, as a worker names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttemptRef {
    pub execution_id: String,
    pub attempt: u32,
}

impl AttemptRef {
    pub fn new(execution_id: &str, attempt: u32) -> Self {
        AttemptRef { execution_id: execution_id.to_owned(), attempt }
    }
}

/// A worker opening a session.
#[derive(Clone, Debug, Default)]
pub struct Registration {
    pub worker_id: String,
    pub worker_token: String,
    /// As declared; the engine validates them.
    pub tools: Vec<ToolRecord>,
    pub capacity: u32,
    /// Attempts it still runs from an earlier session.
    pub running: Vec<AttemptRef>,
    /// Attempts it finished whose settlement is not yet acknowledged.
    pub settling: Vec<AttemptRef>,
}

#[derive(Clone, Debug, Default)]
pub struct Heartbeat {
    pub running: Vec<AttemptRef>,
    pub free_slots: u32,
    /// Settled and sent, not yet acknowledged: leases renewed, never stopped.
    pub settling: Vec<AttemptRef>,
}

/// How the worker says an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
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
    pub attempt: AttemptRef,
    /// `None` when the worker sent no outcome: refused as invalid.
    pub outcome: Option<Reported>,
}

/// The remote tool call created a remote task (remote MCP servers).
#[derive(Clone, Debug)]
pub struct RemoteTaskStarted {
    pub attempt: AttemptRef,
    pub remote_task_id: String,
    /// The remote task's ttl; a shorter one shortens the deadline.
    pub remote_ttl_ms: i64,
}

/// A remote server's request for the owner's input.
#[derive(Clone, Debug)]
pub struct RemoteInputRequest {
    pub remote_key: String,
    pub message: String,
    pub requested_schema_json: String,
}

#[derive(Clone, Debug)]
pub struct InputRequested {
    pub attempt: AttemptRef,
    pub requests: Vec<RemoteInputRequest>,
}

/// The worker relayed an owner's answer to the remote server.
#[derive(Clone, Debug)]
pub struct InputDelivered {
    pub attempt: AttemptRef,
    pub remote_key: String,
}

/// An owner's answer, relayed to the lease holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputAnswer {
    pub attempt: AttemptRef,
    pub remote_key: String,
    /// The action's lowercase name, as the owner gave it (`grpc` reads it
    /// back into the wire enum).
    pub action: String,
    pub content_json: String,
}

/// Work for a worker.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub attempt: AttemptRef,
    pub tool_name: String,
    pub input_json: String,
    pub deadline_ms: i64,
    pub traceparent: String,
    /// Set when this attempt already started a remote task: resume it, never call again.
    pub resume_remote_task_id: String,
    /// Answers the previous owner had not relayed yet.
    pub pending_input: Vec<InputAnswer>,
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
pub struct OpenInputRequest {
    pub request_key: String,
    pub message: String,
    pub requested_schema_json: String,
}

/// The owner's answer to a published request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerAnswer {
    /// The action's lowercase name (accept, decline or cancel), spelled by
    /// `grpc`; empty when the caller named no action.
    pub action: String,
    pub content_json: String,
}
