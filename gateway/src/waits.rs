//! Bounds on parked waits: how many coordinator long polls (REST `wait_ms`,
//! `_GetToolExecution`, `tasks/result` streams, the foreground wait of a
//! `tools/call`) one credential, and this whole process, may hold at once.
//! A waiter over a bound is refused before anything is started or parked, so
//! the refusal changes nothing. Counts are keyed by a salted hash of the
//! bearer; the token itself is never kept. Watch sockets (`crate::watch`) hold
//! the same places as long polls. Also the configured lengths of waits
//! ([`Limits`]): a request over one is refused naming it, never clamped.

use crate::coordinator::Bearer;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// How long a refused waiter is asked to stay away: some wait of the same
/// caller ends within it far more often than not.
pub(crate) const RETRY_AFTER_MS: u64 = 1_000;

/// How long waits may be, from configuration (`gateway.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest long poll (`wait_ms`) for any change, REST and
    /// `_GetToolExecution` alike.
    pub max_wait_ms: u64,
    /// The longest long poll for a state (`wait_ms` with `until`).
    pub max_predicate_wait_ms: u64,
    /// The longest websocket watch (`timeout_seconds`).
    pub max_watch_seconds: u64,
    /// How long a watch's `websocket_url` may be opened after it was issued.
    pub watch_connect_ttl_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_wait_ms: 45_000,
            max_predicate_wait_ms: 45_000,
            max_watch_seconds: 14_400,
            watch_connect_ttl_ms: 30_000,
        }
    }
}

/// The watch length when the caller names none (bounded by the limit).
pub(crate) const DEFAULT_WATCH_SECONDS: u64 = 300;

/// A requested wait longer than its configured limit; the message names both.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` must be at most {max} (the configured limit `{setting}`); longer waits are refused, not shortened")]
pub(crate) struct OverLimit {
    pub(crate) field: &'static str,
    pub(crate) setting: &'static str,
    pub(crate) max: u64,
}

impl Limits {
    /// `wait_ms` as asked, unless it passes `gateway.max_wait_ms` (a wait
    /// for any change) or `gateway.max_predicate_wait_ms` (a wait for a state).
    pub(crate) fn wait_ms(&self, asked: u64, predicate: bool) -> Result<u64, OverLimit> {
        let (setting, max) = if predicate {
            ("gateway.max_predicate_wait_ms", self.max_predicate_wait_ms)
        } else {
            ("gateway.max_wait_ms", self.max_wait_ms)
        };
        if asked > max {
            return Err(OverLimit { field: "wait_ms", setting, max });
        }
        Ok(asked)
    }

    /// `timeout_seconds` of a watch (the default when absent), unless it passes
    /// `gateway.max_watch_seconds`.
    pub(crate) fn watch_seconds(&self, asked: Option<u64>) -> Result<u64, OverLimit> {
        match asked {
            None => Ok(DEFAULT_WATCH_SECONDS.min(self.max_watch_seconds)),
            Some(s) if s > self.max_watch_seconds => Err(OverLimit {
                field: "timeout_seconds",
                setting: "gateway.max_watch_seconds",
                max: self.max_watch_seconds,
            }),
            Some(s) => Ok(s),
        }
    }
}

/// A wait refused because a bound is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TooManyWaits {
    #[error("too many concurrent waits for this credential on this gateway")]
    Principal,
    #[error("too many concurrent waits on this gateway")]
    Gateway,
}

impl TooManyWaits {
    /// The stable error code of both surfaces.
    pub(crate) const CODE: &'static str = "too_many_waits";

    /// Which bound was reached.
    pub(crate) fn scope(self) -> &'static str {
        match self {
            TooManyWaits::Principal => "principal",
            TooManyWaits::Gateway => "gateway",
        }
    }
}

type Key = [u8; 32];

#[derive(Default)]
struct Counts {
    total: usize,
    by_principal: HashMap<Key, usize>,
}

/// The counters of one gateway process.
pub(crate) struct Waits {
    per_principal: usize,
    total: usize,
    /// Known to this process only, so a key means nothing outside it.
    salt: [u8; 32],
    counts: Mutex<Counts>,
}

impl std::fmt::Debug for Waits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waits").field("per_principal", &self.per_principal).field("total", &self.total).finish()
    }
}

/// One admitted wait; dropping it gives the place back.
pub(crate) struct WaitPermit {
    waits: Arc<Waits>,
    key: Key,
}

impl Waits {
    pub(crate) fn new(per_principal: usize, total: usize) -> Waits {
        let mut salt = [0u8; 32];
        if getrandom::fill(&mut salt).is_err() {
            // Still a hash, never the token: only the salt is missing.
            tracing::warn!("no randomness for the wait counters' salt");
        }
        Waits { per_principal, total, salt, counts: Mutex::new(Counts::default()) }
    }

    fn key(&self, bearer: &Bearer) -> Key {
        let mut hash = Sha256::new();
        hash.update(self.salt);
        hash.update(bearer.0.as_bytes());
        hash.finalize().into()
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a place for one wait of `bearer`, or says which bound is reached.
    pub(crate) fn acquire(self: &Arc<Self>, bearer: &Bearer) -> Result<WaitPermit, TooManyWaits> {
        let key = self.key(bearer);
        let mut counts = self.counts();
        let mine = counts.by_principal.get(&key).copied().unwrap_or(0);
        if mine >= self.per_principal {
            return Err(TooManyWaits::Principal);
        }
        if counts.total >= self.total {
            return Err(TooManyWaits::Gateway);
        }
        counts.total += 1;
        counts.by_principal.insert(key, mine + 1);
        Ok(WaitPermit { waits: Arc::clone(self), key })
    }

    /// Waits held now: in total, and by `bearer`.
    #[cfg(test)]
    pub(crate) fn held(&self, bearer: &Bearer) -> (usize, usize) {
        let key = self.key(bearer);
        let counts = self.counts();
        (counts.total, counts.by_principal.get(&key).copied().unwrap_or(0))
    }
}

impl Drop for WaitPermit {
    fn drop(&mut self) {
        let mut counts = self.waits.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_principal.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_principal.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(token: &str) -> Bearer {
        Bearer(token.to_owned())
    }

    #[test]
    fn a_principal_is_bounded_and_others_are_not() {
        let waits = Arc::new(Waits::new(2, 10));
        let a1 = waits.acquire(&bearer("a")).expect("first");
        let _a2 = waits.acquire(&bearer("a")).expect("second");
        assert_eq!(waits.acquire(&bearer("a")).err(), Some(TooManyWaits::Principal));
        let _b = waits.acquire(&bearer("b")).expect("another principal");
        drop(a1);
        let _a3 = waits.acquire(&bearer("a")).expect("a place came back");
        assert_eq!(waits.held(&bearer("a")), (3, 2));
    }

    #[test]
    fn the_process_is_bounded() {
        let waits = Arc::new(Waits::new(5, 2));
        let _a = waits.acquire(&bearer("a")).expect("a");
        let b = waits.acquire(&bearer("b")).expect("b");
        assert_eq!(waits.acquire(&bearer("c")).err(), Some(TooManyWaits::Gateway));
        drop(b);
        assert!(waits.acquire(&bearer("c")).is_ok());
    }

    #[test]
    fn released_principals_leave_no_entry() {
        let waits = Arc::new(Waits::new(5, 5));
        drop(waits.acquire(&bearer("a")).expect("a"));
        assert!(waits.counts().by_principal.is_empty());
        assert_eq!(waits.held(&bearer("a")), (0, 0));
    }

    #[test]
    fn limits_refuse_rather_than_clamp_and_name_the_setting() {
        let limits = Limits {
            max_wait_ms: 1_000,
            max_predicate_wait_ms: 9_000,
            max_watch_seconds: 60,
            watch_connect_ttl_ms: 5_000,
        };
        assert_eq!(limits.wait_ms(1_000, false), Ok(1_000));
        let over = limits.wait_ms(1_001, false).expect_err("over the limit");
        assert!(over.to_string().contains("gateway.max_wait_ms") && over.to_string().contains("1000"), "{over}");
        assert_eq!(limits.wait_ms(9_000, true), Ok(9_000), "a wait for a state has its own ceiling");
        let over = limits.wait_ms(9_001, true).expect_err("over the predicate limit");
        assert!(over.to_string().contains("gateway.max_predicate_wait_ms"), "{over}");
        assert_eq!(limits.watch_seconds(None), Ok(60), "the default never passes the limit");
        assert_eq!(limits.watch_seconds(Some(61)).err().map(|e| e.setting), Some("gateway.max_watch_seconds"));
    }

    #[test]
    fn keys_are_not_the_token() {
        let waits = Waits::new(1, 1);
        let key = waits.key(&bearer("secret-token"));
        assert!(!key.windows(12).any(|w| w == b"secret-token"));
        assert_ne!(key, Waits::new(1, 1).key(&bearer("secret-token")), "salted per process");
    }
}
