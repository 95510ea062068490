//! How the coordinator reaches Redis: one node, or a Redis Cluster named by
//! seed nodes. Both give one connection type to the code above, so admission
//! and signals are written once. Reconnection, slot discovery and MOVED/ASK
//! redirects are the client library's; nothing here retries by hand.
//!
//! On a cluster, a command (or script) must keep to one hash slot: admission
//! puts every key of one decision under one hash tag (`admission::redis`).
//!
//! One exception to "the library's": a cluster client whose slot refresh
//! never finishes after a failover (seen with redis 2.0.0-rc.2 under load:
//! every later call times out, for good) is replaced. When calls have failed
//! for `STUCK_AFTER` with no success between, the next failure builds a new
//! cluster client from the seeds and the calls after it use that one.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
const RECONNECT_ATTEMPTS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(3).expect("non-zero");
/// Failing this long with no success between, a cluster client is replaced;
/// well past a failover the client handles itself (about 2 s).
const STUCK_AFTER: Duration = Duration::from_secs(10);

/// Where Redis is, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `redis.url`: one server (with or without replicas behind a proxy).
    Node(String),
    /// `redis.cluster_nodes`: seed nodes of a Redis Cluster; the client finds the rest.
    Cluster(Vec<String>),
}

/// A connection to either; cheap to clone (both share one multiplexed link).
#[derive(Clone)]
pub(crate) enum Link {
    Node(ConnectionManager),
    Cluster(Arc<Healing>),
}

impl Link {
    pub(crate) async fn connect(target: &Target) -> RedisResult<Link> {
        match target {
            Target::Node(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT));
                Ok(Link::Node(ConnectionManager::new_with_config(client, config).await?))
            }
            Target::Cluster(nodes) => {
                let conn = cluster_connection(nodes).await?;
                Ok(Link::Cluster(Arc::new(Healing {
                    seeds: nodes.clone(),
                    conn: Mutex::new(conn),
                    failing_since: Mutex::new(None),
                    replacing: tokio::sync::Mutex::new(()),
                })))
            }
        }
    }
}

async fn cluster_connection(nodes: &[String]) -> RedisResult<ClusterConnection> {
    let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        // A node that stays unreachable is dropped, and its slots are
        // looked up again: how the client finds the replica that took
        // over from a dead master (left alone, it would redial the dead
        // one forever and never ask the cluster who serves its slots).
        .max_connection_attempts(RECONNECT_ATTEMPTS)
        .build()?;
    client.get_async_connection().await
}

/// A cluster client that is replaced when it stays stuck (see the module doc).
pub(crate) struct Healing {
    seeds: Vec<String>,
    conn: Mutex<ClusterConnection>,
    /// When the current run of failures began; `None` after a success.
    failing_since: Mutex<Option<Instant>>,
    /// Held while a replacement is built, so concurrent failures build one.
    replacing: tokio::sync::Mutex<()>,
}

impl Healing {
    fn current(&self) -> ClusterConnection {
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Notes a call's outcome; after `STUCK_AFTER` of failures only, replaces
    /// the client (one replacement at a time; a failed one is tried again on
    /// a later failure).
    async fn observe<T>(&self, result: &RedisResult<T>) {
        let stuck = {
            let mut since = self.failing_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // A reply (an error one included) is the cluster answering.
            let unanswered = result.as_ref().err().is_some_and(|e| {
                e.is_timeout() || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
            });
            match (unanswered, *since) {
                (false, _) => {
                    *since = None;
                    false
                }
                (true, None) => {
                    *since = Some(Instant::now());
                    false
                }
                (true, Some(at)) => at.elapsed() >= STUCK_AFTER,
            }
        };
        if !stuck {
            return;
        }
        let Ok(_one) = self.replacing.try_lock() else { return };
        let built = tokio::time::timeout(CONNECT_TIMEOUT * 2, cluster_connection(&self.seeds)).await;
        match built {
            Ok(Ok(conn)) => {
                *self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = conn;
                *self.failing_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                tracing::warn!("the Redis Cluster client failed for {STUCK_AFTER:?}; replaced it with a new one");
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "replacing a stuck Redis Cluster client failed; retried"),
            Err(_) => tracing::warn!("replacing a stuck Redis Cluster client timed out; retried"),
        }
    }
}

/// A subscription for signals. Classic pub/sub reaches every node of a
/// cluster (a message published on one is forwarded over the cluster bus to
/// all), so one subscription to any reachable node hears every replica's
/// signals; when that node goes, the caller subscribes again and the next
/// seed that answers takes over.
pub(crate) async fn subscribe(target: &Target, channels: &[&str]) -> RedisResult<PubSub> {
    let urls: Vec<&str> = match target {
        Target::Node(url) => vec![url.as_str()],
        Target::Cluster(nodes) => nodes.iter().map(String::as_str).collect(),
    };
    let mut last: Option<RedisError> = None;
    for url in urls {
        let attempt = async {
            let mut pubsub = redis::Client::open(url)?.get_async_pubsub().await?;
            pubsub.subscribe(channels).await?;
            Ok::<_, RedisError>(pubsub)
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(pubsub)) => return Ok(pubsub),
            Ok(Err(e)) => last = Some(e),
            Err(_) => last = Some(RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))),
        }
    }
    Err(last.unwrap_or_else(|| RedisError::from(std::io::Error::from(std::io::ErrorKind::NotFound))))
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Node(c) => c.req_packed_command(cmd),
            Link::Cluster(h) => Box::pin(async move {
                let result = h.current().req_packed_command(cmd).await;
                h.observe(&result).await;
                result
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Node(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(h) => Box::pin(async move {
                let result = h.current().req_packed_commands(pipeline, offset, count).await;
                h.observe(&result).await;
                result
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Node(c) => c.get_db(),
            Link::Cluster(h) => h.current().get_db(),
        }
    }
}
