//! The coordinator: authorization, admission, the execution state machine and its
//! durable record, worker sessions and dispatch. The only process with database
//! and Redis credentials.

pub mod admin;
pub mod admission;
pub mod audit;
pub mod authz;
pub mod crypto;
pub mod engine;
pub mod grpc;
mod notify;
pub mod oidc;
pub mod options;
pub mod payload_keys;
pub mod people;
pub mod redis_link;
mod revocations;
pub(crate) mod schema;
pub mod store;
pub mod webhooks;

/// The pure core, its own crate so that it cannot reach for I/O.
pub use baton_domain as domain;
pub use options::Options;

use admission::Admission;
use baton_proto::coordinator::v1::{
    coordinator_server::CoordinatorServer, history_server::HistoryServer, operator_server::OperatorServer,
    peer_server::PeerServer, project_admin_server::ProjectAdminServer, webhooks_server::WebhooksServer,
};
use baton_proto::worker::v1::worker_session_server::WorkerSessionServer;
use engine::{Bus, Engine};
use grpc::skew::GatewayVersion;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("serving grpc: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("grpc tls: {0}")]
    Tls(String),
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
    #[error("admission: {0}")]
    Admission(String),
    /// The ring lacks a key that seals retained values: a configuration error.
    #[error(
        "security.execution_payload_keys lacks key id(s) {}, which still seal retained payloads: put them back in the \
         ring (after the first key), run `{}` with that configuration, then remove them",
        quoted(.0), payload_keys::REWRAP_COMMAND
    )]
    MissingPayloadKeys(Vec<String>),
}

impl Error {
    /// Whether the configuration is at fault (the process exits with 64, as
    /// for any other configuration error).
    pub fn is_configuration(&self) -> bool {
        matches!(self, Error::MissingPayloadKeys(_))
    }
}

fn quoted(ids: &[String]) -> String {
    ids.iter().map(|id| format!("{id:?}")).collect::<Vec<_>>().join(", ")
}

/// Builds the engine: connects the store (migrating if asked), admission and the bus.
pub(crate) async fn engine(options: Options, shutdown: CancellationToken) -> Result<Arc<Engine>, Error> {
    let mut store = store::Store::connect(&options.database_url, options.database_max_connections).await?;
    if options.migrate {
        store.migrate().await?;
    }
    if let Some(url) = &options.read_replica_url {
        store = store.with_read_replica(url, options.database_max_connections, options.read_replica_max_lag_ms)?;
    }
    store.ping().await?;
    let missing = payload_keys::check_ring(&store, &options.key_ring, baton_proto::clock::now_ms()).await?;
    if !missing.is_empty() {
        return Err(Error::MissingPayloadKeys(missing));
    }
    let bus = match &options.redis {
        Some(target) => Bus::redis(target, &options.redis_prefix, &options.id).await?,
        None => Bus::Local,
    };
    let (admission, cluster_admission): (Arc<dyn Admission>, _) = match &options.redis {
        Some(target) => {
            let redis = Arc::new(
                admission::redis::RedisAdmission::connect(target, &options.redis_prefix, options.bounds)
                    .await
                    .map_err(|e| Error::Admission(e.to_string()))?,
            );
            (redis.clone(), Some(redis))
        }
        None => (Arc::new(admission::memory::MemoryAdmission::new(options.bounds)), None),
    };
    let peers = Arc::new(grpc::peer::Peers::new(options.cluster_secret.clone(), options.client_tls.clone()));
    Ok(Engine::new(engine::Parts { store, admission, cluster_admission, bus, peers, options, shutdown }))
}

/// Serves the coordinator's gRPC services on `listener` until `shutdown` fires.
pub async fn run(options: Options, listener: TcpListener, shutdown: CancellationToken) -> Result<(), Error> {
    let server = server(&options)?;
    let engine = engine(options, shutdown.clone()).await?;
    engine.prepare().await.map_err(|e| Error::Admission(e.to_string()))?;
    engine.start_background();

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("", tonic_health::ServingStatus::Serving).await;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, coordinator_id = %engine.options().id, version = %grpc::skew::own(), "coordinator listening");
    // Small frames must not wait for the peer's delayed ACK (Nagle): the
    // builder's `tcp_nodelay` only covers listeners tonic binds itself.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let served = server
        .layer(grpc::measure::RpcMetricsLayer::new())
        .add_service(health_service)
        // The gateway-facing services admit gateways by version first (`grpc::skew`);
        // a worker states its version in its registration, a peer coordinator none.
        .add_service(CoordinatorServer::with_interceptor(grpc::api::Api { engine: engine.clone() }, GatewayVersion))
        .add_service(HistoryServer::with_interceptor(
            grpc::history::HistoryService { engine: engine.clone() },
            GatewayVersion,
        ))
        .add_service(OperatorServer::with_interceptor(
            grpc::operator::OperatorService { engine: engine.clone() },
            GatewayVersion,
        ))
        .add_service(ProjectAdminServer::with_interceptor(
            grpc::admin::ProjectAdminService { engine: engine.clone() },
            GatewayVersion,
        ))
        .add_service(WebhooksServer::with_interceptor(
            grpc::webhooks::WebhooksService { engine: engine.clone() },
            GatewayVersion,
        ))
        .add_service(WorkerSessionServer::new(grpc::worker::WorkerService { engine: engine.clone() }))
        .add_service(PeerServer::new(grpc::peer::PeerService::new(engine.clone())))
        // Waiting at scale (issue #21).
        .add_service(baton_proto::coordinator::v1::waits_server::WaitsServer::with_interceptor(
            grpc::waits::WaitsService { engine: engine.clone() },
            GatewayVersion,
        ))
        .serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned())
        .await;
    engine.stopped().await;
    served?;
    Ok(())
}

/// HTTP/2 receive window per connection. h2 drops a connection (GOAWAY
/// `too_many_data_frames`) once small DATA frames it holds unread use up a
/// budget of half this window; a gateway opening 10,000 waits at once sends
/// that many small requests, which at hyper's default (1 MiB) cost the
/// connection and every call on it. 4 MiB holds about 15,000.
const CONNECTION_WINDOW: u32 = 4 << 20;

/// The gRPC server: TLS (and client-certificate checks) when configured, and
/// HTTP/2 keepalive so a client that vanished without closing (a partition, a
/// dead host) is noticed within one lease: a ping after a third of a lease
/// without a frame, the connection dropped when the answer takes another third.
fn server(options: &Options) -> Result<tonic::transport::Server, Error> {
    let keepalive = keepalive(options.lease_ms);
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(keepalive))
        .http2_keepalive_timeout(Some(keepalive))
        .initial_connection_window_size(Some(CONNECTION_WINDOW));
    match options.server_tls.clone() {
        Some(tls) => server.tls_config(tls).map_err(|e| Error::Tls(baton_proto::error::with_sources(&e))),
        None => Ok(server),
    }
}

/// The server's HTTP/2 keepalive interval and ack timeout for a lease: a third
/// of it, at least 2 s (a ping must not be lost to a busy scheduler) and at
/// most 20 s.
fn keepalive(lease_ms: i64) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(lease_ms / 3).unwrap_or(0).clamp(2_000, 20_000))
}
