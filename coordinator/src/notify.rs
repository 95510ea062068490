//! Wake-ups. Two kinds: "execution X changed" (wakes long polls) and "work is
//! pending" (wakes the dispatcher). Local waiters are woken in-process; with
//! Redis the same signals cross replicas over pub/sub. Signals are hints: every
//! woken party re-reads the durable record.
//!
//! A change reaches two kinds of party: a unary long poll holds a [`Watch`]
//! (one per waiter), and a gateway's watch stream holds one [`Listener`] for
//! all the executions it follows (one registration per execution and stream,
//! however many of the gateway's callers wait on it).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

#[derive(Default)]
struct Registry {
    waiters: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
    listeners: Mutex<HashMap<String, Vec<Arc<Listener>>>>,
}

/// One watch stream's interest in many executions: a change marks the
/// execution and wakes the stream's task, which takes every marked id at once.
/// Marks collapse, so a burst of changes to one execution costs one re-read.
#[derive(Default)]
pub(crate) struct Listener {
    changed: Mutex<HashSet<String>>,
    wake: Notify,
}

impl Listener {
    fn mark(&self, id: &str) {
        self.changed.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_owned());
        // A stored permit: a mark made before the task waits is not lost.
        self.wake.notify_one();
    }

    /// Resolves once something was marked since the last [`Listener::take`].
    pub(crate) async fn marked(&self) {
        self.wake.notified().await;
    }

    /// The executions marked since the last call.
    pub(crate) fn take(&self) -> Vec<String> {
        self.changed.lock().unwrap_or_else(PoisonError::into_inner).drain().collect()
    }
}

/// Waiters for changes of individual executions on this replica.
#[derive(Clone, Default)]
pub(crate) struct Changes {
    registry: Arc<Registry>,
}

/// Held while waiting; unregisters on drop.
pub(crate) struct Watch {
    registry: Arc<Registry>,
    id: String,
    pub(crate) notify: Arc<Notify>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Ok(mut map) = self.registry.waiters.lock()
            && let Some((_, count)) = map.get_mut(&self.id)
        {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.id);
            }
        }
    }
}

impl Changes {
    pub(crate) fn watch(&self, id: &str) -> Watch {
        let notify = match self.registry.waiters.lock() {
            Ok(mut map) => {
                let entry = map.entry(id.to_owned()).or_insert_with(|| (Arc::new(Notify::new()), 0));
                entry.1 += 1;
                entry.0.clone()
            }
            // A poisoned lock only loses the wake-up; the waiter still times out.
            Err(_) => Arc::new(Notify::new()),
        };
        Watch { registry: self.registry.clone(), id: id.to_owned(), notify }
    }

    /// Wakes this replica's waiters and listeners on `id`.
    pub(crate) fn changed_locally(&self, id: &str) {
        if let Ok(map) = self.registry.waiters.lock()
            && let Some((notify, _)) = map.get(id)
        {
            notify.notify_waiters();
        }
        let listeners = self.registry.listeners.lock().unwrap_or_else(PoisonError::into_inner);
        for listener in listeners.get(id).into_iter().flatten() {
            listener.mark(id);
        }
    }

    /// Marks `listener` whenever `id` changes, until [`Changes::unlisten`].
    pub(crate) fn listen(&self, id: &str, listener: &Arc<Listener>) {
        let mut map = self.registry.listeners.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(id.to_owned()).or_default().push(Arc::clone(listener));
    }

    pub(crate) fn unlisten(&self, id: &str, listener: &Arc<Listener>) {
        let mut map = self.registry.listeners.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(all) = map.get_mut(id) {
            all.retain(|l| !Arc::ptr_eq(l, listener));
            if all.is_empty() {
                map.remove(id);
            }
        }
    }

    /// Stream registrations held now (one per execution and stream).
    #[cfg(test)]
    pub(crate) fn listener_count(&self) -> usize {
        self.registry.listeners.lock().unwrap_or_else(PoisonError::into_inner).values().map(Vec::len).sum()
    }

    #[cfg(test)]
    pub(crate) fn waiter_count(&self) -> usize {
        self.registry.waiters.lock().map(|m| m.values().map(|(_, c)| c).sum()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_wakes_its_watchers_only() {
        let changes = Changes::default();
        let a = changes.watch("a");
        let b = changes.watch("b");
        let wa = a.notify.notified();
        let wb = b.notify.notified();
        tokio::pin!(wa, wb);
        wa.as_mut().enable();
        wb.as_mut().enable();
        changes.changed_locally("a");
        tokio::time::timeout(std::time::Duration::from_secs(1), wa).await.expect("a woken");
        assert!(futures_util::poll!(wb).is_pending());
        let extra = changes.watch("a");
        assert_eq!(changes.waiter_count(), 3);
        drop(extra);
        assert_eq!(changes.waiter_count(), 2, "a dropped watch unregisters");
    }

    #[tokio::test]
    async fn a_listener_collects_its_executions_changes_once_each() {
        let changes = Changes::default();
        let (one, other) = (Arc::new(Listener::default()), Arc::new(Listener::default()));
        changes.listen("a", &one);
        changes.listen("b", &one);
        changes.listen("a", &other);
        for id in ["a", "a", "b", "c"] {
            changes.changed_locally(id);
        }
        one.marked().await;
        let mut taken = one.take();
        taken.sort();
        assert_eq!(taken, ["a", "b"], "marks collapse; unfollowed ids are not marked");
        other.marked().await;
        assert_eq!(other.take(), ["a"]);
        assert_eq!(changes.listener_count(), 3);
        changes.unlisten("a", &one);
        changes.changed_locally("a");
        assert!(one.take().is_empty(), "an unlistened id marks nothing");
        assert_eq!(changes.listener_count(), 2);
    }
}
