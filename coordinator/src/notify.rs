//! Wake-ups. Two kinds: "execution X changed" (wakes long polls) and "work is
//! pending" (wakes the dispatcher). Local waiters are woken in-process; with
//! Redis the same signals cross replicas over pub/sub. Signals are hints: a
//! woken party re-reads the durable record, unless every change since it last
//! read was committed on this replica and described as one that cannot end its
//! wait (a claim, while it waits for the result); see
//! [`Watch::described_since`].
//!
//! A change reaches two kinds of party: a unary long poll holds a [`Watch`]
//! (one per waiter), and a gateway's watch stream holds one [`Listener`] for
//! all the executions it follows (one registration per execution and stream,
//! however many of the gateway's callers wait on it).

use crate::domain::Status;
use crate::store::ExecutionRecord;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

/// What a change committed on this replica left: the execution's version a
/// caller can see (`changed_version`) and its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) version: i64,
    pub(crate) status: Status,
}

/// The changes signalled to one execution's waiters.
#[derive(Debug, Default)]
struct Signalled {
    /// How many so far.
    count: u64,
    /// The count at the last change that came undescribed (another replica's).
    opaque_at: u64,
    /// The newest described change.
    newest: Option<Change>,
    /// The execution as the change that settled it here left it: final, so
    /// a wait this replica may answer without reading takes it (`call.rs`).
    settled: Option<Arc<ExecutionRecord>>,
}

type Waiters = (Arc<Notify>, Arc<Mutex<Signalled>>, usize);

#[derive(Default)]
struct Registry {
    waiters: Mutex<HashMap<String, Waiters>>,
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
    signalled: Arc<Mutex<Signalled>>,
}

impl Watch {
    /// A mark to take just before reading the execution: changes signalled
    /// after it are the ones that read may not have seen.
    pub(crate) fn mark(&self) -> u64 {
        self.signalled.lock().unwrap_or_else(PoisonError::into_inner).count
    }

    /// The newest of the changes signalled since `mark`, when every one of
    /// them was committed on this replica; None when any came from elsewhere
    /// (or none came), and the execution must be read.
    pub(crate) fn described_since(&self, mark: u64) -> Option<Change> {
        let s = self.signalled.lock().unwrap_or_else(PoisonError::into_inner);
        if s.count == mark || s.opaque_at > mark {
            return None;
        }
        s.newest
    }

    /// The settled execution, when a change committed here since `mark`
    /// settled it and every change since `mark` was committed here.
    pub(crate) fn settled_since(&self, mark: u64) -> Option<Arc<ExecutionRecord>> {
        let s = self.signalled.lock().unwrap_or_else(PoisonError::into_inner);
        if s.count == mark || s.opaque_at > mark {
            return None;
        }
        s.settled.clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Ok(mut map) = self.registry.waiters.lock()
            && let Some((_, _, count)) = map.get_mut(&self.id)
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
        let (notify, signalled) = match self.registry.waiters.lock() {
            Ok(mut map) => {
                let entry = map.entry(id.to_owned()).or_insert_with(Default::default);
                entry.2 += 1;
                (entry.0.clone(), entry.1.clone())
            }
            // A poisoned lock only loses the wake-up; the waiter still times out.
            Err(_) => Default::default(),
        };
        Watch { registry: self.registry.clone(), id: id.to_owned(), notify, signalled }
    }

    /// Wakes this replica's waiters and listeners on `id`. `change` describes
    /// a change committed here; one from elsewhere comes undescribed.
    pub(crate) fn changed_locally(&self, id: &str, change: Option<Change>) {
        self.signal(id, change, || None);
    }

    /// As [`Changes::changed_locally`] for a change committed here that left
    /// `record`; a waiter may take it once it is terminal.
    pub(crate) fn changed_here(&self, record: &ExecutionRecord) {
        let change = Change { version: record.changed_version, status: record.status() };
        let settled = || change.status.is_terminal().then(|| Arc::new(record.clone()));
        self.signal(record.id.as_str(), Some(change), settled);
    }

    fn signal(&self, id: &str, change: Option<Change>, settled: impl FnOnce() -> Option<Arc<ExecutionRecord>>) {
        if let Ok(map) = self.registry.waiters.lock()
            && let Some((notify, signalled, _)) = map.get(id)
        {
            {
                let mut s = signalled.lock().unwrap_or_else(PoisonError::into_inner);
                s.count += 1;
                if s.settled.is_none() {
                    s.settled = settled();
                }
                match change {
                    // After-commit work of two transitions may run out of order.
                    Some(c) if s.newest.is_none_or(|n| n.version <= c.version) => s.newest = Some(c),
                    Some(_) => {}
                    None => s.opaque_at = s.count,
                }
            }
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
        self.registry.waiters.lock().map(|m| m.values().map(|(_, _, c)| c).sum()).unwrap_or(0)
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
        changes.changed_locally("a", None);
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
            changes.changed_locally(id, None);
        }
        one.marked().await;
        let mut taken = one.take();
        taken.sort();
        assert_eq!(taken, ["a", "b"], "marks collapse; unfollowed ids are not marked");
        other.marked().await;
        assert_eq!(other.take(), ["a"]);
        assert_eq!(changes.listener_count(), 3);
        changes.unlisten("a", &one);
        changes.changed_locally("a", None);
        assert!(one.take().is_empty(), "an unlistened id marks nothing");
        assert_eq!(changes.listener_count(), 2);
    }

    #[test]
    fn a_wait_may_skip_a_read_only_when_every_change_since_its_mark_was_described_here() {
        let changes = Changes::default();
        let w = changes.watch("a");
        let working = |version| Some(Change { version, status: Status::Working });
        let mark = w.mark();
        assert_eq!(w.described_since(mark), None, "nothing changed: read");
        changes.changed_locally("a", working(2));
        assert_eq!(w.described_since(mark), working(2));
        // After-commit work running late does not hide the newer change.
        changes.changed_locally("a", working(1));
        assert_eq!(w.described_since(mark), working(2));
        // Another replica's change, even followed by one of ours (committed
        // before it, signalled after it), means a read.
        changes.changed_locally("a", None);
        changes.changed_locally("a", working(3));
        assert_eq!(w.described_since(mark), None);
        let later = w.mark();
        changes.changed_locally("a", Some(Change { version: 4, status: Status::Completed }));
        assert_eq!(w.described_since(later), Some(Change { version: 4, status: Status::Completed }));
        let other = changes.watch("b");
        changes.changed_locally("b", working(9));
        assert_eq!(w.described_since(later).map(|c| c.version), Some(4), "each execution apart");
        assert_eq!(other.described_since(0), working(9));
    }
}
