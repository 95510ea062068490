//! The project's execution history: filtered pages, newest first with offset
//! paging, and counts. Every run of the project is a row of `executions`
//! (REST, MCP foreground and task calls, scheduled and remote runs alike).
//! Only metadata columns are read: a page never loads a payload.
//!
//! The statement text depends on which filters are set (so each can use its
//! index); it is not kept as a prepared statement, which would crowd the hot
//! path's statements out of each connection's cache. Migration 0008 gives
//! every filter an index that carries the filtered columns, so a count and
//! the skipping of an offset are index-only scans (`baton bench history`
//! measures them on a million runs). A count the kept sums can answer reads
//! those instead (`history_counts`).

use super::history_filter::{HistoryFilter, add, narrowing};
use super::{Error, Result, Store, history_counts};
use crate::domain::{ExecutionId, Millis, Status};
use sqlx::any::AnyArguments;
use sqlx::{Arguments, AssertSqlSafe, Row};

/// One run as the history lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    pub id: ExecutionId,
    pub(crate) status: Status,
    pub(crate) execution_type: String,
    pub(crate) tool_name: String,
    pub(crate) toolkit_name: String,
    pub(crate) toolkit_version: String,
    pub(crate) user_id: String,
    pub(crate) created_at: Millis,
    pub(crate) updated_at: Millis,
    pub(crate) started_at: Option<Millis>,
    pub(crate) finished_at: Option<Millis>,
}

const ROW_COLUMNS: &str = "id, status, execution_type, tool_name, toolkit_name, toolkit_version, user_id, \
    created_at, updated_at, started_at, finished_at";

/// The `WHERE` clause of `f` (runs still within retention at `now`) and its arguments.
fn condition(f: &HistoryFilter, now: Millis) -> Result<(String, AnyArguments)> {
    let mut w = narrowing(f)?;
    w.and("retention_expires_at >", now)?;
    Ok((w.clauses.join(" AND "), w.args))
}

fn row_from(r: &sqlx::any::AnyRow) -> Result<HistoryRow> {
    let id: String = r.try_get("id")?;
    let status: String = r.try_get("status")?;
    let status = Status::parse(&status).ok_or_else(|| Error::Corrupt(format!("status of execution {id}")))?;
    Ok(HistoryRow {
        status,
        execution_type: r.try_get("execution_type")?,
        tool_name: r.try_get("tool_name")?,
        toolkit_name: r.try_get("toolkit_name")?,
        toolkit_version: r.try_get("toolkit_version")?,
        user_id: r.try_get("user_id")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        id: super::records::parse_id(id)?,
    })
}

/// A history statement: a page or a count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryRead {
    Page { limit: u32, offset: u32 },
    Count,
}

/// The statement `read` runs for `f` at `now`, and its arguments.
fn statement(f: &HistoryFilter, now: Millis, read: HistoryRead) -> Result<(String, AnyArguments)> {
    if read == HistoryRead::Count && history_counts::served(f) {
        return history_counts::count_statement(f, now);
    }
    let (condition, mut args) = condition(f, now)?;
    let sql = match read {
        HistoryRead::Page { limit, offset } => {
            let n = args.len();
            add(&mut args, i64::from(limit))?;
            add(&mut args, i64::from(offset))?;
            // Two steps: the page's ids, skipping the offset within an index
            // that carries every filtered column (an index-only scan: no heap
            // page is read for the skipped runs), then only those rows.
            format!(
                "SELECT {ROW_COLUMNS} FROM executions WHERE id IN (SELECT id FROM executions WHERE {condition} \
                 ORDER BY created_at DESC, id DESC LIMIT ${} OFFSET ${}) ORDER BY created_at DESC, id DESC",
                n + 1,
                n + 2
            )
        }
        HistoryRead::Count => format!("SELECT COUNT(*) AS n FROM executions WHERE {condition}"),
    };
    Ok((sql, args))
}

impl Store {
    /// Up to `limit` runs matching `f`, newest first, after skipping `offset`.
    pub async fn history_page(
        &self,
        f: &HistoryFilter,
        now: Millis,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<HistoryRow>> {
        self.heavy_read(|pool| async move {
            let (sql, args) = statement(f, now, HistoryRead::Page { limit, offset })?;
            let rows = sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).fetch_all(&pool).await?;
            rows.iter().map(row_from).collect()
        })
        .await
    }

    /// How many runs match `f`.
    pub async fn history_count(&self, f: &HistoryFilter, now: Millis) -> Result<u64> {
        self.heavy_read(|pool| async move {
            let (sql, args) = statement(f, now, HistoryRead::Count)?;
            let row = sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).fetch_one(&pool).await?;
            let n: i64 = row.try_get("n")?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    /// How many runs match `f`, counted one by one: what the kept sums must equal.
    #[cfg(test)]
    pub(super) async fn history_count_by_scan(&self, f: &HistoryFilter, now: Millis) -> Result<u64> {
        let (condition, args) = condition(f, now)?;
        let sql = format!("SELECT COUNT(*) AS n FROM executions WHERE {condition}");
        let row = sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).fetch_one(&self.pool).await?;
        let n: i64 = row.try_get("n")?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Postgres' plan for `read`, run for real (`EXPLAIN (ANALYZE, BUFFERS)`),
    /// as text: the exact statement and arguments the reads above send, for
    /// `baton bench history` to show which index each case uses.
    pub async fn history_explain(&self, f: &HistoryFilter, now: Millis, read: HistoryRead) -> Result<String> {
        let (sql, args) = statement(f, now, read)?;
        let explain = match self.dialect {
            super::Dialect::Postgres => format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"),
            super::Dialect::Sqlite => format!("EXPLAIN QUERY PLAN {sql}"),
        };
        let rows = sqlx::query_with(AssertSqlSafe(explain), args).persistent(false).fetch_all(&self.pool).await?;
        let mut lines = Vec::with_capacity(rows.len());
        for r in &rows {
            lines.push(match self.dialect {
                super::Dialect::Postgres => r.try_get::<String, _>(0)?,
                super::Dialect::Sqlite => r.try_get::<String, _>("detail")?,
            });
        }
        Ok(lines.join("\n"))
    }
}
