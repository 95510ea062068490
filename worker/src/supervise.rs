//! Supervised tasks: the one way this process (worker, `baton` binary) starts a
//! background task. Every task has a name; a panic in it is logged with that
//! name (and still reaches whoever awaits its handle, as with a bare spawn); and
//! the process awaits its tasks at shutdown, for a bounded grace, instead of
//! dropping them unseen. The tidy test forbids bare `tokio::spawn` elsewhere.

use futures_util::FutureExt;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A set of named tasks that can be awaited together.
#[derive(Clone, Default)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    tracker: TaskTracker,
    stopping: CancellationToken,
    next_id: AtomicU64,
    /// The names of the tasks still running.
    live: Mutex<BTreeMap<u64, &'static str>>,
}

impl Inner {
    fn live(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, &'static str>> {
        // A poisoned lock means a panic elsewhere already; the map itself is intact.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes its task from the live set however the task ends: done, panicked or aborted.
struct Registration {
    inner: Arc<Inner>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.inner.live().remove(&self.id);
    }
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").field("running", &self.running()).finish()
    }
}

impl Supervisor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `future` as the task `name`. A panic is logged with the name and
    /// then resumed, so the handle reports it as a bare spawn's would.
    pub fn spawn<F>(&self, name: &'static str, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.inner.live().insert(id, name);
        let registration = Registration { inner: self.inner.clone(), id };
        self.inner.tracker.spawn(async move {
            let _registration = registration;
            match AssertUnwindSafe(future).catch_unwind().await {
                Ok(output) => output,
                Err(panic) => {
                    tracing::error!(task = name, panic = panic_message(panic.as_ref()), "a supervised task panicked");
                    std::panic::resume_unwind(panic)
                }
            }
        })
    }

    /// Cancelled when `shutdown` begins: tasks that run until the process stops
    /// end on it.
    pub fn stopping(&self) -> CancellationToken {
        self.inner.stopping.clone()
    }

    /// The names of the tasks still running, oldest first.
    pub fn running(&self) -> Vec<&'static str> {
        self.inner.live().values().copied().collect()
    }

    /// Signals `stopping` and waits up to `grace` for every task to end;
    /// returns the names of those still running then (left to the runtime).
    pub async fn shutdown(&self, grace: Duration) -> Vec<&'static str> {
        self.inner.stopping.cancel();
        self.inner.tracker.close();
        let _ = tokio::time::timeout(grace, self.inner.tracker.wait()).await;
        self.running()
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

static PROCESS: LazyLock<Supervisor> = LazyLock::new(Supervisor::new);

/// The process's supervisor: `baton` shuts it down when its command ends.
pub fn supervisor() -> &'static Supervisor {
    &PROCESS
}

/// Starts `future` as the task `name` under the process's supervisor.
pub fn spawn_supervised<F>(name: &'static str, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    PROCESS.spawn(name, future)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_reports_its_output_and_leaves_the_live_set() {
        let s = Supervisor::new();
        let h = s.spawn("answer", async { 42 });
        assert_eq!(h.await.ok(), Some(42));
        assert!(s.running().is_empty());
    }

    #[tokio::test]
    async fn a_panic_still_reaches_the_handle() {
        let s = Supervisor::new();
        let h = s.spawn("boom", async { panic!("boom") });
        let err = h.await.err().map(|e| e.is_panic());
        assert_eq!(err, Some(true));
        assert!(s.running().is_empty());
    }

    #[tokio::test]
    async fn shutdown_waits_for_tasks_that_end_on_stopping_and_names_the_rest() {
        let s = Supervisor::new();
        let stopping = s.stopping();
        let polite = s.spawn("polite", async move { stopping.cancelled().await });
        let stubborn = s.spawn("stubborn", std::future::pending::<()>());
        assert_eq!(s.running(), vec!["polite", "stubborn"]);
        let late = s.shutdown(Duration::from_millis(50)).await;
        assert_eq!(late, vec!["stubborn"]);
        assert!(polite.await.is_ok());
        stubborn.abort();
        assert_eq!(stubborn.await.err().map(|e| e.is_cancelled()), Some(true));
        assert!(s.running().is_empty(), "an aborted task leaves the live set");
    }
}
