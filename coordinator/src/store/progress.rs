//! A running tool's progress: the latest report overwrites the previous one on
//! the execution row. It is not a transition (no event, no version bump, no
//! wake-up), so it never races one; callers read it with the execution.

use super::{Result, Store};
use crate::domain::{ExecutionId, Millis};

/// Longest progress message kept.
pub(super) const MAX_PROGRESS_MESSAGE: usize = 1_024;

impl Store {
    /// Records progress for attempt `attempt` of `execution_id`, only while
    /// `worker_id` holds that attempt's lease and the execution is working:
    /// the row itself is the holder check. Returns whether it was recorded.
    pub(crate) async fn record_progress(
        &self,
        execution_id: &ExecutionId,
        attempt: u32,
        worker_id: &str,
        (current, total, message): (f64, f64, &str),
        now: Millis,
    ) -> Result<bool> {
        let finite = |n: f64| if n.is_finite() { n.max(0.0) } else { 0.0 };
        let message: String = message.chars().take(MAX_PROGRESS_MESSAGE).collect();
        let done = sqlx::query(
            "UPDATE executions SET progress_current = $1, progress_total = $2, progress_message = $3, \
             progress_at = $4 WHERE id = $5 AND worker_id = $6 AND lease_attempt = $7 AND status IN ('working', 'input_required')",
        )
        .bind(finite(current))
        .bind(finite(total))
        .bind(message)
        .bind(now)
        .bind(execution_id.as_str())
        .bind(worker_id)
        .bind(i64::from(attempt))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
