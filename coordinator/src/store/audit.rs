//! The audit log: one row per operator operation and administrative change,
//! allowed or refused. Rows are inserted, read, and deleted once past the
//! audit retention; the one update counts a repeat into a row that stands for
//! many (`occurrences`: refusals of one credential for one action within a
//! minute, see `crate::audit`), and never changes what the row says. On
//! Postgres the log is partitioned by 30-day periods (store/partitions.rs).

use super::history_filter::{Where, add};
use super::partitions::AUDIT_PERIOD_MS;
use super::{Dialect, Result, Store};
use crate::domain::Millis;
use sqlx::{Arguments, AssertSqlSafe, Row};

/// One audit row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AuditEntry {
    pub(crate) id: String,
    pub(crate) org_id: String,
    /// `None` for an organization-wide change.
    pub(crate) project_id: Option<String>,
    pub(crate) at: Millis,
    /// The credential that acted, or `cli` for `baton admin`.
    pub(crate) actor_id: String,
    pub(crate) actor_kind: String,
    pub(crate) action: String,
    pub(crate) target: Option<String>,
    pub(crate) outcome: String,
    pub(crate) detail: Option<String>,
    /// How many times it happened: more than one for a row that stands for
    /// repeated refusals.
    pub(crate) occurrences: i64,
}

/// What an audit read narrows to: a project's rows and its organization's
/// organization-wide rows; `None` narrows nothing more.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AuditFilter {
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) action: Option<String>,
    pub(crate) actor_id: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) from: Option<Millis>,
    pub(crate) before: Option<Millis>,
}

const COLUMNS: &str = "id, org_id, project_id, at, actor_id, actor_kind, action, target, outcome, detail, occurrences";

fn condition(f: &AuditFilter) -> Result<(String, sqlx::any::AnyArguments)> {
    let mut w = Where::default();
    w.and("org_id =", f.org_id.clone())?;
    // The project's own rows, and the organization's rows that apply to it.
    add(&mut w.args, f.project_id.clone())?;
    w.clauses.push(format!("(project_id = ${} OR project_id IS NULL)", w.args.len()));
    for (column_op, value) in [("action =", &f.action), ("actor_id =", &f.actor_id), ("outcome =", &f.outcome)] {
        if let Some(v) = value {
            w.and(column_op, v.clone())?;
        }
    }
    if let Some(t) = f.from {
        w.and("at >=", t)?;
    }
    if let Some(t) = f.before {
        w.and("at <", t)?;
    }
    Ok((w.clauses.join(" AND "), w.args))
}

fn entry_from(r: &sqlx::any::AnyRow) -> Result<AuditEntry> {
    Ok(AuditEntry {
        id: r.try_get("id")?,
        org_id: r.try_get("org_id")?,
        project_id: r.try_get("project_id")?,
        at: r.try_get("at")?,
        actor_id: r.try_get("actor_id")?,
        actor_kind: r.try_get("actor_kind")?,
        action: r.try_get("action")?,
        target: r.try_get("target")?,
        outcome: r.try_get("outcome")?,
        detail: r.try_get("detail")?,
        occurrences: r.try_get("occurrences")?,
    })
}

impl Store {
    /// Appends `e`; when a row of its id exists (a repeat that `e.id` folds
    /// into it), counts it there instead.
    pub(crate) async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit_logs \
             (id, org_id, project_id, at, actor_id, actor_kind, action, target, outcome, detail, log_period) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (id, log_period, org_id) DO UPDATE SET occurrences = audit_logs.occurrences + 1",
        )
        .bind(&e.id)
        .bind(&e.org_id)
        .bind(&e.project_id)
        .bind(e.at)
        .bind(&e.actor_id)
        .bind(&e.actor_kind)
        .bind(&e.action)
        .bind(&e.target)
        .bind(&e.outcome)
        .bind(&e.detail)
        .bind(e.at.div_euclid(AUDIT_PERIOD_MS))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Up to `limit` rows matching `f`, newest first, after skipping `offset`.
    /// (The read replica while it is fresh, as `audit_count`.)
    pub(crate) async fn audit_page(&self, f: &AuditFilter, limit: u32, offset: u32) -> Result<Vec<AuditEntry>> {
        self.heavy_read(|pool| async move {
            let (condition, mut args) = condition(f)?;
            let n = args.len();
            let sql = format!(
                "SELECT {COLUMNS} FROM audit_logs WHERE {condition} ORDER BY at DESC, id DESC LIMIT ${} OFFSET ${}",
                n + 1,
                n + 2
            );
            add(&mut args, i64::from(limit))?;
            add(&mut args, i64::from(offset))?;
            let rows = sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).fetch_all(&pool).await?;
            rows.iter().map(entry_from).collect()
        })
        .await
    }

    pub(crate) async fn audit_count(&self, f: &AuditFilter) -> Result<u64> {
        self.heavy_read(|pool| async move {
            let (condition, args) = condition(f)?;
            let sql = format!("SELECT COUNT(*) AS n FROM audit_logs WHERE {condition}");
            let row = sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).fetch_one(&pool).await?;
            Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
        })
        .await
    }

    /// Deletes the audit rows older than `before`: on Postgres every 30-day
    /// period that ended by then, whole, and up to `limit` of the rows waiting
    /// in the default partition; on SQLite up to `limit` rows. How many rows
    /// went one by one.
    pub(crate) async fn delete_audit_before(&self, before: Millis, limit: u32) -> Result<u64> {
        let table = match self.dialect {
            Dialect::Postgres => {
                self.drop_audit_periods_before(before).await?;
                "audit_logs_default"
            }
            Dialect::Sqlite => "audit_logs",
        };
        let sql =
            format!("DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE at < $1 ORDER BY at LIMIT $2)");
        let done = sqlx::query(AssertSqlSafe(sql)).bind(before).bind(i64::from(limit)).execute(&self.pool).await?;
        Ok(done.rows_affected())
    }
}
