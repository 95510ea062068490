//! Watch streams: how a gateway parks all its waits on this coordinator
//! through one stream. The stream holds one entry per execution it follows,
//! never one per waiter: each waiter's `Watch` is an authenticated read like
//! any other (answered, then forgotten), and a change to a followed execution
//! is read once and pushed once, whatever the number of callers waiting on
//! it at the gateway.
//!
//! The push is read with the credential of a `Watch` that succeeded, so the
//! stream only ever carries what some current credential may read: when that
//! credential stops reading it (revoked, say) the entry says so (`Lapsed`) and
//! is pushed nothing until another waiter's `Watch` succeeds.

use super::{Engine, Error, Scope};
use crate::notify::Listener;
use crate::store::ExecutionRecord;
use futures_util::stream::FuturesUnordered;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;

// Every followed execution is re-read every `SAFETY_REREAD`, so a lost
// signal (Redis hiccup) costs latency, never a wait that sleeps through a
// change. One read per execution, not per waiter.
use super::call::SAFETY_REREAD;

/// What a gateway sends on its stream.
#[derive(Debug)]
pub(crate) enum WatchIn {
    /// One waiter's read, which also makes the stream follow the execution.
    Watch { tag: u64, authorization: String, org_id: String, project_id: String, execution_id: String },
    /// The gateway's last waiter on the execution left.
    Unwatch { execution_id: String },
}

/// What the coordinator sends back.
#[derive(Debug)]
pub(crate) enum WatchOut {
    Watched {
        tag: u64,
        record: Box<ExecutionRecord>,
    },
    Refused {
        tag: u64,
        error: Error,
    },
    /// `reader`: SHA-256 of the `authorization` the change was read with.
    Changed {
        record: Box<ExecutionRecord>,
        reader: Vec<u8>,
    },
    Lapsed {
        execution_id: String,
    },
}

/// A followed execution and the credential its pushes are read with.
struct Entry {
    /// `(authorization, org, project)` of a `Watch` that succeeded; `None`
    /// until one does, or after it stopped reading the execution.
    reader: Option<Reader>,
    /// The highest version pushed or answered: nothing older is pushed.
    version: i64,
    /// Changed while no credential could read it: re-read once one can.
    dirty: bool,
}

/// `(authorization, org, project)`: the credential and scope a read is made with.
type Reader = (String, String, String);

/// Why a read was made.
enum Purpose {
    Watch(u64),
    Push,
}

type Read = (Purpose, String, Option<Reader>, Result<ExecutionRecord, Error>);

impl Engine {
    /// Serves one watch stream until the gateway closes it (`incoming` ends),
    /// `out` is dropped, or the coordinator shuts down.
    pub(crate) async fn serve_watch_stream<S>(self: Arc<Self>, mut incoming: S, out: mpsc::Sender<WatchOut>)
    where
        S: Stream<Item = WatchIn> + Unpin,
    {
        let listener = Arc::new(Listener::default());
        let mut entries: HashMap<String, Entry> = HashMap::new();
        let mut reads = FuturesUnordered::new();
        // Answers not yet handed to the stream. The loop never waits for the
        // stream to take one: it keeps reading the gateway's requests, whose
        // HTTP/2 frames would otherwise pile up unread until h2 takes the
        // connection for a flood of small frames (GOAWAY `too_many_data_frames`,
        // seen with 10,000 watches at once) and every call on it fails.
        let mut answers: VecDeque<WatchOut> = VecDeque::new();
        let mut tick = tokio::time::interval(SAFETY_REREAD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            let sent = tokio::select! {
                () = self.shutdown.cancelled() => break,
                message = incoming.next() => match message {
                    None => break,
                    Some(WatchIn::Watch { tag, authorization, org_id, project_id, execution_id }) => {
                        // Followed before the read, so a change after the read is pushed.
                        if !entries.contains_key(&execution_id) {
                            self.changes.listen(&execution_id, &listener);
                            entries.insert(execution_id.clone(), Entry { reader: None, version: i64::MIN, dirty: false });
                        }
                        reads.push(self.clone().read(Purpose::Watch(tag), execution_id, (authorization, org_id, project_id)));
                        true
                    }
                    Some(WatchIn::Unwatch { execution_id }) => {
                        if entries.remove(&execution_id).is_some() {
                            self.changes.unlisten(&execution_id, &listener);
                        }
                        true
                    }
                },
                () = listener.marked() => {
                    for id in listener.take() {
                        if let Some(entry) = entries.get_mut(&id) {
                            match entry.reader.clone() {
                                Some(reader) => reads.push(self.clone().read(Purpose::Push, id, reader)),
                                None => entry.dirty = true,
                            }
                        }
                    }
                    true
                }
                _ = tick.tick() => {
                    for (id, entry) in &entries {
                        if let Some(reader) = entry.reader.clone() {
                            reads.push(self.clone().read(Purpose::Push, id.clone(), reader));
                        }
                    }
                    true
                }
                Some(done) = reads.next(), if !reads.is_empty() => {
                    let (answer, again) = settle(&mut entries, done);
                    if let Some((id, reader)) = again {
                        reads.push(self.clone().read(Purpose::Push, id, reader));
                    }
                    answers.extend(answer);
                    true
                }
                permit = out.reserve(), if !answers.is_empty() => match (permit, answers.pop_front()) {
                    (Ok(permit), Some(answer)) => {
                        permit.send(answer);
                        true
                    }
                    (Ok(_), None) => true,
                    (Err(_), _) => false,
                },
            };
            if !sent {
                break;
            }
        }
        for id in entries.keys() {
            self.changes.unlisten(id, &listener);
        }
    }

    /// Reads `id` as `reader` may: the same authenticated, coalesced read as a poll.
    async fn read(self: Arc<Self>, purpose: Purpose, id: String, reader: Reader) -> Read {
        let (authorization, org_id, project_id) = &reader;
        let scope = Scope { org_id, project_id };
        let found = self.read_owned(Some(authorization), scope, &id).await.map(|(_, record)| record);
        (purpose, id, Some(reader), found)
    }
}

/// Applies a finished read to the entries: what to send (if anything), and a
/// push read to make now (a change seen while no credential could read it).
fn settle(entries: &mut HashMap<String, Entry>, done: Read) -> (Option<WatchOut>, Option<(String, Reader)>) {
    let (purpose, id, reader, found) = done;
    let entry = entries.get_mut(&id);
    match (purpose, found) {
        (Purpose::Watch(tag), Ok(record)) => {
            let mut again = None;
            if let Some(entry) = entry {
                entry.version = entry.version.max(record.version);
                if entry.reader.is_none() {
                    entry.reader = reader.clone();
                    if std::mem::take(&mut entry.dirty) {
                        again = reader.map(|r| (id, r));
                    }
                }
            }
            (Some(WatchOut::Watched { tag, record: Box::new(record) }), again)
        }
        (Purpose::Watch(tag), Err(error)) => (Some(WatchOut::Refused { tag, error }), None),
        (Purpose::Push, Ok(record)) => match entry {
            Some(entry) if record.version > entry.version => {
                entry.version = record.version;
                let reader =
                    reader.map(|(authorization, _, _)| Sha256::digest(authorization).to_vec()).unwrap_or_default();
                (Some(WatchOut::Changed { record: Box::new(record), reader }), None)
            }
            _ => (None, None),
        },
        (Purpose::Push, Err(Error::Auth(_))) => match entry {
            // Only the credential that failed loses the entry; a newer one stays.
            Some(entry) if entry.reader == reader => {
                entry.reader = None;
                (Some(WatchOut::Lapsed { execution_id: id }), None)
            }
            _ => (None, None),
        },
        (Purpose::Push, Err(e)) => {
            // The store failed this once: the next signal or tick reads again.
            tracing::debug!(error = %e, execution_id = %id, "a watch stream's re-read failed");
            (None, None)
        }
    }
}
