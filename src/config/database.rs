//! The `database` section: the Postgres (or SQLite) truth, and an optional
//! streaming replica for the heavy reads. Read by coordinators and `baton migrate`.

use super::{Error, field};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Database {
    pub url: Option<String>,
    /// The coordinator's pool; its hot path (creates, settlements) opens up
    /// to half as many more connections, planned once (Postgres).
    pub max_connections: u32,
    /// A streaming replica of `url` (Postgres) for the heavy reads: history,
    /// counts, the dashboard's run pages and the audit log.
    pub read_replica_url: Option<String>,
    /// Further behind than this (or unreachable), the replica is not read.
    pub read_replica_max_lag_ms: i64,
    /// How `baton migrate` applies the schema (decision 0046).
    pub migrations: Migrations,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Migrations {
    /// How long a migration's statement may wait for a lock before the
    /// migration gives up (Postgres `lock_timeout`): what the requests queued
    /// behind it may lose.
    pub lock_timeout_ms: u64,
    /// How long one statement of a migration may run (Postgres `statement_timeout`).
    pub statement_timeout_ms: u64,
    /// How many more times a migration that gave up on a lock is tried.
    pub lock_retries: u32,
    /// The wait before the first retry, doubled before each next one.
    pub retry_backoff_ms: u64,
}

impl Default for Migrations {
    fn default() -> Self {
        let defaults = baton_coordinator::store::MigrateOptions::default();
        Migrations {
            lock_timeout_ms: millis(defaults.lock_timeout),
            statement_timeout_ms: millis(defaults.statement_timeout),
            lock_retries: 4,
            retry_backoff_ms: 2_000,
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Migrations {
    pub(crate) fn options(&self) -> baton_coordinator::store::MigrateOptions {
        baton_coordinator::store::MigrateOptions {
            lock_timeout: std::time::Duration::from_millis(self.lock_timeout_ms),
            statement_timeout: std::time::Duration::from_millis(self.statement_timeout_ms),
            up_to: None,
        }
    }

    fn validate(&self) -> Result<(), Error> {
        // Zero would mean no limit at all in Postgres: the wait this bounds.
        for (name, ms, max) in [
            ("database.migrations.lock_timeout_ms", self.lock_timeout_ms, 600_000),
            ("database.migrations.statement_timeout_ms", self.statement_timeout_ms, 86_400_000),
            ("database.migrations.retry_backoff_ms", self.retry_backoff_ms, 600_000),
        ] {
            if !(1..=max).contains(&ms) {
                return Err(field(name, format!("must be 1 to {max}")));
            }
        }
        if self.lock_retries > 100 {
            return Err(field("database.migrations.lock_retries", "must be 0 to 100"));
        }
        Ok(())
    }
}

impl Default for Database {
    fn default() -> Self {
        Database {
            url: None,
            max_connections: 32,
            read_replica_url: None,
            read_replica_max_lag_ms: 5_000,
            migrations: Migrations::default(),
        }
    }
}

impl Database {
    pub(super) fn validate(&self) -> Result<(), Error> {
        self.migrations.validate()?;
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

    #[test]
    fn migration_timeouts_are_bounded_and_never_zero() {
        let c = load("").expect("defaults");
        assert_eq!(
            (c.database.migrations.lock_timeout_ms, c.database.migrations.statement_timeout_ms),
            (5_000, 300_000)
        );
        let c = load("database:\n  migrations:\n    lock_timeout_ms: 250\n    lock_retries: 0\n").expect("valid");
        assert_eq!(c.database.migrations.options().lock_timeout, std::time::Duration::from_millis(250));
        for bad in ["lock_timeout_ms: 0", "statement_timeout_ms: 0", "lock_retries: 101", "retry_backoff_ms: 0"] {
            let err = load(&format!("database:\n  migrations:\n    {bad}\n")).expect_err(bad);
            let key = bad.split(':').next().unwrap_or_default();
            assert!(err.to_string().contains(&format!("database.migrations.{key}")), "{err}");
        }
    }
}
