//! The engine: the coordinator's use cases (start, read, wait, cancel, settle,
//! dispatch), each a store transaction through the state machine followed by the
//! transition's effects. gRPC services are thin adapters over this.

pub(crate) mod batch;
mod bus;
pub(crate) mod call;
pub(crate) mod dashboard;
pub(crate) mod history;
mod input;
pub mod lifecycle;
pub mod messages;
pub(crate) mod metrics;
pub(crate) mod operator;
pub mod people;
mod session_tokens;
pub(crate) mod settings;
// Waiting at scale (issue #21): gateways' watch streams.
pub(crate) mod subscriptions;
#[cfg(test)]
mod subscriptions_tests;
mod sweeper;
#[cfg(test)]
mod tests;
mod watch_tokens;
pub(crate) mod webhooks;
mod workers;

pub(crate) use batch::{Creates, Reads};
use baton_proto::clock::now_ms;
pub use bus::Bus;
pub(crate) use workers::FromWorker;
pub use workers::sessions::{CloseReason, Session, Sessions, outbox};

/// How the engine reaches a worker session held by another replica. The gRPC
/// `Peer` client implements it; the engine knows nothing of the wire.
pub trait PeerLink: Send + Sync {
    /// Asks the replica at `url` to deliver a stop; true only when it reached a live session.
    fn deliver_stop<'a>(
        &'a self,
        url: &'a str,
        worker_id: &'a str,
        attempt: messages::AttemptRef,
        reason: StopReason,
    ) -> BoxFuture<'a, bool>;

    /// Asks the replica at `url` to relay an owner's answer to the lease holder.
    fn deliver_answer<'a>(
        &'a self,
        url: &'a str,
        worker_id: &'a str,
        answer: messages::InputAnswer,
    ) -> BoxFuture<'a, bool>;
}

use crate::admission::{self, Admission, Rejection, Ticket};
use crate::authz::{self, Principal};
use crate::crypto::{self, KeyRing};
use crate::domain::{Effect, ExecutionId, Millis, StopReason};
use crate::notify::Changes;
use crate::options::Options;
use crate::store::{self, Applied, ExecutionRecord, Store};
use futures_util::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Auth(#[from] authz::Error),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Crypto(#[from] crypto::Error),
    #[error(transparent)]
    Admission(#[from] admission::Error),
    /// A person's sign-in with the OpenID provider failed.
    #[error(transparent)]
    SignIn(#[from] crate::oidc::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    InvalidInput(String),
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    #[error("{0}")]
    PolicyRefused(String),
    #[error("input exceeds {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("saturated")]
    Capacity(Rejection),
    /// A thing other than an execution that does not exist for this caller.
    #[error("{0} not found")]
    Missing(&'static str),
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// The coordinator's use cases over one store, admission and bus. Built once
/// per process with [`Engine::new`]; adapters reach it only through methods.
pub struct Engine {
    store: Store,
    /// Owner reads, coalesced across concurrent callers.
    reads: Reads,
    /// Creates, coalesced into shared statements and commits.
    creates: Creates,
    /// Starts' credential and tool reads, coalesced likewise.
    start_reads: batch::StartReads,
    ring: Arc<KeyRing>,
    admission: Arc<dyn Admission>,
    changes: Changes,
    /// Whether a credential was revoked since a foreground call began.
    revocations: Arc<crate::revocations::Revocations>,
    bus: Bus,
    sessions: Sessions,
    dispatch_wake: Arc<Notify>,
    /// Wakes the dispatcher when slots came free (settlements, heartbeats).
    slots_wake: Notify,
    /// Pending work may be waiting for a free slot here: starts then leave
    /// slots to the dispatcher instead of taking them at create (cleared by a
    /// dispatch round that finds less than it had room for).
    pending_seen: std::sync::atomic::AtomicBool,
    options: Arc<Options>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    /// The Redis admission, when clustered, for periodic rebuilds from Postgres.
    cluster_admission: Option<Arc<crate::admission::redis::RedisAdmission>>,
    /// Authenticated calls to other replicas' `Peer` service.
    peers: Arc<dyn PeerLink>,
    /// Wakes this replica's webhook deliverer when it wrote signals.
    webhook_wake: Arc<Notify>,
    metrics: metrics::Metrics,
}

/// What an engine is made of; `lib.rs` connects them, tests pick their own.
pub struct Parts {
    pub store: Store,
    pub admission: Arc<dyn Admission>,
    /// Set in a cluster: rebuilt from the store periodically.
    pub cluster_admission: Option<Arc<crate::admission::redis::RedisAdmission>>,
    pub bus: Bus,
    pub peers: Arc<dyn PeerLink>,
    pub options: Options,
    pub shutdown: CancellationToken,
}

impl Engine {
    pub fn new(parts: Parts) -> Arc<Engine> {
        let Parts { store, admission, cluster_admission, bus, peers, options, shutdown } = parts;
        Arc::new_cyclic(|engine: &std::sync::Weak<Engine>| {
            let (for_sessions, pool) = (engine.clone(), store.clone());
            let sessions = move || {
                let sessions = for_sessions.upgrade().map(|e| e.sessions.snapshot()).unwrap_or_default();
                (sessions.len() as u64, sessions.iter().map(|s| s.free()).sum())
            };
            let metrics = metrics::Metrics::new(sessions, move || pool.pool_stats());
            Engine {
                reads: Reads::start(store.clone()),
                creates: Creates::start(store.clone()),
                start_reads: batch::StartReads::start(store.clone()),
                store,
                ring: options.key_ring.clone(),
                admission,
                changes: Changes::default(),
                revocations: Arc::default(),
                bus,
                sessions: Sessions::default(),
                dispatch_wake: Arc::default(),
                slots_wake: Notify::new(),
                pending_seen: std::sync::atomic::AtomicBool::new(true),
                webhook_wake: Arc::default(),
                options: Arc::new(options),
                tasks: TaskTracker::new(),
                shutdown,
                cluster_admission,
                peers,
                metrics,
            }
        })
    }

    /// Brings admission up to date before this replica serves: an empty
    /// Redis admits nothing until it is rebuilt from the database, and
    /// admission in memory starts from the executions still open.
    pub async fn prepare(&self) -> Result<()> {
        match &self.cluster_admission {
            Some(redis) => {
                sweeper::rebuild_admission(self, redis).await;
                Ok(())
            }
            None => sweeper::restore_admission(self).await.map(|open| {
                if open > 0 {
                    tracing::info!(open, "admission restored from the open executions");
                }
            }),
        }
    }

    /// Starts this replica's background work: dispatch, bus wake-ups, the
    /// sweeper, admission rebuilds and the revocation audit of sessions.
    pub(crate) fn start_background(self: &Arc<Self>) {
        self.tasks.spawn(self.clone().run_dispatcher());
        self.tasks.spawn(self.bus.clone().listen(
            self.changes.clone(),
            self.dispatch_wake.clone(),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(sweeper::run(self.clone()));
        self.tasks.spawn(crate::revocations::listen(
            self.options.database_url.clone(),
            self.revocations.clone(),
            self.shutdown.clone(),
        ));
        self.tasks.spawn(sweeper::reconcile_admission(self.clone()));
        self.tasks.spawn(sweeper::measure_read_replica(self.clone()));
        self.tasks.spawn(self.clone().run_session_audit());
        self.start_webhook_delivery();
    }

    /// Waits for every task this engine started, then closes the store.
    pub(crate) async fn stopped(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        self.store.close().await;
    }

    /// Runs `task` as part of this engine: awaited by [`Engine::stopped`].
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(task);
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// This replica's session of `worker_id`, if it holds one.
    pub fn session(&self, worker_id: &str) -> Option<Arc<Session>> {
        self.sessions.get(worker_id)
    }

    /// Records that a legacy MCP session ended (by its owner's DELETE).
    pub(crate) async fn end_mcp_session(&self, authorization: Option<&str>, session: &str) -> Result<()> {
        let p = self.authenticate(authorization).await?;
        if session.is_empty() || session.len() > 256 {
            return Err(Error::Invalid("mcp_session_id must be 1 to 256 characters".into()));
        }
        Ok(self.store.end_mcp_session(session, p.credential_id(), now_ms()).await?)
    }

    pub(crate) async fn mcp_session_ended(&self, session: &str) -> Result<bool> {
        Ok(!session.is_empty() && self.store.mcp_session_ended(session).await?)
    }
}

/// Where an owner call is aimed: the organization and project in its path.
///
/// The one convention of every caller-facing use case: it takes the caller's
/// `authorization` header as sent, and a `Scope`, and authenticates itself, so
/// that reads can authenticate in the same store round trip as the row they
/// load and no adapter can skip the check.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    pub org_id: &'a str,
    pub project_id: &'a str,
}

/// The stored form of the bearer token in an `authorization` header.
fn token_hash(authorization: Option<&str>) -> Result<Vec<u8>, authz::Error> {
    authz::bearer_token(authorization).map(authz::hash_token).ok_or(authz::Error::Unauthenticated)
}

/// What an execution holds in admission.
fn ticket(r: &ExecutionRecord) -> Ticket {
    Ticket {
        execution_id: r.id.to_string(),
        org_id: r.org_id.clone(),
        project_id: r.project_id.clone(),
        user_id: r.user_id.clone(),
        payload_bytes: u64::try_from(r.payload_bytes).unwrap_or(0),
        expires_at_ms: r.execution_deadline,
        retained_until_ms: r.retention_expires_at,
    }
}

/// The record when `p` may see it; anything else is the uniform not-found.
fn visible(
    p: &Principal,
    org_id: &str,
    project_id: &str,
    record: Option<ExecutionRecord>,
) -> Result<ExecutionRecord, authz::Error> {
    p.in_scope(org_id, project_id)?;
    match record {
        Some(r) if p.may_own(&r) && r.retention_expires_at > now_ms() => Ok(r),
        _ => Err(authz::Error::NotFound),
    }
}

impl Engine {
    pub(crate) async fn authenticate(&self, authorization: Option<&str>) -> Result<Principal> {
        if let Some(session) = dashboard::session_token(authorization) {
            return Ok(Principal::from_credential(self.session_credential(session).await?)?);
        }
        let hash = token_hash(authorization)?;
        let credential = self.reads.credential(hash).await?.ok_or(authz::Error::Unauthenticated)?;
        Ok(Principal::from_credential(credential)?)
    }

    /// The caller's credential and execution `id`: one store round trip for a
    /// bearer token, the session first for a dashboard session.
    async fn credential_with_execution(
        &self,
        authorization: Option<&str>,
        id: &ExecutionId,
    ) -> Result<(store::Credential, Option<ExecutionRecord>)> {
        if let Some(session) = dashboard::session_token(authorization) {
            let credential = self.session_credential(session).await?;
            return Ok((credential, self.reads.execution(id).await?));
        }
        let hash = token_hash(authorization)?;
        Ok(self.reads.credential_with_execution(hash, id).await?.ok_or(authz::Error::Unauthenticated)?)
    }

    /// Authenticates the caller and reads an execution they may own, in one
    /// store round trip (the hot path of every poll). `id` is as the caller
    /// sent it: it is typed here, once.
    pub(crate) async fn read_owned(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<(Principal, ExecutionRecord)> {
        let Some(id) = ExecutionId::parse(id) else {
            // No such id can exist: authenticate (401 comes first), then the
            // uniform not-found, without the id ever reaching a shared read.
            let p = self.authenticate(authorization).await?;
            p.in_scope(scope.org_id, scope.project_id)?;
            return Err(authz::Error::NotFound.into());
        };
        let (credential, record) = self.credential_with_execution(authorization, &id).await?;
        let p = Principal::from_credential(credential)?;
        let record = visible(&p, scope.org_id, scope.project_id, record)?;
        Ok((p, record))
    }

    /// Carries out what a committed transition asked for.
    pub(crate) async fn after_commit(&self, applied: &Applied) -> Option<bool> {
        let record = &applied.record;
        self.changed(record);
        // Only a commit that queued a delivery wakes the delivery loop: a
        // project without endpoints costs it nothing (its poll is the net).
        if applied.deliveries_queued {
            self.webhook_wake.notify_one();
        }
        let mut delivered = None;
        for effect in &applied.effects {
            match effect {
                Effect::Terminal => {
                    self.metrics.finished(record);
                    if let Err(e) = self.admission.release(&ticket(record), now_ms()).await {
                        tracing::warn!(error = %e, execution_id = %record.id, "admission release failed; entry expires at the deadline");
                    }
                }
                Effect::Stop { worker_id, attempt, reason } => {
                    delivered = Some(self.deliver_stop(worker_id, &record.id, *attempt, *reason).await);
                }
                Effect::RetryAt(at) => self.wake_at(*at),
                // Written with the transition by the store.
                Effect::Invoke { .. }
                | Effect::Resume { .. }
                | Effect::AttemptFinished { .. }
                | Effect::AttemptVoided { .. } => {}
            }
        }
        delivered
    }

    /// Wakes long polls on every replica: this replica's with what `record`,
    /// as just committed, says of the change.
    pub(crate) fn changed(&self, record: &ExecutionRecord) {
        self.changes.changed_here(record);
        self.bus.publish_changed(record.id.as_str());
    }

    /// Wakes dispatchers on every replica.
    pub(crate) fn wake_dispatch(&self) {
        self.dispatch_wake.notify_one();
        self.bus.publish_wake();
    }

    fn wake_at(&self, at: Millis) {
        let wake = self.dispatch_wake.clone();
        let shutdown = self.shutdown.clone();
        let delay = std::time::Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0));
        self.tasks.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => wake.notify_one(),
                _ = shutdown.cancelled() => {}
            }
        });
    }

    /// Sends a stop to the worker holding the lease, wherever its session lives.
    /// True only when the stop reached a live session.
    pub(crate) async fn deliver_stop(
        &self,
        worker_id: &str,
        execution_id: &ExecutionId,
        attempt: u32,
        reason: StopReason,
    ) -> bool {
        if let Some(s) = self.sessions.get(worker_id) {
            return s.stop(execution_id, attempt, reason);
        }
        match self.store.worker_coordinator(worker_id).await {
            Ok(Some((coordinator_id, url))) if coordinator_id != self.options.id => {
                self.peers.deliver_stop(&url, worker_id, messages::AttemptRef::new(execution_id, attempt), reason).await
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "worker directory unavailable for stop delivery");
                false
            }
        }
    }
}
