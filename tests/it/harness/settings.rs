//! The knobs of a test cluster.

/// Knobs a test may turn; the rest are fast defaults for tests.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub principal_concurrency: u64,
    pub project_concurrency: u64,
    pub organization_concurrency: u64,
    pub backlog: u64,
    pub retained_payload_bytes: u64,
    pub lease_ms: u64,
    pub owner_loss_grace_ms: u64,
    /// A Redis of the test's own (to stop it mid-test); the shared one otherwise.
    pub redis_url: Option<String>,
    /// Seed nodes of a Redis Cluster of the test's own, in place of any URL.
    pub redis_cluster_nodes: Vec<String>,
    /// A Postgres server of the test's own (to restart it mid-test), as an admin
    /// URL naming a database to connect to; the shared one otherwise.
    pub postgres_url: Option<String>,
    /// A streaming replica of `postgres_url`'s server, as an admin URL naming
    /// a database: coordinators read history from it (`database.read_replica_url`).
    pub read_replica_url: Option<String>,
    pub read_replica_max_lag_ms: u64,
    /// Every process exports spans here (OTLP/gRPC).
    pub otlp_endpoint: Option<String>,
    /// TLS on every gRPC hop with client certificates required (mTLS): a
    /// throwaway CA and certificates under the cluster's directory, and
    /// `https://` coordinator URLs.
    pub tls: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            principal_concurrency: 10_000,
            project_concurrency: 10_000,
            organization_concurrency: 10_000,
            backlog: 10_000,
            retained_payload_bytes: 1 << 30,
            // Generous enough that a loaded CI machine never misses a heartbeat;
            // tests about owner loss shorten them.
            lease_ms: 5_000,
            owner_loss_grace_ms: 5_000,
            redis_url: None,
            redis_cluster_nodes: Vec::new(),
            postgres_url: None,
            read_replica_url: None,
            read_replica_max_lag_ms: 5_000,
            otlp_endpoint: None,
            tls: false,
        }
    }
}
