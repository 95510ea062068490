//! Lifecycle webhooks (`tool.execution.lifecycle`): thin, signed signals for
//! executions that enter `input_required`, `completed`, `failed` or
//! `cancelled`, delivered at least once to a project's endpoints.
//!
//! Owns: what a signal says (`signal`), how it is signed (`sign`, Standard
//! Webhooks), which targets may be called (`target`), the management rules
//! shared by the API and `baton admin` (`manage`), and the delivery loop every
//! replica runs (`deliver`). Does not own: the outbox insert, which the store
//! makes in the transaction of the transition (`store::write`), nor who may
//! manage endpoints (the engine checks that before calling `manage`).
//! A delivery never changes an execution: nothing here writes to `executions`.

pub(crate) mod deliver;
pub mod manage;
pub(crate) mod sign;
pub(crate) mod signal;
pub(crate) mod target;

/// The one event type there is.
pub const EVENT_TYPE: &str = "tool.execution.lifecycle";

/// How webhooks behave on this coordinator (and in `baton admin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Targets resolving to loopback addresses are accepted (`baton dev`, tests).
    pub allow_loopback_targets: bool,
    /// Targets resolving to private, link-local and other non-public addresses
    /// are accepted (loopback too).
    pub allow_private_targets: bool,
    /// A signal not delivered this long after it was written is given up.
    pub retry_horizon_ms: i64,
    /// The first retry waits about this long; each later one about twice as long.
    pub retry_initial_ms: i64,
    /// No wait between attempts is longer than this.
    pub retry_max_delay_ms: i64,
    /// One delivery attempt (connect, send, answer) takes at most this long.
    pub request_timeout_ms: u64,
    /// How often a replica looks for due signals when nothing woke it.
    pub poll_interval_ms: u64,
    /// After a rotation, deliveries are signed with the previous secret too for this long.
    pub rotation_overlap_ms: i64,
    /// Attempts one replica makes at once.
    pub concurrency: usize,
    /// Endpoints one project may have: each is one more delivery per run,
    /// written in the settlement's own transaction.
    pub max_endpoints_per_project: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            allow_loopback_targets: false,
            allow_private_targets: false,
            retry_horizon_ms: 24 * 3_600_000,
            retry_initial_ms: 5_000,
            retry_max_delay_ms: 3_600_000,
            request_timeout_ms: 10_000,
            poll_interval_ms: 1_000,
            rotation_overlap_ms: 24 * 3_600_000,
            concurrency: 64,
            max_endpoints_per_project: 10,
        }
    }
}
