//! Applying the pending migrations. sqlx does the bookkeeping (its advisory
//! lock, its table, a transaction holding a migration and its row); the
//! order of things is ours, so that the timeouts cover exactly the
//! migrations' statements: `Migrator::run` would take its advisory lock
//! under them too, and a second `baton migrate` waiting its turn (which
//! blocks nobody) would give up after five seconds.
//!
//! The timeouts are session settings (`SET`) made on the migrating
//! connection, never written into a migration: sqlx checks each applied
//! file's text against its recorded checksum, so released files stay as
//! they are.

use super::super::Dialect;
use super::ledger::{Ledger, TABLE};
use super::{MigrateOptions, MigrationError, MigrationName, statements};
use sqlx::migrate::{Migrate as _, MigrateError, Migration};
use sqlx::{AnyConnection, AssertSqlSafe, Executor as _};

/// Postgres' codes for a lock wait given up (`lock_not_available`, also
/// `NOWAIT`'s) and a cancelled statement (`query_canceled`).
const LOCK_NOT_AVAILABLE: &str = "55P03";
const QUERY_CANCELED: &str = "57014";

pub(super) async fn apply(
    conn: &mut AnyConnection,
    dialect: Dialect,
    known: &[Migration],
    options: &MigrateOptions,
) -> Result<Vec<MigrationName>, MigrationError> {
    conn.lock().await?;
    conn.ensure_migrations_table(TABLE).await?;
    let ledger = Ledger::read(conn, dialect).await?;
    if let Some(refusal) = ledger.refusal(known) {
        return Err(refusal);
    }
    if dialect == Dialect::Postgres {
        conn.execute(AssertSqlSafe(format!(
            "SET lock_timeout = {}; SET statement_timeout = {}",
            options.lock_timeout.as_millis(),
            options.statement_timeout.as_millis()
        )))
        .await?;
    }
    let mut applied = Vec::new();
    for migration in ledger.pending(known) {
        if options.up_to.is_some_and(|last| migration.version > last) {
            break;
        }
        apply_one(conn, migration).await.map_err(|e| classify(e, migration, options))?;
        tracing::info!(version = migration.version, name = %migration.description, "migration applied");
        applied.push(MigrationName::of(migration));
    }
    if dialect == Dialect::Postgres {
        conn.execute("RESET lock_timeout; RESET statement_timeout").await?;
    }
    conn.unlock().await?;
    Ok(applied)
}

async fn apply_one(conn: &mut AnyConnection, migration: &Migration) -> Result<(), MigrateError> {
    if !migration.no_tx {
        conn.apply(TABLE, migration).await?;
        return Ok(());
    }
    // One statement per query: Postgres runs a multi-statement query in one
    // implicit transaction, where `CREATE INDEX CONCURRENTLY` is refused.
    for statement in statements::split(migration.sql.as_str()) {
        conn.execute(AssertSqlSafe(statement)).await?;
    }
    // Recorded only once every statement went through, so a migration that
    // stopped part way runs again from the start.
    conn.skip(TABLE, migration).await
}

fn classify(error: MigrateError, migration: &Migration, options: &MigrateOptions) -> MigrationError {
    let name = MigrationName::of(migration);
    let transactional = !migration.no_tx;
    let source = match error {
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => e,
        other => return MigrationError::Ledger(other),
    };
    let code = source.as_database_error().and_then(|d| d.code()).map(|c| c.into_owned());
    match code.as_deref() {
        Some(LOCK_NOT_AVAILABLE) => {
            MigrationError::LockTimeout { migration: name, lock_timeout: options.lock_timeout, transactional }
        }
        // The same code answers an operator's pg_cancel_backend: only the
        // timeout's own message counts as the timeout.
        Some(QUERY_CANCELED) if source.to_string().contains("statement timeout") => MigrationError::StatementTimeout {
            migration: name,
            statement_timeout: options.statement_timeout,
            transactional,
        },
        _ => MigrationError::Failed { migration: name, source },
    }
}
