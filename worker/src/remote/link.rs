//! The driver's line to the coordinator: what it sends (through the worker's
//! current session, whichever that is after reconnects) and what the runtime
//! routes to it (acknowledgements, owners' answers, stops).

use baton_proto::worker::v1::{self as wpb, MessageKind, StopReason, worker_message};

/// Routed by the runtime to the driver of one attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Relay {
    /// `Ack.kind`: a remote task or input requests are on record.
    Ack(MessageKind),
    /// An owner's answer to relay to the remote server.
    Input(wpb::InputResponse),
    /// The coordinator's stop.
    Stop(StopReason),
}

/// Sends to the coordinator over the worker's current session.
#[tonic::async_trait]
pub trait Uplink: Send + Sync {
    /// False when no session is up (the caller resends later).
    async fn send(&self, m: worker_message::Msg) -> bool;
}
