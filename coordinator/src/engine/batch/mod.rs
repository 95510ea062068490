//! Batching, the engine's plumbing rather than a use case: concurrent calls
//! share one statement and one commit. `coalesce` is the shape every batcher
//! takes (one task runs whatever is queued as one batch, and loops; a lone
//! call goes at once); `creates`, `reads` and `start_reads` are the batchers
//! of starts' inserts, owner reads, and starts' credential-and-tool reads.

pub(crate) mod coalesce;
mod creates;
mod reads;
mod start_reads;

pub(crate) use creates::{Claim, Creates};
pub(crate) use reads::Reads;
pub(in crate::engine) use start_reads::StartReads;
