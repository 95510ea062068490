//! Everything a coordinator needs to run, already validated by the binary's config loader.

use crate::admission::Bounds;
use crate::crypto::KeyRing;
use crate::domain::Lifetime;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct Options {
    /// Unique per process; names this replica in the worker directory.
    pub id: String,
    /// How peers reach this replica's gRPC port (cancel delivery).
    pub advertise_url: String,
    pub database_url: String,
    pub database_max_connections: u32,
    /// A streaming replica of the database for the heavy reads (history,
    /// audit log), used while it is at most `read_replica_max_lag_ms` behind.
    pub read_replica_url: Option<String>,
    pub read_replica_max_lag_ms: i64,
    /// Cluster mode when set: admission and wake-ups go through Redis (one
    /// node or a Redis Cluster).
    pub redis: Option<crate::redis_link::Target>,
    pub redis_prefix: String,
    pub key_ring: Arc<KeyRing>,
    pub lifetime: Lifetime,
    pub bounds: Bounds,
    /// A worker lease lasts this long without a heartbeat.
    pub lease_ms: i64,
    /// After a lease lapses, how long until the execution fails `owner_lost`.
    pub owner_loss_grace_ms: i64,
    pub poll_interval_ms: i64,
    pub sweep_interval_ms: u64,
    /// Largest accepted tool input, in bytes.
    pub max_input_bytes: usize,
    /// How often cluster admission is re-derived from Postgres.
    pub admission_rebuild_ms: u64,
    /// Apply migrations at start (`baton dev`).
    pub migrate: bool,
    /// The cluster credential for the `Peer` service; without it no peer call
    /// is accepted (one replica needs none).
    pub cluster_secret: Option<String>,
    /// Declared worker capacities are clamped to this.
    pub max_worker_capacity: u32,
    /// Bounds on what a worker may declare about a tool.
    pub tool_limits: ToolLimits,
    /// How long a dashboard session lives.
    pub dashboard: DashboardSessions,
    /// Serve gRPC over TLS with this identity (and, when it names a client CA,
    /// verify client certificates: mTLS). `None` serves plaintext.
    pub server_tls: Option<tonic::transport::ServerTlsConfig>,
    /// How this replica dials an `https://` peer (its `advertise_url`): the CA
    /// that verifies peers and this replica's client identity. `None` trusts
    /// the system roots; unused for `http://` peers.
    pub client_tls: Option<tonic::transport::ClientTlsConfig>,
    /// Lifecycle webhooks: target policy, retries, delivery.
    pub webhooks: crate::webhooks::Options,
    /// The OpenID provider people sign in to the dashboard with, if any.
    pub oidc: Option<Arc<crate::oidc::Provider>>,
}

impl Options {
    /// A coordinator alone in its process, reached by nobody over the network:
    /// no Redis, no read replica, no TLS, an hour of lifetime and retention.
    /// For engines built in process (the engine's tests, the simulation).
    pub fn in_process(id: &str, key_ring: Arc<KeyRing>, bounds: Bounds) -> Options {
        Options {
            id: id.to_owned(),
            advertise_url: format!("in-process://{id}"),
            database_url: String::new(),
            database_max_connections: 1,
            redis: None,
            read_replica_url: None,
            read_replica_max_lag_ms: 5_000,
            redis_prefix: String::new(),
            key_ring,
            lifetime: Lifetime { max_ttl_ms: 3_600_000, retention_ms: 3_600_000 },
            bounds,
            lease_ms: 30_000,
            owner_loss_grace_ms: 30_000,
            poll_interval_ms: 1_000,
            sweep_interval_ms: 1_000,
            max_input_bytes: 1 << 16,
            admission_rebuild_ms: 30_000,
            migrate: false,
            cluster_secret: None,
            max_worker_capacity: 8,
            tool_limits: ToolLimits::default(),
            dashboard: DashboardSessions::default(),
            server_tls: None,
            client_tls: None,
            webhooks: crate::webhooks::Options::default(),
            oidc: None,
        }
    }
}

/// The largest tool description and input schema a worker may register.
/// Every caller's `tools/list` carries them, so an unbounded one costs every
/// caller (a 3 MB description made every list 3 MB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolLimits {
    pub max_description_bytes: usize,
    pub max_schema_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits { max_description_bytes: 16 << 10, max_schema_bytes: 64 << 10 }
    }
}

/// How long a dashboard session lives: `idle_ms` since its last use, and
/// `lifetime_ms` since sign-in at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DashboardSessions {
    pub idle_ms: i64,
    pub lifetime_ms: i64,
}

impl Default for DashboardSessions {
    fn default() -> Self {
        DashboardSessions { idle_ms: 30 * 60_000, lifetime_ms: 8 * 3_600_000 }
    }
}
