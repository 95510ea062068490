//! The operator's view of a project: every execution, newest first, in keyset
//! pages (the owner list's order and cursor), whoever owns it.

use super::records::{EXECUTION_COLUMNS, ExecutionRecord, execution_from_row};
use super::{Result, Store};
use crate::domain::Millis;
use sqlx::AssertSqlSafe;
use std::sync::LazyLock;

static PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions WHERE project_id = $1 AND retention_expires_at > $2 \
         AND (created_at < $3 OR (created_at = $3 AND id < $4)) ORDER BY created_at DESC, id DESC LIMIT $5"
    )
});

impl Store {
    /// Up to `limit` of the project's executions still retained at `now`,
    /// newest first; `after` is the (created_at, id) of the previous page's last row.
    pub(crate) async fn project_executions(
        &self,
        project_id: &str,
        now: Millis,
        limit: u32,
        after: Option<(Millis, String)>,
    ) -> Result<Vec<ExecutionRecord>> {
        // No cursor: after every possible row.
        let (at, id) = after.unwrap_or((i64::MAX, "\u{10FFFF}".to_owned()));
        let rows = sqlx::query(AssertSqlSafe(PAGE.as_str()))
            .bind(project_id)
            .bind(now)
            .bind(at)
            .bind(id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(execution_from_row).collect()
    }
}
