//! Wake-ups. Two kinds: "execution X changed" (wakes long polls) and "work is
//! pending" (wakes the dispatcher). Local waiters are woken in-process; with
//! Redis the same signals cross replicas over pub/sub. Signals are hints: every
//! woken party re-reads the durable record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

#[derive(Default)]
struct Registry {
    waiters: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

/// Waiters for changes of individual executions on this replica.
#[derive(Clone, Default)]
pub struct Changes {
    registry: Arc<Registry>,
}

/// Held while waiting; unregisters on drop.
pub struct Watch {
    registry: Arc<Registry>,
    id: String,
    pub notify: Arc<Notify>,
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
    pub fn watch(&self, id: &str) -> Watch {
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

    /// Wakes this replica's waiters on `id`.
    pub fn changed_locally(&self, id: &str) {
        if let Ok(map) = self.registry.waiters.lock()
            && let Some((notify, _)) = map.get(id)
        {
            notify.notify_waiters();
        }
    }

    pub fn waiter_count(&self) -> usize {
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
}
