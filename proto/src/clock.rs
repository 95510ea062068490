//! The one wall clock of every Baton process. Every time that is stored or
//! crosses the wire is milliseconds since the Unix epoch read here; intervals
//! and timeouts use `Instant`, which no wall-clock step can move.
//!
//! A thread may instead run on a simulated clock ([`simulated`]): the
//! deterministic simulation (`baton-proof`) runs coordinators and workers on
//! one thread and moves time itself, so that a seed replays exactly. Nothing
//! in a Baton process sets it.

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

thread_local! {
    /// This thread's simulated now (ms), when the simulation set one.
    static SIMULATED: RefCell<Option<watch::Sender<i64>>> = const { RefCell::new(None) };
}

fn simulated_now() -> Option<i64> {
    SIMULATED.with(|s| s.borrow().as_ref().map(|now| *now.borrow()))
}

/// Now, as a point in time (deadlines a process computes with).
pub fn now() -> SystemTime {
    match simulated_now() {
        Some(ms) => UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
        None => SystemTime::now(),
    }
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

/// Waits until the wall clock reads `at` (at once if it already does). On a
/// simulated clock it wakes when the simulation moves time past `at`.
pub async fn sleep_until(at: SystemTime) {
    let simulated = SIMULATED.with(|s| s.borrow().as_ref().map(watch::Sender::subscribe));
    let Some(mut ticks) = simulated else {
        tokio::time::sleep(at.duration_since(now()).unwrap_or_default()).await;
        return;
    };
    while now() < at {
        if ticks.changed().await.is_err() {
            // The simulation ended: time stands still for good.
            std::future::pending::<()>().await;
        }
    }
}

/// The simulated clock of the current thread.
pub mod simulated {
    use super::SIMULATED;
    use tokio::sync::watch;

    /// Puts this thread on a simulated clock reading `now_ms`.
    pub fn start(now_ms: i64) {
        SIMULATED.with(|s| *s.borrow_mut() = Some(watch::channel(now_ms).0));
    }

    /// Moves simulated time forward to `now_ms` (never back), waking sleepers due by then.
    pub fn advance_to(now_ms: i64) {
        SIMULATED.with(|s| {
            if let Some(now) = s.borrow().as_ref() {
                now.send_if_modified(|t| {
                    let later = now_ms > *t;
                    *t = (*t).max(now_ms);
                    later
                });
            }
        });
    }

    /// Puts this thread back on the system clock.
    pub fn stop() {
        SIMULATED.with(|s| *s.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_simulated_clock_moves_only_when_told_and_wakes_sleepers_then() {
        simulated::start(1_000);
        assert_eq!(now_ms(), 1_000);
        let sleeper = tokio::spawn(sleep_until(UNIX_EPOCH + Duration::from_millis(5_000)));
        tokio::task::yield_now().await;
        simulated::advance_to(4_999);
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished(), "woken before its time");
        simulated::advance_to(3_000);
        assert_eq!(now_ms(), 4_999, "time never runs back");
        simulated::advance_to(5_000);
        let woke = tokio::time::timeout(Duration::from_secs(5), sleeper).await;
        assert!(matches!(woke, Ok(Ok(()))), "the sleeper wakes once its time has come");
        simulated::stop();
        assert!(now_ms() > 1_600_000_000_000, "back on the system clock");
    }
}
