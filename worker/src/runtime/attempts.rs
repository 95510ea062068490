//! Every attempt the worker started and the coordinator has not yet
//! acknowledged as settled: one entry per attempt, in exactly one state, so
//! "running", "relayed to" and "waiting for an acknowledgement" cannot disagree.

use crate::remote::link::Relay;
use baton_proto::worker::v1 as wpb;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// An attempt: execution id and attempt number.
pub(super) type Key = (String, u32);

pub(super) enum Attempt {
    /// The tool runs.
    Running {
        cancel: CancellationToken,
        /// The driver of a remote-tool attempt: acks, answers and stops go there.
        relay: Option<mpsc::UnboundedSender<Relay>>,
    },
    /// Settled and sent, not yet acknowledged; resent after every reconnect.
    Settling {
        settlement: wpb::Settlement,
        /// When it was last sent: one still unanswered after a heartbeat
        /// interval is sent again (the coordinator may have failed to store
        /// it; duplicates are harmless).
        sent_at: Instant,
    },
}

/// What became of an assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    Started,
    /// Already running or settling here: a redelivery, ignored.
    Known,
    /// `capacity` attempts already run: declined, never started.
    Full,
}

#[derive(Default)]
/// Ordered, so lists sent to the coordinator come in the same order each time
/// (the deterministic simulation replays a seed by it).
pub(super) struct Attempts(BTreeMap<Key, Attempt>);

impl Attempts {
    /// Records `key` as running, unless the attempt is already known (a
    /// redelivered assignment, running or settled) or `capacity` attempts run.
    pub(super) fn start(
        &mut self,
        key: Key,
        cancel: CancellationToken,
        relay: Option<mpsc::UnboundedSender<Relay>>,
        capacity: usize,
    ) -> Start {
        if self.0.contains_key(&key) {
            return Start::Known;
        }
        if self.running().count() >= capacity {
            return Start::Full;
        }
        if let Entry::Vacant(v) = self.0.entry(key) {
            v.insert(Attempt::Running { cancel, relay });
        }
        Start::Started
    }

    /// The tool finished and `settlement` was (about to be) sent at `now`.
    pub(super) fn settled(&mut self, key: Key, settlement: wpb::Settlement, now: Instant) {
        self.0.insert(key, Attempt::Settling { settlement, sent_at: now });
    }

    /// A running attempt ended without a settlement (abandoned to its next owner).
    pub(super) fn abandoned(&mut self, key: &Key) {
        if matches!(self.0.get(key), Some(Attempt::Running { .. })) {
            self.0.remove(key);
        }
    }

    /// The coordinator acknowledged (or refused for good) the settlement of `key`.
    pub(super) fn acknowledged(&mut self, key: &Key) {
        if matches!(self.0.get(key), Some(Attempt::Settling { .. })) {
            self.0.remove(key);
        }
    }

    pub(super) fn running(&self) -> impl Iterator<Item = &Key> {
        self.0.iter().filter(|(_, a)| matches!(a, Attempt::Running { .. })).map(|(k, _)| k)
    }

    pub(super) fn settling(&self) -> impl Iterator<Item = &Key> {
        self.0.iter().filter(|(_, a)| matches!(a, Attempt::Settling { .. })).map(|(k, _)| k)
    }

    /// Every settlement not yet acknowledged.
    pub(super) fn unacknowledged(&self) -> Vec<wpb::Settlement> {
        self.0
            .values()
            .filter_map(|a| match a {
                Attempt::Settling { settlement, .. } => Some(settlement.clone()),
                Attempt::Running { .. } => None,
            })
            .collect()
    }

    /// Unacknowledged settlements last sent more than `after` before `now`,
    /// marked as sent at `now`.
    pub(super) fn overdue(&mut self, after: Duration, now: Instant) -> Vec<wpb::Settlement> {
        self.0
            .values_mut()
            .filter_map(|a| match a {
                Attempt::Settling { settlement, sent_at } if now.duration_since(*sent_at) >= after => {
                    *sent_at = now;
                    Some(settlement.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// The coordinator's stop: a remote driver decides what it means for its
    /// remote task; a hosted tool is cancelled. Nothing for a settled attempt.
    pub(super) fn stop(&self, key: &Key, reason: wpb::StopReason) {
        match self.0.get(key) {
            Some(Attempt::Running { relay: Some(relay), .. }) => {
                let _ = relay.send(Relay::Stop(reason));
            }
            Some(Attempt::Running { relay: None, cancel }) => cancel.cancel(),
            Some(Attempt::Settling { .. }) | None => {}
        }
    }

    /// Routes an acknowledgement or an answer to the driver of `key`, if it runs here.
    pub(super) fn relay(&self, key: &Key, r: Relay) {
        if let Some(Attempt::Running { relay: Some(relay), .. }) = self.0.get(key) {
            let _ = relay.send(r);
        }
    }

    /// Cancels every running tool (the drain period is over).
    pub(super) fn cancel_all(&self) {
        for a in self.0.values() {
            if let Attempt::Running { cancel, .. } = a {
                cancel.cancel();
            }
        }
    }

    /// Running or settling.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> Key {
        ("te_x".to_owned(), n)
    }

    fn settlement(n: u32) -> wpb::Settlement {
        wpb::Settlement { execution_id: "te_x".into(), attempt: n, outcome: None }
    }

    #[test]
    fn an_attempt_is_started_once_whether_running_or_settling() {
        let mut a = Attempts::default();
        assert_eq!(a.start(key(1), CancellationToken::new(), None, 8), Start::Started);
        assert_eq!(a.start(key(1), CancellationToken::new(), None, 8), Start::Known, "already running");
        a.settled(key(1), settlement(1), Instant::now());
        assert_eq!(a.start(key(1), CancellationToken::new(), None, 8), Start::Known, "already settled");
        assert_eq!(a.running().count(), 0);
        assert_eq!(a.settling().cloned().collect::<Vec<_>>(), vec![key(1)]);
    }

    #[test]
    fn no_more_than_capacity_attempts_run_at_once() {
        let mut a = Attempts::default();
        assert_eq!(a.start(key(1), CancellationToken::new(), None, 2), Start::Started);
        assert_eq!(a.start(key(2), CancellationToken::new(), None, 2), Start::Started);
        assert_eq!(a.start(key(3), CancellationToken::new(), None, 2), Start::Full);
        // A settling attempt no longer runs: its slot is free again.
        a.settled(key(1), settlement(1), Instant::now());
        assert_eq!(a.start(key(3), CancellationToken::new(), None, 2), Start::Started);
    }

    #[test]
    fn acknowledgements_end_only_settling_attempts_and_abandons_only_running_ones() {
        let mut a = Attempts::default();
        a.start(key(1), CancellationToken::new(), None, 8);
        a.settled(key(2), settlement(2), Instant::now());
        a.acknowledged(&key(1));
        a.abandoned(&key(2));
        assert_eq!(a.len(), 2);
        a.acknowledged(&key(2));
        a.abandoned(&key(1));
        assert!(a.is_empty());
    }

    #[test]
    fn a_stop_goes_to_the_relay_when_there_is_one_and_cancels_otherwise() {
        let mut a = Attempts::default();
        let (hosted, remote) = (CancellationToken::new(), CancellationToken::new());
        let (tx, mut rx) = mpsc::unbounded_channel();
        a.start(key(1), hosted.clone(), None, 8);
        a.start(key(2), remote.clone(), Some(tx), 8);
        a.stop(&key(1), wpb::StopReason::Cancelled);
        a.stop(&key(2), wpb::StopReason::OwnerLost);
        a.relay(&key(1), Relay::Ack(wpb::MessageKind::RemoteTask));
        assert!(hosted.is_cancelled());
        assert!(!remote.is_cancelled(), "the driver decides");
        assert_eq!(rx.try_recv().ok(), Some(Relay::Stop(wpb::StopReason::OwnerLost)));
        a.cancel_all();
        assert!(remote.is_cancelled());
    }
}
