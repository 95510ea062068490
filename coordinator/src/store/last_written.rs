//! The rows this process last wrote, by execution (Postgres). A settlement
//! decides its transition from the row as this replica last wrote it, with no
//! read: the write is guarded by the row's version, so a row another writer
//! moved since is left untouched and read again. What is kept is never an
//! answer on its own: a transition the state machine ignores on a kept row is
//! decided again on a fresh read.

use super::records::ExecutionRecord;
use crate::domain::{ExecutionId, Millis};
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

/// Retention ends kept at most (an id and a number each: a few MiB).
const DAYS_CAP: usize = 65_536;

#[derive(Debug, Default)]
pub(super) struct LastWritten {
    rows: Mutex<HashMap<ExecutionId, ExecutionRecord>>,
    /// Each written row's retention end, terminal rows included: it names the
    /// day partition that holds the row, so a read by id probes that one
    /// partition instead of every day's (store/access.rs). Only ever a hint:
    /// a row re-dated since is missed and read without it.
    days: Mutex<HashMap<ExecutionId, Millis>>,
}

impl LastWritten {
    /// Keeps `record` as written; a terminal one is let go (no transition
    /// follows it), and so is one with a large payload.
    pub(super) fn keep(&self, record: &ExecutionRecord) {
        if let Ok(mut days) = self.days.lock() {
            if days.len() >= DAYS_CAP && !days.contains_key(&record.id) {
                days.clear();
            }
            days.insert(record.id.clone(), record.retention_expires_at);
        }
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

    /// The retention end of the row as this process last wrote it, if known.
    pub(super) fn retention_of(&self, id: &ExecutionId) -> Option<Millis> {
        self.days.lock().ok()?.get(id).copied()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.rows.lock().map_or(0, |r| r.len())
    }
}
