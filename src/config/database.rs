//! The `database` section: the Postgres (or SQLite) truth, and an optional
//! streaming replica for the heavy reads. Read by coordinators and `baton migrate`.

use super::{Error, field};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Database {
    pub url: Option<String>,
    pub max_connections: u32,
    /// A streaming replica of `url` (Postgres) for the heavy reads: history,
    /// counts, the dashboard's run pages and the audit log.
    pub read_replica_url: Option<String>,
    /// Further behind than this (or unreachable), the replica is not read.
    pub read_replica_max_lag_ms: i64,
}

impl Default for Database {
    fn default() -> Self {
        Database { url: None, max_connections: 32, read_replica_url: None, read_replica_max_lag_ms: 5_000 }
    }
}

impl Database {
    pub(super) fn validate(&self) -> Result<(), Error> {
        if self.read_replica_max_lag_ms <= 0 {
            return Err(field("database.read_replica_max_lag_ms", "must be a positive integer"));
        }
        let postgres = |u: &str| u.starts_with("postgres://") || u.starts_with("postgresql://");
        if self.read_replica_url.as_deref().is_some_and(|r| !postgres(r) || !self.url.as_deref().is_some_and(postgres))
        {
            return Err(field(
                "database.read_replica_url",
                "must be a postgres:// streaming replica of a postgres:// database.url",
            ));
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
    fn a_read_replica_follows_a_postgres_primary() {
        let c = load("database:\n  url: postgres://p/baton\n  read_replica_url: postgres://r/baton\n").expect("valid");
        assert_eq!(c.database.read_replica_url.as_deref(), Some("postgres://r/baton"));
        assert_eq!(c.database.read_replica_max_lag_ms, 5_000, "the default bound");
        let err =
            load("database:\n  url: sqlite://x.db\n  read_replica_url: postgres://r/baton\n").expect_err("sqlite");
        assert!(err.to_string().contains("database.read_replica_url"), "{err}");
        let err = load("database:\n  url: postgres://p/b\n  read_replica_url: mysql://r/b\n").expect_err("scheme");
        assert!(err.to_string().contains("database.read_replica_url"), "{err}");
        let err = load("database:\n  read_replica_max_lag_ms: 0\n").expect_err("zero");
        assert!(err.to_string().contains("database.read_replica_max_lag_ms"), "{err}");
    }
}
