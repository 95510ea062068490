//! The coordinator reads the one clock of every process (`baton_proto::clock`):
//! wall time in milliseconds since the Unix epoch, the unit every stored time uses.

pub use baton_proto::clock::now_ms;
