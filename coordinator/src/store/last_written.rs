//! The rows this process last wrote, by execution (Postgres). A settlement
//! decides its transition from the row as this replica last wrote it, with no
//! read: the write is guarded by the row's version, so a row another writer
//! moved since is left untouched and read again. What is kept is never an
//! answer on its own: a transition the state machine ignores on a kept row is
//! decided again on a fresh read.

use super::records::ExecutionRecord;
use crate::domain::ExecutionId;
use std::collections::HashMap;
use std::sync::Mutex;

/// Rows kept at most. Full, the memo starts over: rows written here and
/// settled elsewhere are never taken back out, and starting over costs a read
/// each to the executions in flight.
const CAP: usize = 4_096;

/// A row carrying more sealed payload than this is not kept (it is read
/// instead), so the memo stays within `CAP` × this, a few tens of MiB,
/// whatever inputs and results the limits allow.
const PAYLOAD_MAX: i64 = 8 * 1024;

#[derive(Debug, Default)]
pub(super) struct LastWritten {
    rows: Mutex<HashMap<ExecutionId, ExecutionRecord>>,
}

impl LastWritten {
    /// Keeps `record` as written; a terminal one is let go (no transition
    /// follows it), and so is one with a large payload.
    pub(super) fn keep(&self, record: &ExecutionRecord) {
        let Ok(mut rows) = self.rows.lock() else { return };
        if record.status().is_terminal() || record.payload_bytes > PAYLOAD_MAX {
            rows.remove(&record.id);
            return;
        }
        if rows.len() >= CAP && !rows.contains_key(&record.id) {
            rows.clear();
        }
        rows.insert(record.id.clone(), record.clone());
    }

    /// The row as this process last wrote it, if kept.
    pub(super) fn get(&self, id: &ExecutionId) -> Option<ExecutionRecord> {
        self.rows.lock().ok()?.get(id).cloned()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.rows.lock().map_or(0, |r| r.len())
    }
}
