//! Credential re-checks at wake-up, shared by the waiters one change woke.
//!
//! A waiter answers only after its credential is checked again (`WhoAmI`), so
//! a credential revoked while it was parked gets 401, not the execution. When
//! one change wakes 10,000 waiters holding one token, that is one call: a
//! check is shared by every waiter with the same bearer whose wake-up came no
//! later than the check began, because such a check sees every revocation
//! that happened before the change that woke them.

use baton_proto::error::WireError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::OnceCell;
use tokio::time::{Duration, Instant};

/// Checks older than this are forgotten when the map is tidied.
const FORGET_AFTER: Duration = Duration::from_secs(60);
/// The map is tidied when it grows past this many bearers.
const TIDY_ABOVE: usize = 1024;

type Outcome = Result<(), WireError>;

struct Check {
    /// When the check was created: before its call began.
    began: Instant,
    outcome: Arc<OnceCell<Outcome>>,
}

/// The process's re-checks in flight (or just finished), by bearer.
#[derive(Default)]
pub(crate) struct Checks {
    /// Keyed by a hash of the token, so no token outlives its waiters here.
    by_bearer: Mutex<HashMap<[u8; 32], Check>>,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Checks")
    }
}

impl Checks {
    /// Whether bearer token `token` is still good, by a check that began at
    /// or after `woken` (one is made with `ask` when none did).
    pub(crate) async fn verify<F, Fut>(&self, token: &str, woken: Instant, ask: F) -> Outcome
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let outcome = {
            let mut map = self.by_bearer.lock().unwrap_or_else(PoisonError::into_inner);
            match map.get(&key) {
                Some(check) if check.began >= woken => Arc::clone(&check.outcome),
                _ => {
                    if map.len() > TIDY_ABOVE {
                        map.retain(|_, c| c.began.elapsed() < FORGET_AFTER);
                    }
                    let outcome = Arc::new(OnceCell::new());
                    map.insert(key, Check { began: Instant::now(), outcome: Arc::clone(&outcome) });
                    outcome
                }
            }
        };
        // Whoever polls first asks; a waiter that leaves hands the call on.
        outcome.get_or_init(ask).await.clone()
    }

    /// Bearers remembered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_bearer.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_proto::error::ErrorCode;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn waiters_woken_together_share_one_check_per_bearer() {
        let checks = Arc::new(Checks::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let woken = Instant::now();
        let mut all = Vec::new();
        for i in 0..100 {
            let (checks, calls) = (checks.clone(), calls.clone());
            let bearer = if i % 2 == 0 { "a" } else { "b" };
            all.push(async move {
                checks
                    .verify(bearer, woken, || async {
                        calls.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .await
            });
        }
        for outcome in futures_util::future::join_all(all).await {
            assert_eq!(outcome, Ok(()));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2, "one call per distinct bearer");
        assert_eq!(checks.len(), 2);
    }

    #[tokio::test]
    async fn a_check_begun_before_a_wake_up_is_not_reused() {
        let checks = Checks::default();
        let bearer = "t";
        let before = Instant::now();
        assert_eq!(checks.verify(bearer, before, || async { Ok(()) }).await, Ok(()));
        // Revoked since: a waiter woken after that check began must not take its answer.
        let woken = Instant::now() + Duration::from_nanos(1);
        let revoked = WireError::new(ErrorCode::Unauthenticated, "revoked");
        let later = checks.verify(bearer, woken, || async { Err(revoked.clone()) }).await;
        assert_eq!(later, Err(revoked));
    }
}
