//! Creating executions already leased to a worker: a start that finds a free
//! slot on one of this replica's sessions is written in its claimed state at
//! once (its row, the `created` and `claim` events, and attempt 1), one
//! statement and one commit for the whole batch, instead of a create and then
//! a separate claim transaction. The rows are those the state machine leaves
//! after `Claim` (played in memory by `bulk::play`, the same function that
//! seeds a history), so a run created claimed cannot differ from one claimed
//! later. Postgres only; SQLite creates pending rows for the dispatcher.

use super::bulk::{ATTEMPT_COLUMNS, EVENT_COLUMNS, EXECUTION_INSERT, RowsJson, SeedRun, play};
use super::create::{KEYS_CTE, started_by_live};
use super::fence;
use super::records::{ExecutionRecord, NewExecution};
use super::{Dialect, Result, Store};
use crate::domain::{Event, Millis};
use crate::store::EventData;
use sqlx::{AssertSqlSafe, Row};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

/// A new execution and the worker to lease it to until `lease_until`.
pub(crate) struct ClaimedNew<'a> {
    pub(crate) new: &'a NewExecution,
    pub(crate) worker_id: &'a str,
    pub(crate) lease_until: Millis,
}

/// The statement without and with the admission fence (store/fence.rs, `$4`).
static INSERT: LazyLock<[String; 2]> = LazyLock::new(|| [insert_sql(false), insert_sql(true)]);

fn insert_sql(fenced: bool) -> String {
    let prefixed = |alias: &str, columns: &str| {
        columns.split(',').map(|c| format!("{alias}.{}", c.trim())).collect::<Vec<_>>().join(", ")
    };
    let (fence_cte, guard) = fence::guard(fenced, 4);
    let live = started_by_live(guard, "r");
    format!(
        "WITH {fence_cte}v AS (SELECT * FROM json_populate_recordset(NULL::executions, $1::json) r{guard}{live}), \
         {KEYS_CTE}, \
         created AS (INSERT INTO executions ({EXECUTION_INSERT}) SELECT {EXECUTION_INSERT} FROM v \
         WHERE idempotency_key IS NULL OR id IN (SELECT execution_id FROM k) RETURNING id), \
         events AS (INSERT INTO execution_events ({EVENT_COLUMNS}) SELECT {} \
         FROM json_populate_recordset(NULL::execution_events, $2::json) e JOIN created c ON c.id = e.execution_id), \
         attempts AS (INSERT INTO attempts ({ATTEMPT_COLUMNS}) SELECT {} \
         FROM json_populate_recordset(NULL::attempts, $3::json) a JOIN created c ON c.id = a.execution_id) \
         SELECT id FROM created",
        prefixed("e", EVENT_COLUMNS),
        prefixed("a", ATTEMPT_COLUMNS),
    )
}

impl Store {
    /// Creates each execution leased to its worker, in one statement; answers,
    /// in order, the record written, or `None` where the Idempotency-Key was
    /// taken, the admission is stale, the credential was revoked or the tool
    /// disabled (nothing of that row is written; the caller creates it the
    /// ordinary way, which answers which). On SQLite nothing is created
    /// and every answer is `None`.
    pub(crate) async fn create_claimed(&self, batch: &[ClaimedNew<'_>]) -> Result<Vec<Option<ExecutionRecord>>> {
        if self.dialect == Dialect::Sqlite || batch.is_empty() {
            return Ok(vec![None; batch.len()]);
        }
        let fence = fence::of_batch(batch.iter().map(|c| c.new.admission_fence));
        let mut rows = RowsJson::default();
        let mut records = Vec::with_capacity(batch.len());
        for c in batch {
            if c.new.admission_fence != fence {
                records.push(None);
                continue;
            }
            let claim = Event::Claim { worker_id: c.worker_id.to_owned(), lease_until: c.lease_until };
            let run = SeedRun { new: c.new.clone(), events: vec![(c.new.created_at, claim, EventData::default())] };
            let played = play(&run)?;
            rows.push(&played)?;
            records.push(Some(played.record));
        }
        let RowsJson { executions, events, attempts } = rows;
        let mut query = sqlx::query(AssertSqlSafe(Cow::Borrowed(INSERT[usize::from(fence.is_some())].as_str())))
            .bind(executions.into_text()?)
            .bind(events.into_text()?)
            .bind(attempts.into_text()?);
        if let Some(generation) = fence {
            query = query.bind(generation);
        }
        let created = self.autocommit(query.fetch_all(&self.hot)).await?;
        let created: HashSet<String> = created.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?;
        let records: Vec<_> = records.into_iter().map(|r| r.filter(|r| created.contains(r.id.as_str()))).collect();
        records.iter().flatten().for_each(|r| self.remember(r));
        Ok(records)
    }
}

#[cfg(test)]
#[path = "claimed_tests.rs"]
mod tests;
