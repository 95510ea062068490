//! Day-two operations on a running deployment: what an operator does to it
//! after the first install, and running a cluster across releases, tested
//! as the operator does it.

mod backup;
mod golden;
mod key_retirement;
mod migrations;
mod mixed_versions;
mod skew;
mod string_twins;
