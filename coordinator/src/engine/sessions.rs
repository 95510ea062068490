//! Worker sessions held by this replica: who is connected, which tools they
//! serve, how many free slots they have, and the channel to reach them.

use baton_proto::worker::v1::{self as wpb, CoordinatorMessage, coordinator_message::Msg};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc;
use tonic::Status;

pub type Outbox = mpsc::Sender<Result<CoordinatorMessage, Status>>;

pub struct Session {
    /// Distinguishes this connection from an older one of the same worker.
    pub connection: u64,
    pub worker_id: String,
    pub project_id: String,
    pub tools: Vec<String>,
    pub outbox: Outbox,
    /// Capacity minus assignments not yet settled.
    pub free: AtomicI64,
}

impl Session {
    pub async fn send(&self, msg: Msg) -> bool {
        self.outbox.send(Ok(CoordinatorMessage { msg: Some(msg) })).await.is_ok()
    }

    pub async fn stop(&self, execution_id: &str, attempt: u32, reason: &str) -> bool {
        self.send(Msg::Stop(wpb::Stop { execution_id: execution_id.to_owned(), attempt, reason: reason.to_owned() }))
            .await
    }

    /// Takes up to `want` slots; returns how many were taken.
    pub fn take_slots(&self, want: i64) -> i64 {
        let mut current = self.free.load(Ordering::Acquire);
        loop {
            let take = current.min(want).max(0);
            if take == 0 {
                return 0;
            }
            match self.free.compare_exchange(current, current - take, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return take,
                Err(actual) => current = actual,
            }
        }
    }

    pub fn return_slots(&self, n: i64) {
        self.free.fetch_add(n, Ordering::AcqRel);
    }
}

#[derive(Clone, Default)]
pub struct Sessions {
    by_worker: Arc<RwLock<HashMap<String, Arc<Session>>>>,
}

impl Sessions {
    pub fn insert(&self, s: Arc<Session>) {
        if let Ok(mut map) = self.by_worker.write() {
            map.insert(s.worker_id.clone(), s);
        }
    }

    /// Removes the session only if it is still this connection's.
    pub fn remove(&self, worker_id: &str, connection: u64) {
        if let Ok(mut map) = self.by_worker.write()
            && map.get(worker_id).is_some_and(|s| s.connection == connection)
        {
            map.remove(worker_id);
        }
    }

    pub fn get(&self, worker_id: &str) -> Option<Arc<Session>> {
        self.by_worker.read().ok()?.get(worker_id).cloned()
    }

    pub fn snapshot(&self) -> Vec<Arc<Session>> {
        self.by_worker.read().map(|m| m.values().cloned().collect()).unwrap_or_default()
    }
}
