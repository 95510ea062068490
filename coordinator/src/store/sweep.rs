//! Time-driven transitions: deadlines, lease lapses, owner loss, and deletion past
//! retention. Every step goes through `Store::apply` (row lock + state machine),
//! so any number of replicas may sweep at once: a row another replica already
//! moved is simply ignored.

use super::executions::{Applied, delete_execution};
use super::write::EventData;
use super::{Result, Store};
use crate::domain::{Event, Millis};
use sqlx::{AssertSqlSafe, Row};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub deadline_exceeded: usize,
    pub lease_lapsed: usize,
    pub owner_lost: usize,
    pub deleted: usize,
}

/// A non-terminal execution as admission sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenExecution {
    pub id: String,
    pub org_id: String,
    pub project_id: String,
    pub user_id: String,
    /// Stored (sealed) input bytes.
    pub input_bytes: u64,
    pub execution_deadline: Millis,
    /// Left the backlog: claimed at least once.
    pub started: bool,
}

const OPEN: &str = "status IN ('pending', 'working', 'input_required')";
const LEASED: &str = "status IN ('working', 'input_required')";

impl Store {
    /// Every non-terminal execution, with what admission counts of it.
    pub async fn open_executions(&self) -> Result<Vec<OpenExecution>> {
        let sql = format!(
            "SELECT id, org_id, project_id, user_id, execution_deadline, started_at, \
             COALESCE(LENGTH(input_ct), 0) AS input_bytes FROM executions WHERE {OPEN}"
        );
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let started: Option<i64> = r.try_get("started_at")?;
                let bytes: i64 = r.try_get("input_bytes")?;
                Ok(OpenExecution {
                    id: r.try_get("id")?,
                    org_id: r.try_get("org_id")?,
                    project_id: r.try_get("project_id")?,
                    user_id: r.try_get("user_id")?,
                    input_bytes: u64::try_from(bytes).unwrap_or(0),
                    execution_deadline: r.try_get("execution_deadline")?,
                    started: started.is_some(),
                })
            })
            .collect()
    }

    async fn ids(&self, condition: &str, now: Millis, limit: u32) -> Result<Vec<String>> {
        let sql = format!("SELECT id FROM executions WHERE {condition} LIMIT $2");
        let rows = sqlx::query(AssertSqlSafe(sql)).bind(now).bind(i64::from(limit)).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?)
    }

    /// One sweep pass; returns the transitions it made (their effects still to run).
    pub async fn sweep(
        &self,
        now: Millis,
        owner_loss_grace_ms: i64,
        limit: u32,
    ) -> Result<(SweepReport, Vec<Applied>)> {
        let mut report = SweepReport::default();
        let mut applied = Vec::new();
        let deadline = format!("{OPEN} AND execution_deadline <= $1");
        let owner_loss = format!("{LEASED} AND owner_loss_detection_at IS NOT NULL AND owner_loss_detection_at <= $1");
        let lapsed = format!("{LEASED} AND owner_loss_detection_at IS NULL AND lease_expires_at <= $1");
        let detect_at = now + owner_loss_grace_ms;
        let passes = [
            (deadline, Event::DeadlinePassed, &mut report.deadline_exceeded),
            (owner_loss, Event::OwnerLossDue, &mut report.owner_lost),
            (lapsed, Event::LeaseLapsed { detect_at }, &mut report.lease_lapsed),
        ];
        for (condition, event, count) in passes {
            for id in self.ids(&condition, now, limit).await? {
                if let Some(Ok(a)) = self.apply(&id, &event, &EventData::default(), now).await? {
                    *count += 1;
                    applied.push(a);
                }
            }
        }
        for id in self.ids("retention_expires_at <= $1", now, limit).await? {
            let mut tx = self.pool.begin().await?;
            delete_execution(&mut tx, &id).await?;
            tx.commit().await?;
            report.deleted += 1;
        }
        Ok((report, applied))
    }
}
