//! How the coordinator reaches Redis: one node, or a Redis Cluster named by
//! seed nodes. Both give one connection type to the code above, so admission
//! and signals are written once. Reconnection, slot discovery and MOVED/ASK
//! redirects are the client library's; nothing here retries by hand.
//!
//! On a cluster, a command (or script) must keep to one hash slot: admission
//! puts every key of one decision under one hash tag (`admission::redis`).

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
const RECONNECT_ATTEMPTS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(3).expect("non-zero");

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
pub enum Link {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Link {
    pub async fn connect(target: &Target) -> RedisResult<Link> {
        match target {
            Target::Node(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT));
                Ok(Link::Node(ConnectionManager::new_with_config(client, config).await?))
            }
            Target::Cluster(nodes) => {
                let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT)
                    // A node that stays unreachable is dropped, and its slots are
                    // looked up again: how the client finds the replica that took
                    // over from a dead master (left alone, it would redial the dead
                    // one forever and never ask the cluster who serves its slots).
                    .max_connection_attempts(RECONNECT_ATTEMPTS)
                    .build()?;
                Ok(Link::Cluster(client.get_async_connection().await?))
            }
        }
    }
}

/// A subscription for signals. Classic pub/sub reaches every node of a
/// cluster (a message published on one is forwarded over the cluster bus to
/// all), so one subscription to any reachable node hears every replica's
/// signals; when that node goes, the caller subscribes again and the next
/// seed that answers takes over.
pub async fn subscribe(target: &Target, channels: &[&str]) -> RedisResult<PubSub> {
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
            Link::Cluster(c) => c.req_packed_command(cmd),
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
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Node(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}
