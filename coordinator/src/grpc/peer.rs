//! `baton.coordinator.v1.Peer`: another replica asks this one to deliver a stop
//! or an owner's answer to a worker session held here. Callable only with the
//! cluster credential (`peer_auth`), never with a worker or gateway token; it
//! shares the coordinator's port (docs/decisions/0016-peers-share-the-coordinator-s-port.md).

use super::convert;
use super::peer_auth;
use crate::domain::{ExecutionId, StopReason};
use crate::engine::messages::{AttemptRef, Command, InputAnswer};
use crate::engine::{Engine, PeerLink};
use baton_proto::coordinator::v1::{
    DeliverCancelRequest, DeliverCancelResponse, DeliverInputRequest, peer_client::PeerClient, peer_server::Peer,
};
use futures_util::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};

pub(crate) struct PeerService {
    engine: Arc<Engine>,
    /// Tokens already used here: each is good for one call.
    seen: peer_auth::Seen,
}

/// What a `DeliverCancel` token is bound to.
fn cancel_digest(r: &DeliverCancelRequest) -> [u8; 32] {
    peer_auth::digest(&[&r.worker_id, &r.execution_id, &r.attempt.to_string(), &r.reason.to_string()])
}

/// What a `DeliverInput` token is bound to: every field, the answer included.
fn input_digest(r: &DeliverInputRequest) -> [u8; 32] {
    let (attempt, action) = (r.attempt.to_string(), r.action.to_string());
    peer_auth::digest(&[&r.worker_id, &r.execution_id, &attempt, &r.remote_key, &action, &r.content_json])
}

const CANCEL: &str = "DeliverCancel";
const INPUT: &str = "DeliverInput";

impl PeerService {
    pub(crate) fn new(engine: Arc<Engine>) -> PeerService {
        PeerService { engine, seen: peer_auth::Seen::default() }
    }

    fn authorize<T>(&self, req: &Request<T>, method: &str, digest: &[u8; 32]) -> Result<(), Status> {
        let Some(secret) = self.engine.options().cluster_secret.as_deref() else {
            return Err(Status::permission_denied("peer calls need security.cluster_secret on this coordinator"));
        };
        let presented = req.metadata().get(peer_auth::METADATA_KEY).and_then(|v| v.to_str().ok()).unwrap_or("");
        if self.seen.verify(secret.as_bytes(), presented, method, digest, baton_proto::clock::unix_seconds()) {
            Ok(())
        } else {
            tracing::warn!("peer call without a valid cluster credential refused");
            Err(Status::unauthenticated("peer calls need the cluster credential"))
        }
    }
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn deliver_cancel(
        &self,
        req: Request<DeliverCancelRequest>,
    ) -> Result<Response<DeliverCancelResponse>, Status> {
        self.authorize(&req, CANCEL, &cancel_digest(req.get_ref()))?;
        let r = req.into_inner();
        let reason = convert::stop_reason_from_wire(r.reason())
            .ok_or_else(|| Status::invalid_argument("unknown stop reason"))?;
        let Some(execution_id) = ExecutionId::parse(&r.execution_id) else { return Ok(held_by_nobody()) };
        let delivered = match self.engine.session(&r.worker_id) {
            Some(session) => session.stop(&execution_id, r.attempt, reason),
            None => false,
        };
        Ok(Response::new(DeliverCancelResponse { delivered }))
    }

    async fn deliver_input(
        &self,
        req: Request<DeliverInputRequest>,
    ) -> Result<Response<DeliverCancelResponse>, Status> {
        self.authorize(&req, INPUT, &input_digest(req.get_ref()))?;
        let r = req.into_inner();
        let Some(execution_id) = ExecutionId::parse(&r.execution_id) else { return Ok(held_by_nobody()) };
        let delivered = match self.engine.session(&r.worker_id) {
            Some(session) => session.send(Command::Answer(InputAnswer {
                action: r.action().name().to_owned(),
                attempt: AttemptRef { execution_id, attempt: r.attempt },
                remote_key: r.remote_key,
                content_json: r.content_json,
            })),
            None => false,
        };
        Ok(Response::new(DeliverCancelResponse { delivered }))
    }
}

/// The answer about an id no execution can have: no session holds it, so
/// nothing was delivered.
fn held_by_nobody() -> Response<DeliverCancelResponse> {
    Response::new(DeliverCancelResponse { delivered: false })
}

/// Calls to other replicas, one lazily connected channel per replica URL,
/// each carrying the cluster credential.
#[derive(Clone, Default)]
pub(crate) struct Peers {
    secret: Option<Arc<str>>,
    tls: Option<ClientTlsConfig>,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

/// The longest a peer call may take; past it the delivery counts as unknown.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

impl Peers {
    pub(crate) fn new(secret: Option<String>, tls: Option<ClientTlsConfig>) -> Self {
        Peers { secret: secret.map(Arc::from), tls, channels: Default::default() }
    }

    fn channel(&self, url: &str) -> Option<Channel> {
        let mut channels = self.channels.lock().ok()?;
        if let Some(c) = channels.get(url) {
            return Some(c.clone());
        }
        let mut endpoint = Endpoint::from_shared(url.to_owned())
            .ok()?
            .connect_timeout(CALL_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5));
        if url.starts_with("https://") {
            // Without a configured CA, peers are verified against the system roots.
            let tls = self.tls.clone().unwrap_or_else(|| ClientTlsConfig::new().with_enabled_roots());
            endpoint = endpoint.tls_config(tls).ok()?;
        }
        let channel = endpoint.connect_lazy();
        channels.insert(url.to_owned(), channel.clone());
        Some(channel)
    }

    fn request<T>(&self, body: T, method: &str, digest: &[u8; 32]) -> Option<Request<T>> {
        let secret = self.secret.as_deref()?;
        let mut request = Request::new(body);
        request.set_timeout(CALL_TIMEOUT);
        let token = peer_auth::token(secret.as_bytes(), baton_proto::clock::unix_seconds(), method, digest);
        request.metadata_mut().insert(peer_auth::METADATA_KEY, token.parse().ok()?);
        baton_proto::trace::inject(request.metadata_mut());
        Some(request)
    }

    async fn stop(&self, url: &str, worker_id: &str, attempt: AttemptRef, reason: StopReason) -> bool {
        let body = DeliverCancelRequest {
            worker_id: worker_id.to_owned(),
            execution_id: attempt.execution_id.into_string(),
            attempt: attempt.attempt,
            reason: convert::stop_reason(reason) as i32,
        };
        let digest = cancel_digest(&body);
        let (Some(channel), Some(request)) = (self.channel(url), self.request(body, CANCEL, &digest)) else {
            return false;
        };
        let mut client = PeerClient::new(channel);
        let call = client.deliver_cancel(request);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(r)) => r.into_inner().delivered,
            _ => false,
        }
    }

    async fn answer(&self, url: &str, worker_id: &str, m: InputAnswer) -> bool {
        let body = DeliverInputRequest {
            worker_id: worker_id.to_owned(),
            execution_id: m.attempt.execution_id.into_string(),
            attempt: m.attempt.attempt,
            remote_key: m.remote_key,
            action: convert::input_action(&m.action) as i32,
            content_json: m.content_json,
        };
        let digest = input_digest(&body);
        let (Some(channel), Some(request)) = (self.channel(url), self.request(body, INPUT, &digest)) else {
            return false;
        };
        let mut client = PeerClient::new(channel);
        let call = client.deliver_input(request);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(r)) => r.into_inner().delivered,
            _ => false,
        }
    }
}

impl PeerLink for Peers {
    fn deliver_stop<'a>(
        &'a self,
        url: &'a str,
        worker_id: &'a str,
        attempt: AttemptRef,
        reason: StopReason,
    ) -> BoxFuture<'a, bool> {
        Box::pin(self.stop(url, worker_id, attempt, reason))
    }

    fn deliver_answer<'a>(&'a self, url: &'a str, worker_id: &'a str, answer: InputAnswer) -> BoxFuture<'a, bool> {
        Box::pin(self.answer(url, worker_id, answer))
    }
}
