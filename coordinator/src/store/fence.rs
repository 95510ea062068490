//! The admission fence: a generation in Postgres that a create must still see
//! when its row is inserted.
//!
//! Redis admission is rebuilt from the open executions whenever Redis loses its
//! state. A create admitted just before the loss is not in Redis any more, and
//! its row may not be committed yet when the rebuild reads the open executions:
//! it would be counted by neither, and the bounds would be exceeded by every
//! such create. So every create is admitted under a generation (Redis' epoch
//! key holds it) and inserted by a statement that locks the fence row `FOR
//! SHARE` and inserts nothing unless the row still holds that generation. A
//! rebuild after a loss first moves the generation on, which waits for every
//! statement holding the lock to commit; the open executions it reads next
//! include each of them, and any create admitted under the old generation that
//! comes later inserts nothing and answers `StaleAdmission` (503: the client
//! retries, admitted afresh). In Postgres' read-committed mode a statement
//! that waited for the rebuild's update re-reads the updated row, so it cannot
//! pass on a stale snapshot.

use super::{Dialect, Error, Result, Store};
use sqlx::Row;
use sqlx::any::Any;
use sqlx::{AssertSqlSafe, Transaction};

/// What an insert statement adds to insert only under the generation bound
/// as `$param` (`fenced`), or nothing: a leading CTE (`fence`, one row while the
/// generation is current, locked against a rebuild moving it on until the
/// statement's transaction ends) and the condition for its `SELECT`.
pub(super) fn guard(fenced: bool, param: usize) -> (String, &'static str) {
    if !fenced {
        return (String::new(), "");
    }
    (
        format!("fence AS (SELECT 1 FROM admission_fence WHERE id = 1 AND gen = ${param} FOR SHARE), "),
        " WHERE EXISTS (SELECT 1 FROM fence)",
    )
}

/// Holds the fence for the rest of `tx`, or answers `StaleAdmission` when the
/// generation moved on. Nothing to hold without a generation (admission that
/// cannot lose its state: one process's memory).
pub(super) async fn hold(tx: &mut Transaction<'_, Any>, dialect: Dialect, fence: Option<i64>) -> Result<()> {
    let Some(generation) = fence else { return Ok(()) };
    let sql = format!("SELECT 1 FROM admission_fence WHERE id = 1 AND gen = $1{}", dialect.share_lock());
    let held = sqlx::query(AssertSqlSafe(sql)).bind(generation).fetch_optional(&mut **tx).await?;
    if held.is_some() { Ok(()) } else { Err(Error::StaleAdmission) }
}

/// The generation a batch of creates is inserted under: the newest among
/// them. A row admitted under an older one is stale whatever the fence holds
/// now; it is left out, for the one-by-one path to answer.
pub(super) fn of_batch(fences: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    fences.max().flatten()
}

impl Store {
    /// The current generation.
    pub async fn admission_fence(&self) -> Result<i64> {
        let row = sqlx::query("SELECT gen FROM admission_fence WHERE id = 1").fetch_one(&self.pool).await?;
        Ok(row.try_get("gen")?)
    }

    /// Moves the generation on once every create holding the fence has
    /// committed; answers the new generation. Creates admitted under an
    /// earlier one insert nothing from here on.
    pub async fn advance_admission_fence(&self) -> Result<i64> {
        let row = sqlx::query("UPDATE admission_fence SET gen = gen + 1 WHERE id = 1 RETURNING gen")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("gen")?)
    }
}

#[cfg(test)]
#[path = "fence_tests.rs"]
mod tests;
