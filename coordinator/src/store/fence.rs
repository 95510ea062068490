//! The admission fence: a generation in Postgres that a create must still see
//! when its row is inserted.
//!
//! Redis admission is rebuilt from the open executions whenever Redis loses its
//! state. A create admitted just before the loss is not in Redis any more, and
//! its row may not be committed yet when the rebuild reads the open executions:
//! it would be counted by neither, and the bounds would be exceeded by every
//! such create. So every create is admitted under a generation (Redis' epoch
//! key holds it) and inserted by a statement that holds the fence shared and
//! inserts nothing unless the generation is still the one it was admitted
//! under. A rebuild after a loss first moves the generation on holding the
//! fence exclusively, which waits for every create holding it to commit; the
//! open executions it reads next include each of them, and any create admitted
//! under the old generation that comes later inserts nothing and answers
//! `StaleAdmission` (503: the client retries, admitted afresh).
//!
//! On Postgres the fence is a transaction-scoped advisory lock, taken and
//! checked by the SQL functions of migration 0013: shared memory only, where a
//! row lock `FOR SHARE` made a MultiXact for nearly every create (they overlap)
//! and wrote it into the fence row. The
//! check reads the generation after the lock is held, with a fresh snapshot,
//! so a create that waited for a rebuild sees the generation it moved to.
//! SQLite runs one writer at a time, so a plain read is enough there.

use super::{Dialect, Error, Result, Store};
use sqlx::Row;
use sqlx::Transaction;
use sqlx::any::Any;

/// What a Postgres insert statement adds to insert only under the generation
/// bound as `$param` (`fenced`), or nothing: a leading CTE (`fence`, holding the
/// fence until the statement's transaction ends and answering whether the
/// generation is current) and the condition for its `SELECT`.
pub(super) fn guard(fenced: bool, param: usize) -> (String, &'static str) {
    if !fenced {
        return (String::new(), "");
    }
    // A CTE calling a volatile function runs once, however many rows.
    (format!("fence AS (SELECT baton_admission_holds(${param}) AS holds), "), " WHERE (SELECT holds FROM fence)")
}

/// Holds the fence for the rest of `tx`, or answers `StaleAdmission` when the
/// generation moved on. Nothing to hold without a generation (admission that
/// cannot lose its state: one process's memory).
pub(super) async fn hold(tx: &mut Transaction<'_, Any>, dialect: Dialect, fence: Option<i64>) -> Result<()> {
    let Some(generation) = fence else { return Ok(()) };
    let sql = match dialect {
        Dialect::Postgres => "SELECT 1 WHERE baton_admission_holds($1)",
        Dialect::Sqlite => "SELECT 1 FROM admission_fence WHERE id = 1 AND gen = $1",
    };
    let held = sqlx::query(sql).bind(generation).fetch_optional(&mut **tx).await?;
    if held.is_some() { Ok(()) } else { Err(Error::StaleAdmission) }
}

/// Moves the generation on in `tx`, holding the fence exclusively until `tx`
/// ends (so after every create that held it has committed); the new generation.
pub(super) async fn move_on(tx: &mut Transaction<'_, Any>, dialect: Dialect) -> Result<i64> {
    let sql = match dialect {
        Dialect::Postgres => "SELECT baton_admission_move_on() AS gen",
        Dialect::Sqlite => "UPDATE admission_fence SET gen = gen + 1 WHERE id = 1 RETURNING gen",
    };
    Ok(sqlx::query(sql).fetch_one(&mut **tx).await?.try_get("gen")?)
}

/// The generation a batch of creates is inserted under: the newest among
/// them. A row admitted under an older one is stale whatever the fence holds
/// now; it is left out, for the one-by-one path to answer.
pub(super) fn of_batch(fences: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    fences.max().flatten()
}

impl Store {
    /// The current generation.
    pub(crate) async fn admission_fence(&self) -> Result<i64> {
        let row = sqlx::query("SELECT gen FROM admission_fence WHERE id = 1").fetch_one(&self.pool).await?;
        Ok(row.try_get("gen")?)
    }

    /// Moves the generation on once every create holding the fence has
    /// committed; answers the new generation. Creates admitted under an
    /// earlier one insert nothing from here on.
    pub(crate) async fn advance_admission_fence(&self) -> Result<i64> {
        let mut tx = self.begin().await?;
        let generation = move_on(&mut tx, self.dialect).await?;
        self.commit(tx).await?;
        Ok(generation)
    }
}

#[cfg(test)]
#[path = "fence_tests.rs"]
mod tests;
