//! How long a project keeps its executions: an organization default, a
//! per-project override, and the configured default under both. Every
//! execution row carries its own `retention_expires_at` (what every read
//! filters on and the sweeper deletes by), so a change here rewrites that
//! column for the rows it governs, in the transaction that records the change.

use super::{Error, Result, Store};
use crate::domain::Millis;
use sqlx::Row;

/// A project's retention as stored, and whether its organization logs executions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RetentionSettings {
    pub(crate) project_ms: Option<i64>,
    pub(crate) organization_ms: Option<i64>,
    pub(crate) execution_logging: bool,
}

impl RetentionSettings {
    /// The window that applies: the project's override, else the
    /// organization's default, else `default_ms`; none at all while execution
    /// logging is off (a record then lives until its execution deadline, so
    /// its owner can still collect the result).
    pub(crate) fn effective_ms(&self, default_ms: i64) -> i64 {
        if !self.execution_logging {
            return 0;
        }
        self.project_ms.or(self.organization_ms).unwrap_or(default_ms)
    }
}

const TERMINAL: &str = "status IN ('completed', 'failed', 'cancelled')";

impl Store {
    /// The settings of `project_id` in `org_id`; `None` when no such project.
    pub(crate) async fn retention_settings(&self, org_id: &str, project_id: &str) -> Result<Option<RetentionSettings>> {
        let row = sqlx::query(
            "SELECT p.retention_ms AS project_ms, o.retention_ms AS organization_ms, o.execution_logging AS logging \
             FROM projects p JOIN organizations o ON o.id = p.org_id WHERE p.id = $1 AND p.org_id = $2",
        )
        .bind(project_id)
        .bind(org_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(RetentionSettings {
                project_ms: r.try_get("project_ms")?,
                organization_ms: r.try_get("organization_ms")?,
                execution_logging: r.try_get::<i64, _>("logging")? != 0,
            })
        })
        .transpose()
    }

    /// Whether `org_id` records execution history (true for an unknown org).
    pub(crate) async fn execution_logging(&self, org_id: &str) -> Result<bool> {
        let row = sqlx::query("SELECT execution_logging FROM organizations WHERE id = $1")
            .bind(org_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<i64, _>("execution_logging")).transpose()?.is_none_or(|on| on != 0))
    }

    /// Sets (or with `None` clears) a project's override and re-dates its rows.
    /// False when the project does not exist.
    pub(crate) async fn set_project_retention(
        &self,
        org_id: &str,
        project_id: &str,
        retention_ms: Option<i64>,
        default_ms: i64,
        now: Millis,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let done = sqlx::query("UPDATE projects SET retention_ms = $1 WHERE id = $2 AND org_id = $3")
            .bind(retention_ms)
            .bind(project_id)
            .bind(org_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        redate(&mut tx, org_id, Governed::Project(project_id), default_ms, now).await?;
        self.commit(tx).await?;
        Ok(true)
    }

    /// Sets (or clears) an organization's default and re-dates the rows of its
    /// projects that have no override. False when the organization does not exist.
    pub(crate) async fn set_organization_retention(
        &self,
        org_id: &str,
        retention_ms: Option<i64>,
        default_ms: i64,
        now: Millis,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let done = sqlx::query("UPDATE organizations SET retention_ms = $1 WHERE id = $2")
            .bind(retention_ms)
            .bind(org_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        redate(&mut tx, org_id, Governed::WithoutOverride, default_ms, now).await?;
        self.commit(tx).await?;
        Ok(true)
    }

    /// Turns an organization's execution logging on or off. Off deletes the
    /// history: every finished execution expires at `now` (gone from every read
    /// at once, deleted by the next sweeps), and work in flight is kept only
    /// until its execution deadline. On re-dates every row by the windows.
    pub(crate) async fn set_execution_logging(
        &self,
        org_id: &str,
        on: bool,
        default_ms: i64,
        now: Millis,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let done = sqlx::query("UPDATE organizations SET execution_logging = $1 WHERE id = $2")
            .bind(i64::from(on))
            .bind(org_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        if on {
            redate(&mut tx, org_id, Governed::All, default_ms, now).await?;
        } else {
            let sql = format!(
                "UPDATE executions SET retention_expires_at = CASE WHEN {TERMINAL} THEN $1 \
                 WHEN execution_deadline > $1 THEN execution_deadline ELSE $1 END WHERE org_id = $2"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now).bind(org_id).execute(&mut *tx).await?;
            follow_redating(&mut tx, org_id, None).await?;
        }
        self.commit(tx).await?;
        Ok(true)
    }
}

/// Whose rows a change re-dates.
enum Governed<'a> {
    Project(&'a str),
    /// The organization's projects that have no override of their own.
    WithoutOverride,
    All,
}

/// Rewrites `retention_expires_at` of the rows whose window just changed.
async fn redate(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    org_id: &str,
    which: Governed<'_>,
    default_ms: i64,
    now: Millis,
) -> Result<()> {
    let projects = sqlx::query(
        "SELECT p.id, p.retention_ms AS project_ms, o.retention_ms AS organization_ms, o.execution_logging AS logging \
         FROM projects p JOIN organizations o ON o.id = p.org_id WHERE p.org_id = $1",
    )
    .bind(org_id)
    .fetch_all(&mut **tx)
    .await?;
    for row in &projects {
        let id: String = row.try_get("id")?;
        let settings = RetentionSettings {
            project_ms: row.try_get("project_ms")?,
            organization_ms: row.try_get("organization_ms")?,
            execution_logging: row.try_get::<i64, _>("logging")? != 0,
        };
        // While logging is off the rows were dated when it was turned off.
        let governed = settings.execution_logging
            && match which {
                Governed::Project(p) => p == id,
                Governed::WithoutOverride => settings.project_ms.is_none(),
                Governed::All => true,
            };
        if !governed {
            continue;
        }
        let window = settings.effective_ms(default_ms);
        // What has expired stays gone, whatever the new window; a window that
        // ended already ends now (never in a day whose partition may be gone).
        sqlx::query(
            "UPDATE executions SET retention_expires_at = CASE WHEN execution_deadline + $1 > $3 \
             THEN execution_deadline + $1 ELSE $3 END WHERE project_id = $2 AND retention_expires_at > $3",
        )
        .bind(window)
        .bind(&id)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(Error::from)?;
        follow_redating(tx, org_id, Some(&id)).await?;
    }
    Ok(())
}

/// Gives the rows that belong to an execution (its events, attempts, input
/// requests and Idempotency-Key) the execution's retention end again after a
/// re-dating: on Postgres they move to its partition, so they leave with it.
async fn follow_redating(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    org_id: &str,
    project_id: Option<&str>,
) -> Result<()> {
    for table in ["execution_events", "attempts", "input_requests", "execution_keys"] {
        let sql = format!(
            "UPDATE {table} SET retention_expires_at = e.retention_expires_at FROM executions e \
             WHERE e.id = {table}.execution_id AND e.org_id = $1 AND {table}.org_id = $1 \
             AND ($2 IS NULL OR e.project_id = $2) AND {table}.retention_expires_at <> e.retention_expires_at"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(org_id).bind(project_id).execute(&mut **tx).await?;
    }
    Ok(())
}
