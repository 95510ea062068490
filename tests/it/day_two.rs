//! Day-two operations: running a cluster across releases.

mod skew;
