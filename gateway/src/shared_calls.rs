//! Identical coordinator calls shared by the requests that arrive while one
//! is in flight, as a group commit shares a flush.
//!
//! Every MCP request resolves its caller with `WhoAmI`. An agent fleet on one
//! token opening 10,000 `tasks/result` streams at once made 10,000 of those
//! calls, each an HTTP/2 stream and a coordinator task. Here requests with the
//! same key (bearer and session) that arrive while a call is in flight wait
//! and share the *next* call, which begins once the one in flight has ended:
//! one call per round trip, however many requests. No request takes an answer
//! from a call that began before it arrived, so each sees every revocation
//! made before it arrived, as with a call of its own. Nothing is kept after a
//! call ends.

use baton_proto::error::WireError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::OnceCell;

type Outcome<V> = Result<V, WireError>;

/// One call, and the one before it that it waits for.
struct Batch<V> {
    outcome: OnceCell<Outcome<V>>,
    before: Mutex<Option<Arc<Batch<V>>>>,
}

/// The calls of one key: the one in flight, and the one requests join.
struct Key<V> {
    in_flight: Option<Arc<Batch<V>>>,
    joinable: Option<Arc<Batch<V>>>,
}

pub(crate) struct SharedCalls<V> {
    /// Keyed by a hash of the parts, so no token outlives its requests here.
    keys: Mutex<HashMap<[u8; 32], Key<V>>>,
}

impl<V> Default for SharedCalls<V> {
    fn default() -> Self {
        SharedCalls { keys: Mutex::default() }
    }
}

impl<V> std::fmt::Debug for SharedCalls<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedCalls")
    }
}

impl<V: Clone> SharedCalls<V> {
    /// The answer of a call `ask` makes for `parts` (the bearer token first,
    /// then whatever else the answer depends on), begun after this request
    /// arrived and shared with the requests that joined it. `ask` may run more
    /// than once: whoever polls first drives a call, and if that request
    /// leaves, the next one drives it.
    pub(crate) async fn call<F, Fut>(&self, parts: &[&str], ask: F) -> Outcome<V>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Outcome<V>>,
    {
        let mut hash = Sha256::new();
        for part in parts {
            hash.update(part.as_bytes());
            hash.update([0u8]);
        }
        let key: [u8; 32] = hash.finalize().into();
        let batch = {
            let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
            let state = keys.entry(key).or_insert_with(|| Key { in_flight: None, joinable: None });
            match &state.joinable {
                Some(b) => Arc::clone(b),
                None => {
                    let b = Arc::new(Batch { outcome: OnceCell::new(), before: Mutex::new(state.in_flight.clone()) });
                    state.joinable = Some(Arc::clone(&b));
                    b
                }
            }
        };
        let run = async {
            let before = batch.before.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(before) = before {
                // Wait for the call in flight (driving it if its requests left).
                let _ = before.outcome.get_or_init(&ask).await;
            }
            self.begin(&key, &batch);
            let outcome = ask().await;
            self.end(&key, &batch);
            outcome
        };
        batch.outcome.get_or_init(|| run).await.clone()
    }

    /// `batch` begins: later requests join a new one.
    fn begin(&self, key: &[u8; 32], batch: &Arc<Batch<V>>) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = keys.get_mut(key)
            && state.joinable.as_ref().is_some_and(|b| Arc::ptr_eq(b, batch))
        {
            state.joinable = None;
            state.in_flight = Some(Arc::clone(batch));
        }
    }

    /// `batch` ended: the key is forgotten unless requests wait on another.
    fn end(&self, key: &[u8; 32], batch: &Arc<Batch<V>>) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = keys.get_mut(key)
            && state.in_flight.as_ref().is_some_and(|b| Arc::ptr_eq(b, batch))
        {
            state.in_flight = None;
            if state.joinable.is_none() {
                keys.remove(key);
            }
        }
    }

    /// Keys with a call in flight or requests waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_proto::error::ErrorCode;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::Semaphore;

    #[tokio::test]
    async fn requests_arriving_while_a_call_is_in_flight_share_the_next_one() {
        let calls = Arc::new(SharedCalls::<usize>::default());
        let made = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Semaphore::new(0));
        let ask = {
            let (made, gate) = (made.clone(), gate.clone());
            move || {
                let (made, gate) = (made.clone(), gate.clone());
                async move {
                    let n = made.fetch_add(1, Ordering::SeqCst) + 1;
                    gate.acquire().await.map_err(|_| WireError::new(ErrorCode::Internal, "closed"))?.forget();
                    Ok(n)
                }
            }
        };
        // The first request's call is in flight (held at the gate) ...
        let first = tokio::spawn({
            let (calls, ask) = (calls.clone(), ask.clone());
            async move { calls.call(&["t", "s"], ask).await }
        });
        while made.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // ... when 100 more arrive: they wait for it and share one more.
        let later: Vec<_> = (0..100)
            .map(|_| {
                let (calls, ask) = (calls.clone(), ask.clone());
                tokio::spawn(async move { calls.call(&["t", "s"], ask).await })
            })
            .collect();
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(2);
        assert_eq!(first.await.expect("joined"), Ok(1));
        for request in later {
            assert_eq!(request.await.expect("joined"), Ok(2), "a call begun after they arrived");
        }
        assert_eq!(made.load(Ordering::SeqCst), 2, "two calls for 101 requests");
        assert_eq!(calls.len(), 0, "nothing kept after the calls ended");
    }

    #[tokio::test]
    async fn a_request_never_takes_the_answer_of_a_call_begun_before_it_arrived() {
        let calls = SharedCalls::<&'static str>::default();
        assert_eq!(calls.call(&["t", "s"], || async { Ok("good") }).await, Ok("good"));
        // Revoked since: the next request makes a call of its own.
        let revoked = WireError::new(ErrorCode::Unauthenticated, "revoked");
        let answer = calls.call(&["t", "s"], || async { Err(revoked.clone()) }).await;
        assert_eq!(answer, Err(revoked));
        // Another session of the same token is another key.
        assert_eq!(calls.call(&["t", "other"], || async { Ok("other") }).await, Ok("other"));
    }
}
