//! Durable state on Postgres (production) or SQLite (`baton dev`). One SQL
//! implementation over sqlx's `Any` driver: the schema keeps to types both
//! backends share (BIGINT milliseconds, TEXT, bytes), and `Dialect` holds the few
//! statements that differ (row locking). The contract suite in `contract_tests`
//! runs every behaviour against both backends.
//!
//! Owns: SQL, transactions, the event log. Does not own: the rules of a
//! transition (those are `domain::apply`, called inside the transaction here).

mod access;
mod audit;
mod bulk;
mod claimed;
mod create;
mod dashboard_sessions;
mod executions;
mod faults;
mod fence;
mod history;
mod history_counts;
mod history_filter;
mod identity;
mod input;
mod last_written;
mod listing;
mod migrations;
mod operator;
mod padding;
mod partitions;
mod payload_keys;
mod person_sessions;
mod progress;
mod records;
mod replica;
mod retention;
mod role_grants;
mod sweep;
mod tool_owners;
mod watch_tokens;
mod webhooks;
mod write;

#[cfg(test)]
pub(crate) mod contract_tests;
#[cfg(test)]
mod distribution_tests;
#[cfg(test)]
mod history_counts_tests;
#[cfg(test)]
mod history_tests;
#[cfg(test)]
mod partitions_tests;
#[cfg(test)]
mod payload_keys_tests;
#[cfg(test)]
mod settings_tests;
#[cfg(test)]
mod sqlite_tests;
#[cfg(test)]
mod webhooks_tests;
#[cfg(test)]
mod write_tests;

pub(crate) use access::WithTool;
pub(crate) use audit::{AuditEntry, AuditFilter};
pub use bulk::{SeedRun, Seeded, Step};
pub(crate) use claimed::ClaimedNew;
pub(crate) use create::Created;
pub(crate) use executions::{Applied, Claimed, EventRecord, ListFilter};
pub use faults::{CommitFault, Faults};
pub use history::{HistoryRead, HistoryRow};
pub use history_filter::HistoryFilter;
pub(crate) use identity::REVOCATION_CHANNEL;
pub use identity::{Credential, CredentialKind, NewCredential, ToolMetadata, ToolRecord};
pub(crate) use input::InputRequestRow;
pub use migrations::{MigrateOptions, MigrationError, MigrationName, MigrationPlan, PendingMigration};
use padding::{PADDED_UP_TO, padded};
pub(crate) use partitions::AUDIT_PERIOD_MS;
pub use payload_keys::{KeyCounts, Replacement, SEALED_TABLES, SealedRow, SealedTable};
pub use person_sessions::{NewPersonSession, PersonSession};
pub use records::{AttemptRecord, ExecutionRecord, NewExecution, ProgressRecord};
pub(crate) use replica::ReplicaState;
pub(crate) use retention::RetentionSettings;
pub use role_grants::RoleGrantRow;
pub(crate) use sweep::{OpenExecution, SweepReport};
pub(crate) use tool_owners::{OwnedElsewhere, ToolChange};
pub use webhooks::{AttemptOutcome, ClaimedDelivery, DeliveryRecord, EndpointRecord};
pub use write::{EventData, PublishedRequest};

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Transaction};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The commit was sent and no answer came back: it may have been applied.
    #[error("database unavailable; the commit may have been applied: {0}")]
    CommitUnknown(#[source] sqlx::Error),
    /// Too many requests already queued for the database on this replica.
    #[error("too many requests queued")]
    Busy,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Migration(#[from] MigrationError),
    #[error("idempotency key reused for a different request")]
    IdempotencyConflict,
    /// The create was admitted under an admission generation a rebuild has
    /// since moved on from (Redis lost its state meanwhile): nothing was
    /// written; admitted afresh, it may go in.
    #[error("admission was rebuilt since this create was admitted; retry")]
    StaleAdmission,
    /// The credential that started the create was revoked before it could
    /// commit: nothing was written.
    #[error("the credential was revoked")]
    CredentialRevoked,
    /// The tool was disabled before the create could commit: nothing was written.
    #[error("the tool was disabled")]
    ToolDisabled,
    #[error("stored row is corrupt: {0}")]
    Corrupt(String),
    #[error("unsupported database url scheme (expected postgres:// or sqlite://)")]
    UnsupportedUrl,
}

impl Error {
    /// Whether what was asked may have been done all the same: a commit whose
    /// answer was lost. Anything it reserved must stay reserved.
    pub(crate) fn may_have_committed(&self) -> bool {
        matches!(self, Error::CommitUnknown(_))
    }

    /// Whether the failure is the database being out of reach (retryable, 503).
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Unavailable(_) | Error::CommitUnknown(_) | Error::Busy | Error::StaleAdmission => true,
            Error::Database(sqlx::Error::Database(db)) => {
                // Postgres going away: admin shutdown, crash shutdown, not yet
                // accepting (57P0x), or a broken connection (class 08).
                db.code().is_some_and(|c| c.starts_with("57P0") || c.starts_with("08"))
            }
            Error::Database(e) => matches!(
                e,
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed | sqlx::Error::Protocol(_)
            ),
            _ => false,
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    /// Row lock for read-modify-write transactions. SQLite needs none: its pool has
    /// a single connection, so transactions are already serial.
    fn for_update(self) -> &'static str {
        match self {
            Dialect::Postgres => " FOR UPDATE",
            Dialect::Sqlite => "",
        }
    }

    /// Lock for claiming: other coordinators skip rows already being claimed.
    fn for_update_skip_locked(self) -> &'static str {
        match self {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        }
    }
}

/// Statements whose text grows with their batch are kept prepared on their
/// connection up to this batch size: a small batch's text recurs (one row,
/// above all), and kept it costs one round trip where an unnamed statement
/// costs two (parse and describe, then execute). More would churn every
/// connection's statement cache.
const KEPT_UP_TO: usize = 4;

/// How the hot path's connections plan (`Store::hot`): each of its
/// statements is kept prepared and recurs with other values only, so one plan
/// serves every call, its partitions pruned as it starts. Left to choose,
/// Postgres plans these statements over partitioned tables again on every
/// call (a generic plan over every partition looks dearer than a pruned one),
/// which cost a C=1 call a fifth of its Postgres CPU.
///
/// A plan made once is made on the statistics of that moment: a day's
/// partition is empty when a connection first plans over it, and a scan of
/// it or a hash join against it looks cheapest then, and stays in the plan
/// while the partition grows to millions of rows. Every statement on these
/// connections finds its rows by key, so they plan with neither: the plan is
/// the keyed one whatever the statistics said when it was made.
const HOT_PLANS: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), \
    set_config('enable_seqscan', 'off', false), set_config('enable_hashjoin', 'off', false), \
    set_config('enable_mergejoin', 'off', false)";

#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    /// The hot path's own connections, half as many again as `pool` (Postgres;
    /// on SQLite the one pool): creates, settlements' unlocked reads and
    /// writes, and the reads that authenticate a start or an owner's read,
    /// planned once ([`HOT_PLANS`]). The rest, with reads whose best plan
    /// depends on their values (history, listings), keeps Postgres' own choice.
    hot: AnyPool,
    dialect: Dialect,
    /// Where heavy reads go while it is fresh (`replica.rs`).
    replica: Option<std::sync::Arc<replica::Replica>>,
    /// Injected commit faults (the deterministic simulation only).
    faults: Option<std::sync::Arc<dyn Faults>>,
    /// The rows this process last wrote (Postgres; `last_written.rs`).
    last_written: std::sync::Arc<last_written::LastWritten>,
}

impl Store {
    /// Connects to `postgres://…` or `sqlite://…` (the file is created if missing).
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        install_default_drivers();
        let dialect = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Dialect::Postgres
        } else if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else {
            return Err(Error::UnsupportedUrl);
        };
        let options = AnyPoolOptions::new().acquire_timeout(Duration::from_secs(5));
        let (pool, hot) = match dialect {
            Dialect::Postgres => {
                let pool = options.clone().max_connections(max_connections.max(2)).connect(url).await;
                let pool = pool.map_err(Error::Unavailable)?;
                let hot = options
                    .max_connections((max_connections / 2).max(2))
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            use sqlx::Executor as _;
                            conn.execute(HOT_PLANS).await?;
                            Ok(())
                        })
                    })
                    .connect(url)
                    .await
                    .map_err(Error::Unavailable)?;
                (pool, hot)
            }
            Dialect::Sqlite => {
                let url = if url.contains('?') { url.to_owned() } else { format!("{url}?mode=rwc") };
                let pool = options
                    .max_connections(1)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            use sqlx::Executor as _;
                            conn.execute("PRAGMA journal_mode = WAL").await?;
                            conn.execute("PRAGMA synchronous = NORMAL").await?;
                            conn.execute("PRAGMA foreign_keys = ON").await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await
                    .map_err(Error::Unavailable)?;
                (pool.clone(), pool)
            }
        };
        Ok(Store { pool, hot, dialect, replica: None, faults: None, last_written: Default::default() })
    }

    /// Begins a transaction. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`): a deferred transaction that read first cannot
    /// upgrade once another process (`baton admin` beside `baton dev`)
    /// committed in between, and fails `SQLITE_BUSY` without waiting, where an
    /// immediate one waits out the busy timeout like any writer.
    async fn begin(&self) -> Result<Transaction<'static, Any>> {
        let tx = match self.dialect {
            Dialect::Postgres => self.pool.begin().await,
            Dialect::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
        };
        tx.map_err(Error::from)
    }

    /// Keeps `record` as this process wrote it, where the unlocked write
    /// path can use it (Postgres).
    fn remember(&self, record: &ExecutionRecord) {
        if self.dialect == Dialect::Postgres {
            self.last_written.keep(record);
        }
    }

    /// The pool's connections (in use, idle).
    pub(crate) fn pool_stats(&self) -> (u64, u64) {
        let pools: &[&AnyPool] =
            if self.dialect == Dialect::Postgres { &[&self.pool, &self.hot] } else { &[&self.pool] };
        pools.iter().fold((0, 0), |(used, idle), p| {
            let free = p.num_idle() as u64;
            (used + u64::from(p.size()).saturating_sub(free), idle + free)
        })
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(Error::Unavailable)?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
        self.hot.close().await;
    }
}
