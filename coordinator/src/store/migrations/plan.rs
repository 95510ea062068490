//! What `baton migrate` would do, read without writing anything (not even
//! sqlx's table): the pending migrations with their statements, the timeouts
//! they would run under, and whether applying would be refused.

use super::super::Dialect;
use super::ledger::Ledger;
use super::{MigrateOptions, MigrationError, MigrationName, statements};
use sqlx::AnyConnection;
use sqlx::migrate::Migration;
use std::time::Duration;

#[derive(Debug)]
pub struct MigrationPlan {
    /// How many of this binary's migrations the database has.
    pub applied: usize,
    pub pending: Vec<PendingMigration>,
    /// (lock, statement) timeouts each pending statement would run under;
    /// none on SQLite, which has no such settings.
    pub timeouts: Option<(Duration, Duration)>,
    /// Why applying would be refused, if it would (`NewerSchema` is an old
    /// binary pointed at a newer schema).
    pub refusal: Option<MigrationError>,
}

#[derive(Debug)]
pub struct PendingMigration {
    pub migration: MigrationName,
    /// False for a `-- no-transaction` migration, run statement by statement.
    pub transactional: bool,
    pub statements: Vec<String>,
}

impl PendingMigration {
    /// Each statement by its first line that is not a comment.
    pub fn first_lines(&self) -> impl Iterator<Item = &str> {
        self.statements.iter().map(|s| statements::first_line(s))
    }
}

pub(super) async fn read(
    conn: &mut AnyConnection,
    dialect: Dialect,
    known: &[Migration],
    options: &MigrateOptions,
) -> Result<MigrationPlan, MigrationError> {
    let ledger = Ledger::read(conn, dialect).await?;
    let pending = ledger
        .pending(known)
        .into_iter()
        .filter(|m| options.up_to.is_none_or(|last| m.version <= last))
        .map(|m| PendingMigration {
            migration: MigrationName::of(m),
            transactional: !m.no_tx,
            statements: statements::split(m.sql.as_str()),
        })
        .collect();
    Ok(MigrationPlan {
        applied: ledger.applied(known),
        pending,
        timeouts: (dialect == Dialect::Postgres).then_some((options.lock_timeout, options.statement_timeout)),
        refusal: ledger.refusal(known),
    })
}
