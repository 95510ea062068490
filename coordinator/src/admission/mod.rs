//! Admission: the five bounds of seed 000, checked when an execution is created.
//!
//! - principal concurrency: non-terminal executions of one canonical owner (project, user);
//! - project / organization concurrency: non-terminal executions in the project / org;
//! - backlog: executions of the project admitted but not yet started;
//! - retained payload bytes: every payload byte the project's executions keep
//!   (input, result, error detail, input requests and answers) until their
//!   retention expires.
//!
//! An execution holds its concurrency places from admission until it turns
//! terminal (and its backlog place until it starts). Its payload bytes count
//! from admission (the input) until its retention expires; at the terminal
//! transition they become everything the record keeps. Bytes are held per
//! retention hour (`retention_bucket`), so a project's total drops as hours
//! pass without a record per execution. Admitting the same id twice counts once.
//! Two implementations: `memory` (one process, `baton dev`) and `redis` (a
//! Redis node or a Redis Cluster, shared by every coordinator).

pub mod memory;
pub mod redis;
mod redis_batch;
pub mod redis_keys;
mod redis_scripts;

#[cfg(test)]
mod contract_tests;

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub principal_concurrency: u64,
    pub project_concurrency: u64,
    pub organization_concurrency: u64,
    pub backlog: u64,
    pub retained_payload_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Principal,
    Project,
    Organization,
    Backlog,
    RetainedPayloadBytes,
}

impl Scope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::Principal => "principal",
            Scope::Project => "project",
            Scope::Organization => "organization",
            Scope::Backlog => "backlog",
            Scope::RetainedPayloadBytes => "retained_payload_bytes",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one execution claims: its id, its scopes and its payload size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub execution_id: String,
    pub org_id: String,
    pub project_id: String,
    pub user_id: String,
    /// The payload bytes the execution keeps: its input at admission, all of
    /// them at the terminal transition.
    pub payload_bytes: u64,
    /// When the execution's claim may be dropped even if never released (its
    /// deadline): a crashed coordinator cannot leak capacity forever.
    pub expires_at_ms: i64,
    /// When its record, and so its payload bytes, stop being retained.
    pub retained_until_ms: i64,
}

/// Bytes are held per hour of retention: the end of the hour that holds
/// `retained_until_ms`, so they are never released before the record is.
pub(crate) fn retention_bucket(retained_until_ms: i64) -> i64 {
    const HOUR: i64 = 3_600_000;
    retained_until_ms.div_euclid(HOUR).saturating_add(1).saturating_mul(HOUR)
}

/// The retained payload bytes of one project whose retention ends in one hour
/// (`retention_bucket`), as Postgres holds them: what a rebuild after a loss
/// starts the byte totals from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetainedBytes {
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) bucket: i64,
    pub(crate) bytes: u64,
}

/// An admission granted, and the generation it was granted under: the
/// create's insert checks it is still current (store/fence.rs). None where
/// admission cannot lose its state (one process's memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    pub(crate) fence: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub scope: Scope,
    /// When retrying is likely to succeed, from the scope's recent hold times.
    pub(crate) retry_after_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("admission store unavailable: {0}")]
    Unavailable(String),
}

#[tonic::async_trait]
pub trait Admission: Send + Sync + 'static {
    /// Admits the ticket into every scope at once, or names a full scope.
    async fn admit(&self, t: &Ticket, now_ms: i64) -> Result<Result<Admitted, Rejection>, Error>;
    /// The execution started: it leaves the backlog.
    async fn started(&self, t: &Ticket, now_ms: i64) -> Result<(), Error>;
    /// The execution is terminal: it leaves every concurrency scope, and its
    /// payload bytes become `t.payload_bytes` (all it keeps) until retention ends.
    async fn release(&self, t: &Ticket, now_ms: i64) -> Result<(), Error>;
    /// The execution was never created (its insert failed, or it was a
    /// replay): it leaves every scope and its bytes are given back.
    async fn withdraw(&self, t: &Ticket, now_ms: i64) -> Result<(), Error>;
    /// Starts over from the durable truth: the open executions (each with
    /// whether it left the backlog) and the bytes finished runs retain. Only
    /// admission kept in one process's memory needs it, at every start (a
    /// restarted process holds nothing); Redis is rebuilt under the fence
    /// instead (`engine::sweeper::rebuild_admission`).
    async fn restore(&self, _open: &[(Ticket, bool)], _retained: &[RetainedBytes], _now_ms: i64) -> Result<(), Error> {
        Ok(())
    }
}

/// Retry-After from the average time an execution recently held its place,
/// clamped to [1 s, 60 s].
pub(crate) fn retry_after_from_hold(avg_hold_ms: Option<f64>) -> u64 {
    avg_hold_ms.map_or(1_000, |ms| ms.clamp(1_000.0, 60_000.0) as u64)
}
