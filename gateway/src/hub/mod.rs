//! The wait hub: every parked wait of this gateway process shares one
//! `Waits.WatchExecutions` stream to the coordinator, and every waiter on one
//! execution shares one entry here (a `watch` of its latest view and a count
//! of its waiters). A parked wait therefore costs no coordinator call and no
//! task of its own: it is a receiver on its execution's entry.
//!
//! Each waiter still sends its own `Watch` (its credential, its scope), which
//! the coordinator answers as an authenticated read with the row's version;
//! pushes carry versions too, so a waiter compares only views read after its
//! own. The waiting itself (baselines, credential re-checks, time-outs, the
//! fallback while the stream is down) is `Coordinator::wait`'s; this module
//! only keeps the stream and the entries.

pub(crate) mod checks;

use baton_proto::coordinator::v1::{self as pb, waits_client::WaitsClient, watch_event, watch_request};
use baton_proto::error::{ErrorCode, WireError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Duration, Instant};
use tonic::transport::Channel;

/// The retry hint of a watch refused as unavailable: the coordinator's own for a busy answer.
const BUSY_RETRY_AFTER_MS: u64 = 2_000;

/// After the stream fails, waits use unary calls for at least this long
/// before it is dialled again; doubled per failure up to the maximum.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a waiter waits for the stream being dialled before it waits with
/// a unary call instead.
const DIAL_WAIT: Duration = Duration::from_secs(2);

/// An execution as the coordinator last reported it to this gateway.
#[derive(Debug)]
pub(crate) struct Seen {
    /// The row's version: a higher one is a later state.
    pub(crate) version: i64,
    pub(crate) view: pb::ExecutionView,
    /// SHA-256 of the `authorization` a push was read with (empty for an answer).
    pub(crate) reader: Vec<u8>,
    /// When it arrived here: a credential check begun after this sees every
    /// revocation before the change it reports.
    pub(crate) at: Instant,
}

/// The latest news of one execution.
#[derive(Clone, Debug, Default)]
pub(crate) enum Latest {
    /// Nothing pushed yet.
    #[default]
    Unknown,
    Seen(Arc<Seen>),
    /// The stream broke, or the credential pushes were read with lapsed:
    /// waiters must `Watch` again (with their own credentials).
    Lost,
}

/// Why a `Watch` got no view.
#[derive(Debug)]
pub(crate) enum WatchError {
    /// The coordinator refused the waiter's credential or scope.
    Refused(WireError),
    /// The stream is down: wait with a unary call instead.
    Down,
}

/// The hub of one gateway process. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Hub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hub")
    }
}

struct Inner {
    client: WaitsClient<Channel>,
    state: Mutex<State>,
    /// Credential re-checks shared by the waiters one change woke.
    checks: checks::Checks,
    /// The stream's task.
    tasks: tokio_util::task::TaskTracker,
    /// Bumped whenever the link changes (up, down), for waiters on a dial.
    link_changed: watch::Sender<u64>,
}

enum Link {
    Down { retry_at: Instant, backoff: Duration },
    Connecting,
    Up(mpsc::UnboundedSender<pb::WatchRequest>),
}

struct Entry {
    /// Tells this entry from a later one of the same execution.
    serial: u64,
    waiters: usize,
    latest: watch::Sender<Latest>,
}

type Answer = oneshot::Sender<Result<Arc<Seen>, WireError>>;

struct State {
    link: Link,
    entries: HashMap<String, Entry>,
    /// `Watch`es sent and not yet answered, by tag.
    pending: HashMap<u64, Answer>,
    next_tag: u64,
    next_serial: u64,
}

/// One waiter's place on an execution's entry; leaving gives it back, and
/// the last to leave ends the coordinator's interest (`Unwatch`).
pub(crate) struct Member {
    inner: Arc<Inner>,
    id: String,
    serial: u64,
    link: mpsc::UnboundedSender<pb::WatchRequest>,
    pub(crate) latest: watch::Receiver<Latest>,
}

impl Hub {
    pub(crate) fn new(channel: Channel) -> Hub {
        let state = State {
            link: Link::Down { retry_at: Instant::now(), backoff: FIRST_BACKOFF },
            entries: HashMap::new(),
            pending: HashMap::new(),
            next_tag: 1,
            next_serial: 1,
        };
        let inner = Inner {
            client: WaitsClient::new(channel),
            state: Mutex::new(state),
            checks: Default::default(),
            tasks: Default::default(),
            link_changed: watch::Sender::new(0),
        };
        Hub { inner: Arc::new(inner) }
    }

    /// The credential re-checks of this process.
    pub(crate) fn checks(&self) -> &checks::Checks {
        &self.inner.checks
    }

    /// A place on `execution_id`'s entry, or `None` while the stream is down.
    /// A stream due to be dialled is dialled first, and the first waiters wait
    /// for it (up to `DIAL_WAIT`), so even the first wait parks on the hub.
    pub(crate) async fn join(&self, execution_id: &str) -> Option<Member> {
        loop {
            let mut changed = {
                let mut state = self.inner.lock();
                match &state.link {
                    Link::Up(link) => {
                        let link = link.clone();
                        return Some(self.member(&mut state, execution_id, link));
                    }
                    Link::Connecting => {}
                    Link::Down { retry_at, backoff } => {
                        if Instant::now() < *retry_at {
                            return None;
                        }
                        let backoff = *backoff;
                        state.link = Link::Connecting;
                        spawn_stream(&self.inner, backoff);
                    }
                }
                // Subscribed under the lock: the dial's outcome cannot slip by.
                self.inner.link_changed.subscribe()
            };
            if tokio::time::timeout(DIAL_WAIT, changed.changed()).await.is_err() {
                return None;
            }
        }
    }

    fn member(&self, state: &mut State, execution_id: &str, link: mpsc::UnboundedSender<pb::WatchRequest>) -> Member {
        let entry = state.entries.entry(execution_id.to_owned()).or_insert_with(|| {
            state.next_serial += 1;
            Entry { serial: state.next_serial, waiters: 0, latest: watch::Sender::new(Latest::Unknown) }
        });
        entry.waiters += 1;
        let (serial, latest) = (entry.serial, entry.latest.subscribe());
        Member { inner: Arc::clone(&self.inner), id: execution_id.to_owned(), serial, link, latest }
    }

    /// Executions with an entry, and waiters on them (for tests).
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.inner.lock();
        (state.entries.len(), state.entries.values().map(|e| e.waiters).sum())
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the link and tells the waiters on a dial.
    fn set_link(&self, state: &mut State, link: Link) {
        state.link = link;
        self.link_changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Member {
    /// This waiter's own authenticated read (`authorization` as it would be
    /// sent in metadata), which also makes the stream follow the execution.
    pub(crate) async fn watch(
        &self,
        authorization: String,
        org_id: &str,
        project_id: &str,
    ) -> Result<Arc<Seen>, WatchError> {
        let (answer, answered) = oneshot::channel();
        let tag = {
            let mut state = self.inner.lock();
            let tag = state.next_tag;
            state.next_tag += 1;
            state.pending.insert(tag, answer);
            tag
        };
        let watch = pb::Watch {
            tag,
            authorization,
            org_id: org_id.to_owned(),
            project_id: project_id.to_owned(),
            execution_id: self.id.clone(),
        };
        if self.link.send(pb::WatchRequest { kind: Some(watch_request::Kind::Watch(watch)) }).is_err() {
            self.inner.lock().pending.remove(&tag);
            return Err(WatchError::Down);
        }
        // A dropped answer means the stream ended before it came.
        match answered.await {
            Ok(Ok(seen)) => Ok(seen),
            Ok(Err(refused)) => Err(WatchError::Refused(refused)),
            Err(_) => Err(WatchError::Down),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let mut state = self.inner.lock();
        let Some(entry) = state.entries.get_mut(&self.id).filter(|e| e.serial == self.serial) else { return };
        entry.waiters = entry.waiters.saturating_sub(1);
        if entry.waiters == 0 {
            state.entries.remove(&self.id);
            let unwatch = pb::Unwatch { execution_id: self.id.clone() };
            // A closed link has no interest left to end.
            let _ = self.link.send(pb::WatchRequest { kind: Some(watch_request::Kind::Unwatch(unwatch)) });
        }
    }
}

/// Dials the stream and serves it until it ends, as the hub's one named
/// task. It holds the hub only weakly, so it ends with it (the request half
/// closes when the hub is dropped); a panic is logged and the stream counted
/// as lost, so waits go on with unary calls.
fn spawn_stream(inner: &Arc<Inner>, backoff: Duration) {
    use futures_util::FutureExt as _;
    let weak = Arc::downgrade(inner);
    inner.tasks.spawn(async move {
        let served = std::panic::AssertUnwindSafe(stream(weak.clone(), backoff)).catch_unwind().await;
        if served.is_err() {
            tracing::error!(task = "wait stream", "the wait stream task panicked; waits use unary calls");
            if let Some(inner) = weak.upgrade() {
                inner.lost_stream();
            }
        }
    });
}

async fn stream(weak: Weak<Inner>, backoff: Duration) {
    let Some(mut client) = weak.upgrade().map(|i| i.client.clone()) else { return };
    let (link, outgoing) = mpsc::unbounded_channel();
    let requests = futures_util::stream::unfold(outgoing, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut request = tonic::Request::new(requests);
    crate::version::state(request.metadata_mut());
    let mut events = match client.watch_executions(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            tracing::warn!(error = %status, "the wait stream could not be opened; waits use unary calls");
            if let Some(inner) = weak.upgrade() {
                let next = (backoff * 2).min(MAX_BACKOFF);
                let mut state = inner.lock();
                inner.set_link(&mut state, Link::Down { retry_at: Instant::now() + backoff, backoff: next });
            }
            return;
        }
    };
    match weak.upgrade() {
        Some(inner) => {
            let mut state = inner.lock();
            inner.set_link(&mut state, Link::Up(link));
        }
        None => return,
    }
    tracing::debug!("wait stream open");
    loop {
        let event = events.message().await;
        let Some(inner) = weak.upgrade() else { return };
        match event {
            Ok(Some(event)) => inner.receive(event),
            Ok(None) | Err(_) => {
                if let Err(status) = event {
                    tracing::warn!(error = %status, "the wait stream broke; waits re-watch or use unary calls");
                }
                inner.lost_stream();
                return;
            }
        }
    }
}

impl Inner {
    fn receive(&self, event: pb::WatchEvent) {
        let mut state = self.lock();
        match event.kind {
            Some(watch_event::Kind::Watched(w)) => {
                let tag = w.tag;
                let seen = state.update(w);
                if let Some(answer) = state.pending.remove(&tag) {
                    let _ = answer.send(seen.ok_or_else(|| WireError::new(ErrorCode::Internal, "internal error")));
                }
            }
            Some(watch_event::Kind::Changed(w)) => {
                state.update(w);
            }
            Some(watch_event::Kind::Refused(r)) => {
                if let Some(answer) = state.pending.remove(&r.tag) {
                    let code = ErrorCode::parse(&r.code).unwrap_or(ErrorCode::Internal);
                    let mut refused = WireError::new(code, r.message);
                    // A refusal carries no retry hint on the stream; an
                    // unavailable (busy) coordinator asks to come back as its
                    // unary answers do.
                    if code == ErrorCode::Unavailable {
                        refused.retry_after_ms = Some(BUSY_RETRY_AFTER_MS);
                    }
                    let _ = answer.send(Err(refused));
                }
            }
            Some(watch_event::Kind::Lapsed(l)) => {
                if let Some(entry) = state.entries.get(&l.execution_id) {
                    entry.latest.send_replace(Latest::Lost);
                }
            }
            None => {}
        }
    }

    /// The stream ended: every entry is lost, every `Watch` unanswered.
    fn lost_stream(&self) {
        let mut state = self.lock();
        for (_, entry) in state.entries.drain() {
            entry.latest.send_replace(Latest::Lost);
        }
        state.pending.clear();
        self.set_link(&mut state, Link::Down { retry_at: Instant::now() + FIRST_BACKOFF, backoff: FIRST_BACKOFF });
    }
}

impl State {
    /// Records a view for its entry, unless an equal or later one is there.
    fn update(&mut self, w: pb::Watched) -> Option<Arc<Seen>> {
        let view = w.execution?;
        let seen = Arc::new(Seen { version: w.version, view, reader: w.reader, at: Instant::now() });
        if let Some(entry) = self.entries.get(&seen.view.execution_id) {
            entry.latest.send_if_modified(|latest| match latest {
                Latest::Seen(known) if known.version >= seen.version => false,
                _ => {
                    *latest = Latest::Seen(Arc::clone(&seen));
                    true
                }
            });
        }
        Some(seen)
    }
}

#[cfg(test)]
mod tests;
