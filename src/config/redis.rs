//! The `redis` section: one server (`url`) or a Redis Cluster
//! (`cluster_nodes`), and the prefix of every key. Read by coordinators.

use super::{Error, field};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Redis {
    /// One Redis server.
    pub url: Option<String>,
    /// Seed nodes of a Redis Cluster (`redis://host:port/`); the client finds
    /// the rest. Exclusive with `url`.
    pub cluster_nodes: Vec<String>,
    pub key_prefix: String,
}

impl Default for Redis {
    fn default() -> Self {
        Redis { url: None, cluster_nodes: Vec::new(), key_prefix: "baton".into() }
    }
}

impl Redis {
    /// Where Redis is, if configured: one node, or a cluster by its seeds.
    pub(crate) fn target(&self) -> Option<baton_coordinator::redis_link::Target> {
        use baton_coordinator::redis_link::Target;
        match (&self.url, self.cluster_nodes.is_empty()) {
            (Some(url), _) => Some(Target::Node(url.clone())),
            (None, false) => Some(Target::Cluster(self.cluster_nodes.clone())),
            (None, true) => None,
        }
    }

    pub(super) fn validate(&self) -> Result<(), Error> {
        if self.url.is_some() && !self.cluster_nodes.is_empty() {
            return Err(field(
                "redis.cluster_nodes",
                "names a Redis Cluster, and redis.url one server: configure one of them",
            ));
        }
        if let Some(bad) = self.cluster_nodes.iter().find(|n| !n.starts_with("redis://") && !n.starts_with("rediss://"))
        {
            // The value may carry a password: say which entry, not what it holds.
            let at = self.cluster_nodes.iter().position(|n| n == bad).unwrap_or(0);
            return Err(field("redis.cluster_nodes", format!("entry {at} must be a redis:// or rediss:// URL")));
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            // A brace would make the prefix the hash tag of every key on a cluster.
            return Err(field("redis.key_prefix", "must be non-empty and may not contain '{' or '}'"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    fn load(yaml: &str) -> Result<super::super::Config, super::Error> {
        super::super::tests::load(yaml, &[])
    }

    #[test]
    fn cluster_nodes_name_a_cluster() {
        use baton_coordinator::redis_link::Target;
        let c = load("redis:\n  cluster_nodes: [redis://10.0.0.1:7000/, redis://10.0.0.2:7000/]\n").expect("valid");
        let seeds = vec!["redis://10.0.0.1:7000/".to_owned(), "redis://10.0.0.2:7000/".to_owned()];
        assert_eq!(c.redis.target(), Some(Target::Cluster(seeds)));
        let c = load("redis:\n  url: redis://10.0.0.1:6379/\n").expect("valid");
        assert_eq!(c.redis.target(), Some(Target::Node("redis://10.0.0.1:6379/".into())));
        assert_eq!(load("").expect("valid").redis.target(), None);
    }

    #[test]
    fn naming_both_a_server_and_a_cluster_is_refused() {
        let err = load("redis:\n  url: redis://a:6379/\n  cluster_nodes: [redis://b:7000/]\n").expect_err("both");
        assert!(err.to_string().contains("redis.cluster_nodes"), "{err}");
    }

    #[test]
    fn a_seed_that_is_not_a_redis_url_is_refused_without_echoing_it() {
        let err = load("redis:\n  cluster_nodes: [redis://b:7000/, 'http://user:s3cret@c:7000/']\n").expect_err("bad");
        let text = err.to_string();
        assert!(text.contains("entry 1"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn a_prefix_with_a_brace_is_refused() {
        // On a cluster the brace would put every key in one slot.
        let err = load("redis:\n  key_prefix: 'a{b}'\n").expect_err("brace");
        assert!(err.to_string().contains("redis.key_prefix"), "{err}");
    }
}
