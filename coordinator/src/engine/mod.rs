//! The engine: the coordinator's use cases (start, read, wait, cancel, settle,
//! dispatch), each a store transaction through the state machine followed by the
//! transition's effects. gRPC services are thin adapters over this.

mod bus;
mod coalesce;
mod creates;
mod dispatch;
mod input;
pub mod lifecycle;
mod reads;
mod sessions;
mod settlement;

pub use bus::Bus;
pub use creates::Creates;
pub use reads::Reads;
pub use sessions::{CloseReason, Session, Sessions, outbox};
pub use settlement::Settled;

use crate::admission::{self, Admission, Rejection, Ticket};
use crate::authz::{self, Principal};
use crate::crypto::{self, KeyRing};
use crate::domain::{Effect, Millis, StopReason};
use crate::notify::Changes;
use crate::options::Options;
use crate::store::{self, ExecutionRecord, Store};
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
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub fn now_ms() -> Millis {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub struct Engine {
    pub store: Store,
    /// Owner reads, coalesced across concurrent callers.
    pub reads: Reads,
    /// Creates, coalesced into shared statements and commits.
    pub creates: Creates,
    pub ring: Arc<KeyRing>,
    pub admission: Arc<dyn Admission>,
    pub changes: Changes,
    pub bus: Bus,
    pub sessions: Sessions,
    pub dispatch_wake: Arc<Notify>,
    pub options: Arc<Options>,
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
    /// The Redis admission, when clustered, for periodic rebuilds from Postgres.
    pub cluster_admission: Option<Arc<crate::admission::redis::RedisAdmission>>,
    /// Authenticated calls to other replicas' `Peer` service.
    pub peers: crate::grpc::peer::Peers,
}

/// The stored form of the bearer token in an `authorization` header.
fn token_hash(authorization: Option<&str>) -> Result<Vec<u8>, authz::Error> {
    authz::bearer_token(authorization).map(authz::hash_token).ok_or(authz::Error::Unauthenticated)
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
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Principal> {
        let hash = token_hash(authorization)?;
        let credential = self.reads.credential(hash).await?.ok_or(authz::Error::Unauthenticated)?;
        Ok(Principal::from_credential(credential)?)
    }

    /// Reads an execution the principal may own; anything else is the uniform not-found.
    pub async fn owned(&self, p: &Principal, org_id: &str, project_id: &str, id: &str) -> Result<ExecutionRecord> {
        p.in_scope(org_id, project_id)?;
        Ok(visible(p, org_id, project_id, self.reads.execution(id).await?)?)
    }

    /// Authenticates the caller and reads an execution they may own, in one
    /// store round trip (the hot path of every poll).
    pub async fn read_owned(
        &self,
        authorization: Option<&str>,
        org_id: &str,
        project_id: &str,
        id: &str,
    ) -> Result<(Principal, ExecutionRecord)> {
        let hash = token_hash(authorization)?;
        let (credential, record) =
            self.reads.credential_with_execution(hash, id).await?.ok_or(authz::Error::Unauthenticated)?;
        let p = Principal::from_credential(credential)?;
        let record = visible(&p, org_id, project_id, record)?;
        Ok((p, record))
    }

    /// Carries out what a committed transition asked for.
    pub async fn after_commit(&self, record: &ExecutionRecord, effects: &[Effect]) -> Option<bool> {
        self.changed(&record.id);
        let mut delivered = None;
        for effect in effects {
            match effect {
                Effect::Terminal => {
                    if let Err(e) = self.admission.release(&Ticket::from_record(record), now_ms()).await {
                        tracing::warn!(error = %e, execution_id = %record.id, "admission release failed; entry expires at the deadline");
                    }
                }
                Effect::Stop { worker_id, attempt, reason } => {
                    delivered = Some(self.deliver_stop(worker_id, &record.id, *attempt, *reason).await);
                }
                Effect::RetryAt(at) => self.wake_at(*at),
                Effect::Invoke { .. } | Effect::Resume { .. } => {}
            }
        }
        delivered
    }

    /// Wakes long polls on every replica.
    pub fn changed(&self, id: &str) {
        self.changes.changed_locally(id);
        self.bus.publish_changed(id);
    }

    /// Wakes dispatchers on every replica.
    pub fn wake_dispatch(&self) {
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
    pub async fn deliver_stop(&self, worker_id: &str, execution_id: &str, attempt: u32, reason: StopReason) -> bool {
        if let Some(s) = self.sessions.get(worker_id) {
            return s.stop(execution_id, attempt, reason.as_str());
        }
        match self.store.worker_coordinator(worker_id).await {
            Ok(Some((coordinator_id, url))) if coordinator_id != self.options.id => {
                self.peers.deliver_stop(&url, worker_id, execution_id, attempt, reason.as_str()).await
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "worker directory unavailable for stop delivery");
                false
            }
        }
    }
}
