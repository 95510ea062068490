//! The history's day partitions (Postgres, migration 0018): an execution and
//! every row that belongs to it live in the partition of the day their
//! retention ends, so expiry drops a day whole. Partitions are created ahead
//! (attached to the parent, never `PARTITION OF`, which would lock the parent
//! exclusively) and dropped once the day is over. Every replica runs both;
//! an advisory lock makes one do each change.
//!
//! Rows whose day has no partition wait in the DEFAULT partitions: creating
//! that day's partition later moves them in, and expired ones there are
//! deleted row by row (store/sweep.rs). The audit log is partitioned the same
//! way by 30-day periods of `at` (store/audit.rs).

use super::history_counts::created_hour;
use super::{Dialect, Result, Store};
use crate::domain::Millis;
use sqlx::{AssertSqlSafe, Row};
use std::collections::BTreeSet;

pub(super) const DAY_MS: i64 = 86_400_000;
/// The audit log's partitions: periods of 30 days of `at`. The audit's fold
/// windows (`crate::audit`) divide it, so a fold never spans two periods.
pub(crate) const AUDIT_PERIOD_MS: i64 = 30 * DAY_MS;
/// The partitioned tables, parent first: a day is created and dropped for all four.
const TABLES: [&str; 4] = ["executions", "execution_events", "attempts", "input_requests"];
/// Days further ahead than this wait in the default partitions, so that a
/// very long retention does not mean thousands of empty tables.
const MAX_AHEAD_DAYS: i64 = 400;
/// The advisory lock key of partition changes.
const LOCK: i64 = 0x6261_746f_6e70; // "batonp"
/// How long a drop may wait for the parent's lock before trying again next
/// pass: the wait stalls the statements queued behind it.
const DROP_LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '200ms'";

/// The name of `table`'s partition for day `day` (days since the epoch).
pub(super) fn partition_name(table: &str, day: i64) -> String {
    format!("{table}_p{day}")
}

/// A condition over `pg_inherits i`, `pg_class c` (a partition) and `p` (its
/// parent) true for a day partition of `executions` whose day has ended by `$1`
/// (named as [`partition_name`] names them): the sweeper's probe for a day to drop.
pub(super) fn ended_day_condition() -> String {
    let prefix = partition_name("executions", 0);
    let prefix = prefix.trim_end_matches('0');
    format!(
        "p.relname = 'executions' AND p.relnamespace = c.relnamespace AND c.relname ~ '^{prefix}[0-9]+$' \
         AND (CAST(substr(c.relname, {}) AS BIGINT) + 1) * {DAY_MS} <= $1",
        prefix.len() + 1
    )
}

impl Store {
    /// The days that have a partition (of `executions`; the four tables change together).
    pub(crate) async fn partition_days(&self) -> Result<BTreeSet<i64>> {
        self.attached("executions").await
    }

    /// The numbers `n` of `parent`'s partitions named `<parent>_p<n>`.
    pub(super) async fn attached(&self, parent: &str) -> Result<BTreeSet<i64>> {
        if self.dialect != Dialect::Postgres {
            return Ok(BTreeSet::new());
        }
        let rows = sqlx::query(
            "SELECT c.relname::text AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = $1 AND p.relnamespace = c.relnamespace",
        )
        .bind(parent)
        .fetch_all(&self.pool)
        .await?;
        let prefix = format!("{parent}_p");
        let mut numbers = BTreeSet::new();
        for r in &rows {
            let name: String = r.try_get("name")?;
            if let Some(n) = name.strip_prefix(&prefix).and_then(|d| d.parse::<i64>().ok()) {
                numbers.insert(n);
            }
        }
        Ok(numbers)
    }

    /// Creates the audit log's partitions for `now`'s period and the next;
    /// how many it created.
    pub(crate) async fn ensure_audit_partitions(&self, now: Millis) -> Result<usize> {
        if self.dialect != Dialect::Postgres {
            return Ok(0);
        }
        let first = now.div_euclid(AUDIT_PERIOD_MS);
        let have = self.attached("audit_logs").await?;
        let mut created = 0;
        for period in (first..=first + 1).filter(|p| !have.contains(p)) {
            let mut tx = self.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(LOCK).execute(&mut *tx).await?;
            if exists(&mut tx, &partition_name("audit_logs", period)).await? {
                continue;
            }
            attach(&mut tx, "audit_logs", "log_period", period, period, period + 1).await?;
            self.commit(tx).await?;
            created += 1;
        }
        Ok(created)
    }

    /// Drops the audit log's periods that ended by `before`; how many.
    pub(crate) async fn drop_audit_periods_before(&self, before: Millis) -> Result<usize> {
        let mut dropped = 0;
        for period in self.attached("audit_logs").await? {
            if (period + 1) * AUDIT_PERIOD_MS > before {
                break;
            }
            let mut tx = self.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(LOCK).execute(&mut *tx).await?;
            sqlx::query(DROP_LOCK_TIMEOUT).execute(&mut *tx).await?;
            let part = partition_name("audit_logs", period);
            if exists(&mut tx, &part).await? {
                sqlx::query(AssertSqlSafe(format!("DROP TABLE {part}"))).execute(&mut *tx).await?;
                dropped += 1;
            }
            self.commit(tx).await?;
        }
        Ok(dropped)
    }

    /// The latest retention end a run created now can get: `max_ttl_ms`
    /// plus the longest window any organization, project or the default
    /// (`default_ms`) sets.
    pub(crate) async fn retention_horizon(&self, now: Millis, max_ttl_ms: i64, default_ms: i64) -> Result<Millis> {
        let longest: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(w) FROM (SELECT MAX(retention_ms) AS w FROM organizations \
             UNION ALL SELECT MAX(retention_ms) AS w FROM projects) AS windows",
        )
        .fetch_one(&self.pool)
        .await?;
        let window = longest.unwrap_or(0).max(default_ms);
        Ok(now.saturating_add(max_ttl_ms).saturating_add(window))
    }

    /// Creates the partitions of every day from `now`'s to `until`'s (at most
    /// `MAX_AHEAD_DAYS` ahead) that has none; how many days it created.
    pub async fn ensure_partitions(&self, now: Millis, until: Millis) -> Result<usize> {
        if self.dialect != Dialect::Postgres {
            return Ok(0);
        }
        let first = now.div_euclid(DAY_MS);
        let last = until.div_euclid(DAY_MS).clamp(first, first + MAX_AHEAD_DAYS);
        let have = self.partition_days().await?;
        let mut created = 0;
        for day in (first..=last).filter(|d| !have.contains(d)) {
            if self.create_day(day).await? {
                created += 1;
            }
        }
        Ok(created)
    }

    /// Creates day `day`'s partitions, moving in the rows that waited for it
    /// in the default partitions; false when another replica did it first.
    async fn create_day(&self, day: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(LOCK).execute(&mut *tx).await?;
        if exists(&mut tx, &partition_name("executions", day)).await? {
            return Ok(false);
        }
        for table in TABLES {
            attach(&mut tx, table, "retention_expires_at", day, day * DAY_MS, (day + 1) * DAY_MS).await?;
        }
        self.commit(tx).await?;
        Ok(true)
    }

    /// Drops the partitions of every day that ended by `now`, oldest first,
    /// each day in one transaction with the history sums it leaves; how many
    /// days it dropped. A day whose parent lock is not free at once is left
    /// for the next pass.
    pub(crate) async fn drop_expired_partitions(&self, now: Millis) -> Result<usize> {
        if self.dialect != Dialect::Postgres {
            return Ok(0);
        }
        let mut dropped = 0;
        for day in self.partition_days().await? {
            if (day + 1) * DAY_MS > now {
                break;
            }
            self.drop_day(day).await?;
            dropped += 1;
        }
        Ok(dropped)
    }

    async fn drop_day(&self, day: i64) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(LOCK).execute(&mut *tx).await?;
        sqlx::query(DROP_LOCK_TIMEOUT).execute(&mut *tx).await?;
        let runs = partition_name("executions", day);
        if !exists(&mut tx, &runs).await? {
            return Ok(());
        }
        // Hold the day still (a late deadline sweep may still write a row of
        // it) while the sums forget it, then drop it.
        sqlx::query(AssertSqlSafe(format!("LOCK TABLE {runs} IN SHARE MODE"))).execute(&mut *tx).await?;
        forget_partition(&mut tx, &runs).await?;
        let parts: Vec<String> = TABLES.iter().rev().map(|t| partition_name(t, day)).collect();
        sqlx::query(AssertSqlSafe(format!("DROP TABLE {}", parts.join(", ")))).execute(&mut *tx).await?;
        self.commit(tx).await?;
        Ok(())
    }
}

type Tx<'c> = sqlx::Transaction<'c, sqlx::Any>;

async fn exists(tx: &mut Tx<'_>, table: &str) -> Result<bool> {
    let found: Option<String> =
        sqlx::query_scalar("SELECT to_regclass($1)::text").bind(table).fetch_one(&mut **tx).await?;
    Ok(found.is_some())
}

/// Creates `table`'s partition number `n` for `key` in `[from, to)`, moving in
/// the rows that waited for it in `table`'s default partition.
async fn attach(tx: &mut Tx<'_>, table: &str, key: &str, n: i64, from: i64, to: i64) -> Result<()> {
    let part = partition_name(table, n);
    let range = format!("{key} >= {from} AND {key} < {to}");
    for sql in [
        format!("CREATE TABLE {part} (LIKE {table} INCLUDING DEFAULTS)"),
        format!("INSERT INTO {part} SELECT * FROM {table}_default WHERE {range}"),
        format!("DELETE FROM {table}_default WHERE {range}"),
        format!("ALTER TABLE {table} ATTACH PARTITION {part} FOR VALUES FROM ({from}) TO ({to})"),
    ] {
        sqlx::query(AssertSqlSafe(sql)).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Keeps the history sums true as the runs of partition `runs` leave (the
/// whole-day form of `history_counts::forget_deleted`): of the runs created
/// before their project's seal, a listed one leaves the list and a summed one
/// leaves its sum.
async fn forget_partition(tx: &mut Tx<'_>, runs: &str) -> Result<()> {
    // The seals of the day's projects, locked in one order (as forget_deleted).
    let lock = format!(
        "SELECT project_id FROM history_seals WHERE project_id IN (SELECT DISTINCT project_id FROM {runs}) \
         ORDER BY project_id FOR UPDATE"
    );
    sqlx::query(AssertSqlSafe(lock)).fetch_all(&mut **tx).await?;
    let hour = created_hour();
    let sql = format!(
        "WITH gone AS (SELECT r.id, r.project_id, r.status, COALESCE(r.failure_reason, '') AS failure_reason, \
         r.tool_name, r.toolkit_name, {hour} AS created_hour FROM {runs} r \
         JOIN history_seals s ON s.project_id = r.project_id WHERE r.created_at < s.sealed_before), \
         listed AS (DELETE FROM history_unsealed u USING gone g \
         WHERE u.project_id = g.project_id AND u.execution_id = g.id RETURNING u.execution_id), \
         summed AS (SELECT project_id, status, failure_reason, tool_name, toolkit_name, created_hour, COUNT(*) AS n \
         FROM gone WHERE NOT EXISTS (SELECT 1 FROM listed l WHERE l.execution_id = gone.id) \
         GROUP BY project_id, status, failure_reason, tool_name, toolkit_name, created_hour) \
         UPDATE history_sealed h SET n = h.n - summed.n FROM summed \
         WHERE h.project_id = summed.project_id AND h.status = summed.status \
         AND h.failure_reason = summed.failure_reason AND h.tool_name = summed.tool_name \
         AND h.toolkit_name = summed.toolkit_name AND h.created_hour = summed.created_hour"
    );
    sqlx::query(AssertSqlSafe(sql)).execute(&mut **tx).await?;
    // An hour whose runs have all left keeps no row (as `forget_deleted`).
    let empty =
        format!("DELETE FROM history_sealed WHERE n <= 0 AND project_id IN (SELECT DISTINCT project_id FROM {runs})");
    sqlx::query(AssertSqlSafe(empty)).execute(&mut **tx).await?;
    Ok(())
}
