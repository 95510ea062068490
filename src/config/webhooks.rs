//! The `webhooks` section: lifecycle webhook delivery and the target policy.
//! Read by coordinators, and by `baton admin webhook` when it creates endpoints.

use super::{Error, field};
use serde::Deserialize;

/// Lifecycle webhooks (coordinators, and `baton admin` when it creates endpoints).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct WebhooksSection {
    /// Accept targets that resolve to loopback addresses (`baton dev` does).
    pub allow_loopback_targets: bool,
    /// Accept targets that resolve to private, link-local and other
    /// non-public addresses (loopback too). Off: such targets are refused.
    pub allow_private_targets: bool,
    /// A signal not delivered this long after it was written is given up.
    pub retry_horizon_ms: i64,
    /// The first retry waits about this long; each later one about twice as long.
    pub retry_initial_ms: i64,
    /// No wait between attempts is longer than this.
    pub retry_max_delay_ms: i64,
    /// One delivery attempt takes at most this long.
    pub request_timeout_ms: u64,
    /// How often a coordinator looks for due signals it was not told about.
    pub poll_interval_ms: u64,
    /// After a secret rotation, deliveries also carry the previous secret's
    /// signature for this long.
    pub rotation_overlap_ms: i64,
    /// Delivery attempts one coordinator makes at once.
    pub concurrency: usize,
    /// Endpoints one project may have; creating one more is refused.
    pub max_endpoints_per_project: u32,
}

impl Default for WebhooksSection {
    fn default() -> Self {
        let d = baton_coordinator::webhooks::Options::default();
        WebhooksSection {
            allow_loopback_targets: d.allow_loopback_targets,
            allow_private_targets: d.allow_private_targets,
            retry_horizon_ms: d.retry_horizon_ms,
            retry_initial_ms: d.retry_initial_ms,
            retry_max_delay_ms: d.retry_max_delay_ms,
            request_timeout_ms: d.request_timeout_ms,
            poll_interval_ms: d.poll_interval_ms,
            rotation_overlap_ms: d.rotation_overlap_ms,
            concurrency: d.concurrency,
            max_endpoints_per_project: d.max_endpoints_per_project,
        }
    }
}

impl WebhooksSection {
    pub(crate) fn options(&self) -> baton_coordinator::webhooks::Options {
        baton_coordinator::webhooks::Options {
            allow_loopback_targets: self.allow_loopback_targets,
            allow_private_targets: self.allow_private_targets,
            retry_horizon_ms: self.retry_horizon_ms,
            retry_initial_ms: self.retry_initial_ms,
            retry_max_delay_ms: self.retry_max_delay_ms,
            request_timeout_ms: self.request_timeout_ms,
            poll_interval_ms: self.poll_interval_ms,
            rotation_overlap_ms: self.rotation_overlap_ms,
            concurrency: self.concurrency,
            max_endpoints_per_project: self.max_endpoints_per_project,
        }
    }

    pub(super) fn validate(&self) -> Result<(), Error> {
        for (name, positive) in [
            ("webhooks.retry_horizon_ms", self.retry_horizon_ms > 0),
            ("webhooks.retry_initial_ms", self.retry_initial_ms > 0),
            ("webhooks.retry_max_delay_ms", self.retry_max_delay_ms > 0),
            ("webhooks.request_timeout_ms", self.request_timeout_ms > 0),
            ("webhooks.poll_interval_ms", self.poll_interval_ms > 0),
            ("webhooks.rotation_overlap_ms", self.rotation_overlap_ms >= 0),
            ("webhooks.concurrency", (1..=4096).contains(&self.concurrency)),
            ("webhooks.max_endpoints_per_project", (1..=1000).contains(&self.max_endpoints_per_project)),
        ] {
            if !positive {
                return Err(field(name, "must be positive (concurrency at most 4096)"));
            }
        }
        Ok(())
    }
}
