//! Counting a project's history without reading every run.
//!
//! A count used to be one index entry per run counted: 150–200 ms for a
//! project of a million runs on a quiet 2-core machine. A finished run never
//! changes its status, failure reason, tool, toolkit or creation time, so the
//! background *seal* counts each finished run once and keeps sums per those
//! four and the hour it was created in (`history_sealed`); a count adds the
//! sums to the few runs it still reads row by row. Nothing on the write path
//! of an execution changes.
//!
//! The invariant, per project, with `W` = `history_seals.sealed_before`: every
//! run created before `W` that still exists is either
//! - summed in `history_sealed` (it had finished when it was sealed), or
//! - listed in `history_unsealed` (it had not; moved to the sums by a later
//!   seal once it has finished).
//!
//! Hence the runs matching a filter and still within retention are the sums,
//! less the summed runs past retention not yet deleted, plus the listed runs
//! within retention, plus the runs created at or after `W` within retention;
//! read in one statement, so one snapshot. The subtracted and listed terms are
//! small: the sweeper's backlog of expired runs (it decrements the sums as it
//! deletes) and the runs in flight for longer than the seal margin. A time
//! range is split into the whole hours inside it, counted as above, and its
//! two partial edge hours, counted row by row.
//!
//! Why a margin: `created_at` is the coordinator's clock when it built the
//! insert, not the commit's. Sealing only runs created more than
//! [`SEAL_MARGIN_MS`] ago assumes every create commits within that long of
//! its timestamp (creates are one short statement, bounded by the pool's
//! acquire timeout) and that coordinator clocks agree to well within it.
//!
//! Concurrency: a seal and the sweeper's decrement both lock the project's
//! `history_seals` row first, so they never interleave on one project. A
//! deletion the seal could not see yet (uncommitted) is decremented by the
//! sweeper after the seal commits, because it reads `W` under that lock.
//! Replicas seal different projects at once (`SKIP LOCKED`).

use super::history_filter::{HistoryFilter, Where, add, narrowing};
use super::records::parse_id;
use super::{Error, Result, Store};
use crate::domain::{ExecutionId, Millis};
use sqlx::any::{Any, AnyArguments};
use sqlx::{Arguments, AssertSqlSafe, Row, Transaction};
use std::collections::BTreeMap;

/// Runs created within this long of a seal are left to be counted row by row.
pub(super) const SEAL_MARGIN_MS: i64 = 5 * 60 * 1000;

/// The sums' time grain: a range's partial hours at either end are counted
/// row by row, so a finer grain reads fewer runs and more sums.
const HOUR_MS: i64 = 60 * 60 * 1000;

const TERMINAL: &str = "status IN ('completed', 'failed', 'cancelled')";

/// What the sums are kept by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SealedKey {
    pub(crate) status: String,
    /// '' when the run has none.
    pub(crate) failure_reason: String,
    pub(crate) tool_name: String,
    pub(crate) toolkit_name: String,
    /// `created_at` rounded down to the hour.
    pub(crate) created_hour: Millis,
}

impl SealedKey {
    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self> {
        Ok(SealedKey {
            status: r.try_get("status")?,
            failure_reason: r.try_get("failure_reason")?,
            tool_name: r.try_get("tool_name")?,
            toolkit_name: r.try_get("toolkit_name")?,
            created_hour: r.try_get("created_hour")?,
        })
    }
}

/// A run's `created_at` rounded down to the hour, in SQL (it is never negative).
pub(super) fn created_hour() -> String {
    format!("(created_at / {HOUR_MS}) * {HOUR_MS}")
}

/// The columns of a run that [`SealedKey`] reads, as `from_row` names them.
pub(super) fn key_columns() -> String {
    format!(
        "status, COALESCE(failure_reason, '') AS failure_reason, tool_name, toolkit_name, {} AS created_hour",
        created_hour()
    )
}

/// The whole hours inside `f`'s time range: `created_from` rounded up and
/// `created_before` rounded down. `None` when the range holds no whole hour,
/// so it is narrow enough to count row by row.
fn whole_hours(f: &HistoryFilter) -> Option<(Option<Millis>, Option<Millis>)> {
    let from = match f.created_from {
        Some(t) => Some(t.checked_add(HOUR_MS - 1)?.div_euclid(HOUR_MS) * HOUR_MS),
        None => None,
    };
    let before = f.created_before.map(|t| t.div_euclid(HOUR_MS) * HOUR_MS);
    match (from, before) {
        (Some(a), Some(b)) if a >= b => None,
        hours => Some(hours),
    }
}

/// Whether the sums can answer `f`: they are kept per status, failure reason,
/// tool, toolkit and hour, so a user filter, or a range within two hours, is
/// counted row by row.
pub(super) fn served(f: &HistoryFilter) -> bool {
    f.user_id.is_none() && whole_hours(f).is_some()
}

/// The count of `f` (which [`served`] accepts) at `now`, as one statement.
pub(super) fn count_statement(f: &HistoryFilter, now: Millis) -> Result<(String, AnyArguments)> {
    let (from_hour, before_hour) =
        whole_hours(f).ok_or_else(|| Error::Corrupt("a count too narrow for the sums".into()))?;
    // The filter without its range names only columns `history_sealed` shares
    // with `executions`, so it reads both; `project_id = $1` comes first.
    let Where { clauses, mut args } =
        narrowing(&HistoryFilter { created_from: None, created_before: None, ..f.clone() })?;
    let base = clauses.join(" AND ");
    let mut bind = |v: Millis| -> Result<String> {
        add(&mut args, v)?;
        Ok(format!("${}", args.len()))
    };
    let now = bind(now)?;
    let (mut sums, mut rows, mut edges) = (base.clone(), base.clone(), String::new());
    let live = format!("{base} AND retention_expires_at > {now}");
    // `whole_hours` rounds each bound the filter sets, so both are set or neither.
    for (hour, exact, op) in [(from_hour, f.created_from, ">="), (before_hour, f.created_before, "<")] {
        let (Some(hour), Some(exact)) = (hour, exact) else { continue };
        let (h, t) = (bind(hour)?, bind(exact)?);
        sums.push_str(&format!(" AND created_hour {op} {h}"));
        rows.push_str(&format!(" AND created_at {op} {h}"));
        // The partial hour between the exact bound and the whole hours.
        let (low, high) = if op == ">=" { (&t, &h) } else { (&h, &t) };
        edges.push_str(&format!(
            " + (SELECT COUNT(*) FROM executions WHERE {live} AND created_at >= {low} AND created_at < {high})"
        ));
    }
    let listed = "SELECT execution_id FROM history_unsealed WHERE project_id = $1";
    let sql = format!(
        "WITH seal AS (SELECT COALESCE(MAX(sealed_before), 0) AS w FROM history_seals WHERE project_id = $1) \
         SELECT (SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM history_sealed WHERE {sums}) \
         - (SELECT COUNT(*) FROM executions WHERE {rows} AND retention_expires_at <= {now} \
            AND created_at < (SELECT w FROM seal) AND id NOT IN ({listed})) \
         + (SELECT COUNT(*) FROM executions WHERE {rows} AND retention_expires_at > {now} AND id IN ({listed})) \
         + (SELECT COUNT(*) FROM executions WHERE {rows} AND retention_expires_at > {now} \
            AND created_at >= (SELECT w FROM seal)){edges} AS n"
    );
    Ok((sql, args))
}

/// A run the sweeper deleted, as the sums know it.
pub(super) struct DeletedRun {
    pub(crate) id: ExecutionId,
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) created_at: Millis,
    pub(crate) key: SealedKey,
}

impl DeletedRun {
    pub(super) fn from_row(r: &sqlx::any::AnyRow) -> Result<Self> {
        Ok(DeletedRun {
            id: parse_id(r.try_get("id")?)?,
            org_id: r.try_get("org_id")?,
            project_id: r.try_get("project_id")?,
            created_at: r.try_get("created_at")?,
            key: SealedKey::from_row(r)?,
        })
    }
}

/// The project whose sums change, with its organization (part of every key).
#[derive(Clone, Copy)]
struct Owner<'a> {
    org_id: &'a str,
    project_id: &'a str,
}

/// Adds `by` to the sum of `key` in the project.
async fn add_to_sum(tx: &mut Transaction<'_, Any>, owner: Owner<'_>, key: &SealedKey, by: i64) -> Result<()> {
    let project_id = owner.project_id;
    sqlx::query(
        "INSERT INTO history_sealed \
         (org_id, project_id, status, failure_reason, tool_name, toolkit_name, created_hour, n) \
         VALUES ($8, $1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (org_id, project_id, status, failure_reason, tool_name, toolkit_name, created_hour) \
         DO UPDATE SET n = history_sealed.n + excluded.n",
    )
    .bind(project_id)
    .bind(&key.status)
    .bind(&key.failure_reason)
    .bind(&key.tool_name)
    .bind(&key.toolkit_name)
    .bind(key.created_hour)
    .bind(by)
    .bind(owner.org_id)
    .execute(&mut **tx)
    .await?;
    if by < 0 {
        // An hour whose runs have all expired leaves no row behind, so the
        // sums stay as many as the retained hours.
        sqlx::query(
            "DELETE FROM history_sealed WHERE project_id = $1 AND status = $2 AND failure_reason = $3 \
             AND tool_name = $4 AND toolkit_name = $5 AND created_hour = $6 AND n <= 0",
        )
        .bind(project_id)
        .bind(&key.status)
        .bind(&key.failure_reason)
        .bind(&key.tool_name)
        .bind(&key.toolkit_name)
        .bind(key.created_hour)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Keeps the sums true as the sweeper deletes `runs` (in its transaction): a
/// summed run leaves its sum, a listed one leaves the list.
pub(super) async fn forget_deleted(
    tx: &mut Transaction<'_, Any>,
    dialect: super::Dialect,
    runs: &[DeletedRun],
) -> Result<()> {
    let mut by_project: BTreeMap<(&str, &str), Vec<&DeletedRun>> = BTreeMap::new();
    for r in runs {
        by_project.entry((&r.project_id, &r.org_id)).or_default().push(r);
    }
    // Projects in one order, so two sweepers never wait on each other in a cycle.
    for ((project_id, org_id), runs) in by_project {
        let sql = format!("SELECT sealed_before FROM history_seals WHERE project_id = $1{}", dialect.for_update());
        let Some(row) = sqlx::query(AssertSqlSafe(sql)).bind(project_id).fetch_optional(&mut **tx).await? else {
            continue;
        };
        let sealed_before: Millis = row.try_get("sealed_before")?;
        let mut leaving: BTreeMap<&SealedKey, i64> = BTreeMap::new();
        for r in runs.into_iter().filter(|r| r.created_at < sealed_before) {
            let listed = sqlx::query("DELETE FROM history_unsealed WHERE project_id = $1 AND execution_id = $2")
                .bind(project_id)
                .bind(r.id.as_str())
                .execute(&mut **tx)
                .await?;
            if listed.rows_affected() == 0 {
                *leaving.entry(&r.key).or_default() += 1;
            }
        }
        for (key, n) in leaving {
            add_to_sum(tx, Owner { org_id, project_id }, key, -n).await?;
        }
    }
    Ok(())
}

impl Store {
    /// Seals `project_id`'s runs created up to [`SEAL_MARGIN_MS`] before
    /// `now`, and moves listed runs that have since finished into the sums.
    /// False when another replica is sealing it.
    pub async fn seal_history(&self, org_id: &str, project_id: &str, now: Millis) -> Result<bool> {
        let owner = Owner { org_id, project_id };
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO history_seals (org_id, project_id, sealed_before) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING",
        )
        .bind(org_id)
        .bind(project_id)
        .execute(&mut *tx)
        .await?;
        let lock = format!(
            "SELECT sealed_before FROM history_seals WHERE project_id = $1{}",
            self.dialect.for_update_skip_locked()
        );
        let Some(row) = sqlx::query(AssertSqlSafe(lock)).bind(project_id).fetch_optional(&mut *tx).await? else {
            return Ok(false);
        };
        let from: Millis = row.try_get("sealed_before")?;
        let to = now.saturating_sub(SEAL_MARGIN_MS).max(from);

        // Order matters: list what is unfinished first, then sum the rest of
        // the range excluding what was listed. A run finishing between the two
        // statements is then listed (and moved later), never in neither.
        let unfinished = format!(
            "INSERT INTO history_unsealed (org_id, project_id, execution_id) SELECT org_id, project_id, id FROM executions \
             WHERE project_id = $1 AND created_at >= $2 AND created_at < $3 AND NOT {TERMINAL}"
        );
        sqlx::query(AssertSqlSafe(unfinished)).bind(project_id).bind(from).bind(to).execute(&mut *tx).await?;
        let hour = created_hour();
        let finished = format!(
            "INSERT INTO history_sealed \
             (org_id, project_id, status, failure_reason, tool_name, toolkit_name, created_hour, n) \
             SELECT org_id, project_id, status, COALESCE(failure_reason, ''), tool_name, toolkit_name, \
             {hour}, COUNT(*) \
             FROM executions WHERE project_id = $1 AND created_at >= $2 AND created_at < $3 AND {TERMINAL} \
             AND id NOT IN (SELECT execution_id FROM history_unsealed WHERE project_id = $1) \
             GROUP BY org_id, project_id, status, COALESCE(failure_reason, ''), tool_name, toolkit_name, {hour} \
             ON CONFLICT (org_id, project_id, status, failure_reason, tool_name, toolkit_name, created_hour) \
             DO UPDATE SET n = history_sealed.n + excluded.n"
        );
        sqlx::query(AssertSqlSafe(finished)).bind(project_id).bind(from).bind(to).execute(&mut *tx).await?;

        // Listed runs that have finished since: a finished run never changes again.
        let done = format!(
            "SELECT id, {} FROM executions \
             WHERE id IN (SELECT execution_id FROM history_unsealed WHERE project_id = $1) AND {TERMINAL}",
            key_columns()
        );
        let rows = sqlx::query(AssertSqlSafe(done)).bind(project_id).fetch_all(&mut *tx).await?;
        let mut moving: BTreeMap<SealedKey, i64> = BTreeMap::new();
        for r in &rows {
            let id: String = r.try_get("id")?;
            sqlx::query("DELETE FROM history_unsealed WHERE project_id = $1 AND execution_id = $2")
                .bind(project_id)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
            *moving.entry(SealedKey::from_row(r)?).or_default() += 1;
        }
        for (key, n) in &moving {
            add_to_sum(&mut tx, owner, key, *n).await?;
        }
        sqlx::query("UPDATE history_seals SET sealed_before = $1 WHERE project_id = $2")
            .bind(to)
            .bind(project_id)
            .execute(&mut *tx)
            .await?;
        self.commit(tx).await?;
        Ok(true)
    }

    /// Seals every project (see [`Store::seal_history`]); how many it sealed.
    /// A project that fails is logged and left for the next pass.
    pub(crate) async fn seal_histories(&self, now: Millis) -> Result<usize> {
        let rows = sqlx::query("SELECT id, org_id FROM projects").fetch_all(&self.pool).await?;
        let mut sealed = 0;
        for r in &rows {
            let (id, org_id): (String, String) = (r.try_get("id")?, r.try_get("org_id")?);
            match self.seal_history(&org_id, &id, now).await {
                Ok(true) => sealed += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(project_id = %id, error = %e, "sealing history counts failed"),
            }
        }
        Ok(sealed)
    }
}
