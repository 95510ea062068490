//! The worker: the tool-author SDK, the runtime that serves tools to a
//! coordinator, and the example tools. A tool author's binary is typed tools
//! ([`TypedTool`], wrapped by [`typed`]) handed to [`serve()`]; see
//! `docs/writing-tools.md`. Stateless: anything that must outlive the
//! process is sent to the coordinator before it is relied on.

pub mod conformance;
pub mod dial;
pub mod examples;
pub mod metrics;
pub mod reconnect;
pub mod remote;
pub mod runtime;
pub mod sdk;
pub mod serve;
pub mod supervise;
pub mod testing;
mod wire;

pub use runtime::{Options, Worker};
/// Re-exported so a tool crate's derives and this crate agree on one version.
pub use schemars;
pub use sdk::{
    Background, Context, Failure, Icon, Json, Output, Progress, Tool, ToolAnnotations, ToolOutput, ToolSpec, TypedTool,
    schema_of, typed,
};
pub use serve::serve;
/// The attribute an untyped [`Tool`] impl takes (`#[baton_worker::async_trait]`).
pub use tonic::async_trait;
