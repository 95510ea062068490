//! What the database says it has applied: sqlx's `_sqlx_migrations` table
//! (version, description, checksum of the file's text, success), and how it
//! compares with the migrations this binary carries.

use super::super::Dialect;
use super::{MigrationError, MigrationName};
use sqlx::migrate::Migration;
use sqlx::{AnyConnection, Row as _};

/// sqlx's table, kept so databases migrated before this runner existed go on.
pub(super) const TABLE: &str = "_sqlx_migrations";

pub(super) struct Recorded {
    pub(crate) version: i64,
    pub(crate) description: String,
    pub(crate) checksum: Vec<u8>,
    pub(crate) success: bool,
}

#[derive(Default)]
pub(super) struct Ledger {
    pub(crate) recorded: Vec<Recorded>,
}

impl Ledger {
    /// The ledger, or an empty one where no migration ever ran (the table is
    /// not created: a plan writes nothing).
    pub(super) async fn read(conn: &mut AnyConnection, dialect: Dialect) -> Result<Ledger, sqlx::Error> {
        let exists = match dialect {
            Dialect::Postgres => {
                "SELECT COUNT(*) FROM pg_tables WHERE tablename = '_sqlx_migrations' AND schemaname = current_schema()"
            }
            Dialect::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        };
        let count: i64 = sqlx::query_scalar(exists).fetch_one(&mut *conn).await?;
        if count == 0 {
            return Ok(Ledger::default());
        }
        let rows = sqlx::query(
            "SELECT version, description, checksum, CAST(CASE WHEN success THEN 1 ELSE 0 END AS BIGINT) AS ok \
             FROM _sqlx_migrations ORDER BY version",
        )
        .fetch_all(&mut *conn)
        .await?;
        let recorded = rows
            .iter()
            .map(|r| {
                Ok(Recorded {
                    version: r.try_get("version")?,
                    description: r.try_get("description")?,
                    checksum: r.try_get("checksum")?,
                    success: r.try_get::<i64, _>("ok")? == 1,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(Ledger { recorded })
    }

    /// Why applying `known` on top of this ledger must be refused, if it must:
    /// versions this binary does not know (a newer binary migrated the
    /// database), a migration left half done, or a file that changed since
    /// the database applied it.
    pub(super) fn refusal(&self, known: &[Migration]) -> Option<MigrationError> {
        let unknown: Vec<MigrationName> = self
            .recorded
            .iter()
            .filter(|r| !known.iter().any(|m| m.version == r.version))
            .map(|r| MigrationName { version: r.version, name: r.description.clone() })
            .collect();
        if !unknown.is_empty() {
            let newest_known = known.iter().map(|m| m.version).max().unwrap_or(0);
            return Some(MigrationError::NewerSchema { unknown, newest_known });
        }
        if let Some(r) = self.recorded.iter().find(|r| !r.success) {
            return Some(MigrationError::Dirty(MigrationName { version: r.version, name: r.description.clone() }));
        }
        let changed = known
            .iter()
            .find(|m| self.recorded.iter().any(|r| r.version == m.version && r.checksum.as_slice() != &*m.checksum))?;
        Some(MigrationError::Changed(MigrationName::of(changed)))
    }

    /// The migrations of `known` not recorded yet, in version order.
    pub(super) fn pending<'k>(&self, known: &'k [Migration]) -> Vec<&'k Migration> {
        known.iter().filter(|m| !self.recorded.iter().any(|r| r.version == m.version)).collect()
    }

    /// How many of `known` are recorded.
    pub(super) fn applied(&self, known: &[Migration]) -> usize {
        known.len() - self.pending(known).len()
    }
}
