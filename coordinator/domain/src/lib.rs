//! The pure core: identifiers, statuses, the execution state machine and the time
//! policies. Knows nothing of storage, networks or the clock; every adapter calls in.

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

pub mod id;
pub(crate) mod machine;
pub mod policy;
pub(crate) mod status;

#[cfg(test)]
mod machine_tests;

pub use id::{AttemptRef, ExecutionId};
pub use machine::{Effect, Event, Ignored, Lease, Outcome, Phase, State, StopReason, Transition, apply};
pub use policy::{Deadlines, Lifetime};
pub use status::{Background, EventKind, FailureReason, Status, Surface};
