//! Worker sessions held by this replica: who is connected (and under which
//! credential), which tools they serve, how many free slots they have, and the
//! channel to reach them. Nothing here ever waits on a worker: a session whose
//! outbox is full is simply not sent to, so one stuck worker cannot hold up
//! dispatch, stops or the sweeper for anybody else.

use crate::domain::{ExecutionId, StopReason};
use crate::engine::messages::{AttemptRef, Command, MessageKind};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(in crate::engine) type Outbox = mpsc::Sender<Command>;

/// Messages beyond one per assignment slot that an outbox holds (stops, acks,
/// input relays), so a full outbox means the worker stopped reading.
const OUTBOX_SLACK: usize = 256;

/// An outbox sized for a session of `capacity` slots.
pub fn outbox(capacity: u32) -> (Outbox, mpsc::Receiver<Command>) {
    mpsc::channel(capacity as usize + OUTBOX_SLACK)
}

/// Why this replica ended a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The worker credential was revoked.
    Revoked = 1,
    /// The same worker registered again (a reconnect): the newer session wins.
    Replaced = 2,
    /// An administrator gave one of its tools to another worker identity.
    Disowned = 3,
}

/// Who a session is: fixed at registration.
pub(crate) struct SessionIdentity {
    /// Bound to `credential_id` for good (see `Store::bind_worker`).
    pub(crate) worker_id: String,
    pub(crate) credential_id: String,
    /// The worker identity the credential belongs to; the tools are its own.
    pub(crate) group: String,
    pub(crate) project_id: String,
    pub(crate) tools: Vec<String>,
    /// Declared capacity, clamped to the configured maximum.
    pub(crate) capacity: i64,
}

pub struct Session {
    /// Distinguishes this connection from an older one of the same worker.
    pub(crate) connection: u64,
    pub(crate) worker_id: String,
    pub(crate) credential_id: String,
    pub(crate) group: String,
    pub(crate) project_id: String,
    pub(crate) tools: Vec<String>,
    outbox: Outbox,
    pub(crate) capacity: i64,
    /// Capacity minus assignments not yet settled.
    free: AtomicI64,
    /// Cancelled when this replica ends the session; both directions stop.
    pub(crate) closed: CancellationToken,
    close_reason: AtomicU8,
}

impl Session {
    pub(crate) fn new(connection: u64, who: SessionIdentity, outbox: Outbox) -> Self {
        Session {
            connection,
            worker_id: who.worker_id,
            credential_id: who.credential_id,
            group: who.group,
            project_id: who.project_id,
            tools: who.tools,
            outbox,
            capacity: who.capacity,
            free: AtomicI64::new(who.capacity),
            closed: CancellationToken::new(),
            close_reason: AtomicU8::new(0),
        }
    }

    /// Queues a command without waiting: false when the worker is gone or its
    /// outbox is full (it stopped reading). A command that was not queued was
    /// provably not delivered.
    pub(crate) fn send(&self, command: Command) -> bool {
        !self.closed.is_cancelled() && self.outbox.try_send(command).is_ok()
    }

    pub fn stop(&self, execution_id: &ExecutionId, attempt: u32, reason: StopReason) -> bool {
        self.send(Command::Stop { attempt: AttemptRef::new(execution_id, attempt), reason })
    }

    /// Tells the worker a message it sent named an attempt it does not hold.
    pub(crate) fn refuse(&self, attempt: AttemptRef, kind: MessageKind) -> bool {
        tracing::warn!(worker_id = %self.worker_id, execution_id = %attempt.execution_id, attempt = attempt.attempt, ?kind, "worker message refused: not the lease holder");
        self.send(Command::Refused { attempt, kind })
    }

    /// Room left in the outbox: never claim more assignments than fit.
    pub(crate) fn room(&self) -> i64 {
        if self.closed.is_cancelled() || self.outbox.is_closed() {
            return 0;
        }
        self.outbox.capacity().saturating_sub(OUTBOX_SLACK / 2) as i64
    }

    /// Takes up to `want` slots; returns how many were taken.
    pub(crate) fn take_slots(&self, want: i64) -> i64 {
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

    /// Gives back slots, never beyond the session's capacity.
    pub(crate) fn return_slots(&self, n: i64) {
        let _ = self.free.fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| Some((f + n).min(self.capacity)));
    }

    /// Slots this coordinator believes free.
    pub(crate) fn free(&self) -> u64 {
        u64::try_from(self.free.load(Ordering::Acquire)).unwrap_or(0)
    }

    /// The worker's own count of free slots, believed only up to the capacity.
    pub(crate) fn set_free(&self, reported: u32) {
        self.free.store(i64::from(reported).min(self.capacity), Ordering::Release);
    }

    pub(crate) fn close(&self, reason: CloseReason) {
        let _ = self.close_reason.compare_exchange(0, reason as u8, Ordering::AcqRel, Ordering::Acquire);
        self.closed.cancel();
    }

    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        match self.close_reason.load(Ordering::Acquire) {
            1 => Some(CloseReason::Revoked),
            2 => Some(CloseReason::Replaced),
            3 => Some(CloseReason::Disowned),
            _ => None,
        }
    }
}

/// What [`Sessions::reserve`] found.
pub(crate) enum Reserved {
    Slot(Arc<Session>),
    /// Sessions here serve the tool, all busy.
    Full,
    /// No session here serves the tool (another replica's may).
    NotServed,
}

/// Ordered by worker id, so a dispatch round visits sessions in the same order
/// every time (the deterministic simulation replays a seed by it).
#[derive(Clone, Default)]
pub struct Sessions {
    by_worker: Arc<RwLock<BTreeMap<String, Arc<Session>>>>,
}

impl Sessions {
    /// Holds `s`; an older session of the same worker (a reconnect) ends.
    pub(crate) fn insert(&self, s: Arc<Session>) {
        let previous = self.by_worker.write().ok().and_then(|mut map| map.insert(s.worker_id.clone(), s));
        if let Some(old) = previous {
            old.close(CloseReason::Replaced);
        }
    }

    /// Removes the session only if it is still this connection's.
    pub(crate) fn remove(&self, worker_id: &str, connection: u64) {
        if let Ok(mut map) = self.by_worker.write()
            && map.get(worker_id).is_some_and(|s| s.connection == connection)
        {
            map.remove(worker_id);
        }
    }

    pub(crate) fn get(&self, worker_id: &str) -> Option<Arc<Session>> {
        self.by_worker.read().ok()?.get(worker_id).cloned()
    }

    /// One free slot of a session of project `project_id` that serves `tool`
    /// (the freest), taken.
    pub(crate) fn reserve(&self, project_id: &str, tool: &str) -> Reserved {
        let Ok(map) = self.by_worker.read() else { return Reserved::NotServed };
        let mut serving: Vec<&Arc<Session>> = map
            .values()
            .filter(|s| s.project_id == project_id && s.tools.iter().any(|t| t == tool) && !s.closed.is_cancelled())
            .collect();
        if serving.is_empty() {
            return Reserved::NotServed;
        }
        serving.sort_by_key(|s| std::cmp::Reverse(s.free()));
        match serving.into_iter().find(|s| s.room() > 0 && s.take_slots(1) == 1) {
            Some(s) => Reserved::Slot(s.clone()),
            None => Reserved::Full,
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<Arc<Session>> {
        self.by_worker.read().map(|m| m.values().cloned().collect()).unwrap_or_default()
    }
}
