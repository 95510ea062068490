//! The one wall clock of every Baton process. Every time that is stored or
//! crosses the wire is milliseconds since the Unix epoch read here; intervals
//! and timeouts use `Instant`, which no wall-clock step can move.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, as a point in time (deadlines a process computes with).
pub fn now() -> SystemTime {
    SystemTime::now()
}

/// Now in milliseconds since the Unix epoch; 0 on a clock set before 1970.
pub fn now_ms() -> i64 {
    i64::try_from(since_epoch().as_millis()).unwrap_or(i64::MAX)
}

/// Now in whole seconds since the Unix epoch.
pub fn unix_seconds() -> u64 {
    since_epoch().as_secs()
}

fn since_epoch() -> Duration {
    now().duration_since(UNIX_EPOCH).unwrap_or_default()
}
