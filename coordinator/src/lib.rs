//! The coordinator: authorization, admission, the execution state machine and its
//! durable record, worker sessions and dispatch. The only process with database
//! and Redis credentials.

pub mod crypto;
pub mod domain;
pub mod store;
