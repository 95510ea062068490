//! The worker: the tool-author SDK, the runtime that serves tools to a
//! coordinator, and the example tools. Stateless: anything that must outlive the
//! process is sent to the coordinator before it is relied on.

pub mod conformance;
pub mod dial;
pub mod examples;
pub mod metrics;
pub mod remote;
pub mod runtime;
pub mod sdk;
pub mod supervise;

pub use runtime::{Options, Worker};
pub use sdk::{Background, Context, Failure, Output, Tool, ToolSpec};
