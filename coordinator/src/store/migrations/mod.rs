//! The schema's migrations: the files this binary carries (`embedded.rs`),
//! what the database recorded (`ledger.rs`), applying the pending ones under
//! a lock and a statement timeout (`run.rs`, decision 0046) and saying what
//! applying would do without doing it (`plan.rs`).
//!
//! A migration waiting for a lock holds its place in the lock queue, and
//! every statement on that table that arrives after it queues behind it: with
//! no bound, one long transaction stops the service for as long as it lasts.
//! Under `lock_timeout` the migration gives up instead, and since it runs in
//! one transaction nothing of it remains, so it can simply run again.

mod embedded;
mod ledger;
mod plan;
mod run;
mod statements;
#[cfg(test)]
mod tests;

pub use plan::{MigrationPlan, PendingMigration};

use super::{Dialect, Store};
use std::fmt;
use std::time::Duration;

/// How migrations are applied.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// How long one statement may wait for a lock (Postgres `lock_timeout`).
    pub lock_timeout: Duration,
    /// How long one statement may run (Postgres `statement_timeout`).
    pub statement_timeout: Duration,
    /// Stop after this version (tests building an older schema).
    pub up_to: Option<i64>,
}

impl Default for MigrateOptions {
    /// Five seconds of lock wait is what the requests queued behind a waiting
    /// migration may lose, about the pool's own acquire timeout; five minutes
    /// of statement keeps a statement inside the Helm hook Job's ten-minute
    /// deadline, since Postgres does not notice a killed client mid-statement
    /// and would hold the statement's locks on.
    fn default() -> Self {
        MigrateOptions {
            lock_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(300),
            up_to: None,
        }
    }
}

/// A migration by its number and name (`0021 add_column`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationName {
    pub version: i64,
    pub name: String,
}

impl MigrationName {
    fn of(m: &sqlx::migrate::Migration) -> MigrationName {
        MigrationName { version: m.version, name: m.description.to_string() }
    }
}

impl fmt::Display for MigrationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04} {}", self.version, self.name)
    }
}

fn names(list: &[MigrationName]) -> String {
    list.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn rerun(transactional: &bool) -> &'static str {
    if *transactional {
        "Nothing of it was applied (it runs in one transaction), so it is safe to run `baton migrate` again"
    } else {
        "It runs without a transaction: the statements before the stopped one took effect, and running \
         `baton migrate` again runs it from its first statement (such a migration is written to be rerun)"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error(
        "migration {migration} waited longer than lock_timeout ({} ms) for a lock that another transaction \
         holds, and gave up. {}; end or wait out the long transaction first (pg_stat_activity shows it).",
        lock_timeout.as_millis(), rerun(transactional)
    )]
    LockTimeout { migration: MigrationName, lock_timeout: Duration, transactional: bool },
    #[error(
        "migration {migration}: a statement ran longer than statement_timeout ({} ms) and was cancelled. {}; \
         raise database.migrations.statement_timeout_ms if the statement needs longer.",
        statement_timeout.as_millis(), rerun(transactional)
    )]
    StatementTimeout { migration: MigrationName, statement_timeout: Duration, transactional: bool },
    #[error("migration {migration} failed: {source}")]
    Failed { migration: MigrationName, source: sqlx::Error },
    #[error(
        "the database has migration(s) {} that this baton ({}, migrations up to {newest_known:04}) does not know: \
         a newer baton migrated it. Run the newer baton; this one would misread its schema.",
        names(unknown), env!("CARGO_PKG_VERSION")
    )]
    NewerSchema { unknown: Vec<MigrationName>, newest_known: i64 },
    #[error(
        "migration {0} is recorded as failed part way; repair the schema by hand and delete its row from _sqlx_migrations"
    )]
    Dirty(MigrationName),
    #[error(
        "migration {0} differs from the text the database applied (its checksum changed): a released migration \
         file must never change; restore it and put the change in a new migration"
    )]
    Changed(MigrationName),
    #[error("database error while migrating: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database error while migrating: {0}")]
    Ledger(#[from] sqlx::migrate::MigrateError),
}

impl MigrationError {
    /// A lock another transaction held: worth trying again once it ends.
    pub fn is_lock_timeout(&self) -> bool {
        matches!(self, MigrationError::LockTimeout { .. })
    }
}

impl Store {
    /// Applies the pending migrations of this backend with the default timeouts.
    pub async fn migrate(&self) -> super::Result<()> {
        self.apply_migrations(&MigrateOptions::default()).await?;
        Ok(())
    }

    /// Applies the pending migrations (up to `options.up_to`), each under the
    /// timeouts on Postgres; answers the ones it applied.
    pub async fn apply_migrations(&self, options: &MigrateOptions) -> Result<Vec<MigrationName>, MigrationError> {
        let known = embedded::migrations(self.dialect);
        match self.dialect {
            Dialect::Postgres => {
                // A connection of its own, closed after: the session's
                // timeouts and the migrator's advisory lock end with it, even
                // when a migration failed part way.
                let mut conn = self.pool.acquire().await?.detach();
                let applied = run::apply(&mut conn, self.dialect, &known, options).await;
                let _ = sqlx::Connection::close(conn).await;
                applied
            }
            // SQLite's one pooled connection may be the only handle on an
            // in-memory database; no session setting is made on it.
            Dialect::Sqlite => run::apply(&mut *self.pool.acquire().await?, self.dialect, &known, options).await,
        }
    }

    /// What `apply_migrations` would do, without writing anything.
    pub async fn migration_plan(&self, options: &MigrateOptions) -> Result<MigrationPlan, MigrationError> {
        let known = embedded::migrations(self.dialect);
        plan::read(&mut *self.pool.acquire().await?, self.dialect, &known, options).await
    }
}
