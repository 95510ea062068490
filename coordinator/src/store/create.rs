//! Creating executions: one multi-row statement for the common case, and the
//! transaction that decides, once, what a taken Idempotency-Key answers.

use super::fence;
use super::records::{EXECUTION_COLUMNS, ExecutionRecord, NewExecution, execution_from_row};
use super::{Dialect, Error, Result, Store};
use crate::domain::{ExecutionId, Millis, State};
use sqlx::any::Any;
use sqlx::{AssertSqlSafe, Row, Transaction};
use std::collections::HashSet;

#[derive(Clone, Debug)]
pub struct Created {
    pub record: ExecutionRecord,
    /// True when an Idempotency-Key matched an existing execution.
    pub replayed: bool,
}

impl Store {
    /// Creates one execution: a plain insert, and only when its key is taken,
    /// the contended path that decides between the holder and a conflict.
    pub async fn create_execution(&self, new: &NewExecution) -> Result<Created> {
        // The common case writes without reading: a taken key shows as no row
        // inserted, and only then is the holder looked at.
        if let Some(created) = self.create_many(&[new]).await?.pop().flatten() {
            return Ok(created);
        }
        self.create_contended(new).await
    }

    /// A create whose plain insert found its Idempotency-Key taken (or SQLite's
    /// every create), in a transaction that locks the holder.
    pub(crate) async fn create_contended(&self, new: &NewExecution) -> Result<Created> {
        // A pass that freed an expired key can lose it to a concurrent create;
        // the next pass then finds the new holder.
        for _ in 0..2 {
            match self.create_in_transaction(new, Due::of(new)).await? {
                TxCreate::Inserted => return Ok(Created { record: inserted_record(new), replayed: false }),
                TxCreate::Raced => continue,
                TxCreate::Held(holder) => return answer_with_holder(*holder, new),
            }
        }
        Err(Error::IdempotencyConflict)
    }

    /// When `new`'s Idempotency-Key names live work, the answer it gets (its
    /// replay, or a conflict) without creating anything.
    pub(crate) async fn replay(&self, new: &NewExecution, now: Millis) -> Result<Option<Result<Created>>> {
        let Some(key) = new.idempotency_key.as_deref() else { return Ok(None) };
        let Some(holder) = self.find_idempotent(new, key, now).await? else { return Ok(None) };
        // The start may have authenticated from memory: a revoked caller is
        // told nothing, not even of its own execution.
        if sqlx::query(LIVE_CREDENTIAL).bind(&new.started_by).fetch_optional(&self.pool).await?.is_none() {
            return Err(Error::CredentialRevoked);
        }
        Ok(Some(answer_with_holder(holder, new)))
    }

    /// Postgres: inserts every row and its `created` event in one statement
    /// (one round trip, one commit); answers, in order, the execution created
    /// for each. A row whose Idempotency-Key is already held, whose
    /// admission is stale (store/fence.rs), whose credential was revoked or
    /// whose tool was disabled is skipped (None) for `create_contended` to
    /// answer. SQLite creates nothing here: its
    /// creates take the transaction.
    pub(crate) async fn create_many(&self, news: &[&NewExecution]) -> Result<Vec<Option<Created>>> {
        if self.dialect == Dialect::Sqlite || news.is_empty() {
            return Ok(vec![None; news.len()]);
        }
        let fence = fence::of_batch(news.iter().map(|n| n.admission_fence));
        let batch: Vec<&NewExecution> = news.iter().copied().filter(|n| n.admission_fence == fence).collect();
        let rows: Vec<String> = (0..batch.len()).map(|i| values_row(i * ROW_PARAMS + 1)).collect();
        let rows = rows.join(", ");
        let (fence_cte, guard) = fence::guard(fence.is_some(), batch.len() * ROW_PARAMS + 1);
        let live = started_by_live(guard, "r");
        // A keyed row is inserted only if its key row is: the key's
        // uniqueness lives in `execution_keys` (migration 0018).
        let sql = format!(
            "WITH {fence_cte}v AS (SELECT * FROM (VALUES {rows}) AS r ({INSERT_COLUMNS}){guard}{live}), \
             {KEYS_CTE}, \
             created AS (INSERT INTO executions ({INSERT_COLUMNS}) SELECT * FROM v \
             WHERE idempotency_key IS NULL OR id IN (SELECT execution_id FROM k) \
             RETURNING id, org_id, created_at, execution_type, retention_expires_at) \
             INSERT INTO execution_events (org_id, execution_id, seq, at, kind, status, detail, retention_expires_at) \
             SELECT org_id, id, 1, created_at, 'created', 'pending', execution_type, retention_expires_at \
             FROM created RETURNING execution_id"
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for new in &batch {
            query = bind_row(query, new, Due::of(new));
        }
        if let Some(generation) = fence {
            query = query.bind(generation);
        }
        // One statement per batch size: not worth a prepared statement each.
        let rows = self.autocommit(query.persistent(batch.len() == 1).fetch_all(&self.hot)).await?;
        let inserted: HashSet<String> = rows.iter().map(|r| r.try_get("execution_id")).collect::<Result<_, _>>()?;
        Ok(news
            .iter()
            .map(|new| {
                inserted.contains(new.id.as_str()).then(|| Created { record: inserted_record(new), replayed: false })
            })
            .collect())
    }

    /// The create as one transaction: SQLite's path, and Postgres' when the
    /// key is taken (then the holder is locked and either answers the request
    /// or, past retention, is deleted to free the key).
    async fn create_in_transaction(&self, new: &NewExecution, due: Due) -> Result<TxCreate> {
        let mut tx = self.begin().await?;
        fence::hold(&mut tx, self.dialect, new.admission_fence).await?;
        let live = sqlx::query(LIVE_CREDENTIAL).bind(&new.started_by).fetch_optional(&mut *tx).await?;
        if live.is_none() {
            return Err(Error::CredentialRevoked);
        }
        let disabled =
            sqlx::query(DISABLED_TOOL).bind(&new.project_id).bind(&new.tool_name).fetch_optional(&mut *tx).await?;
        if disabled.is_some() {
            return Err(Error::ToolDisabled);
        }
        if let Some(key) = new.idempotency_key.as_deref()
            && !insert_key(&mut tx, new, key).await?
        {
            let sql = format!(
                "SELECT execution_id, retention_expires_at FROM execution_keys \
                 WHERE org_id = $1 AND project_id = $2 AND user_id = $3 AND idempotency_key = $4{}",
                self.dialect.for_update()
            );
            let held = sqlx::query(AssertSqlSafe(sql))
                .bind(&new.org_id)
                .bind(&new.project_id)
                .bind(&new.user_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(held) = held {
                let (holder_id, expires): (String, Millis) =
                    (held.try_get("execution_id")?, held.try_get("retention_expires_at")?);
                let holder_id = super::records::parse_id(holder_id)?;
                if expires > new.created_at
                    && let Some(holder) = execution_by_id(&mut tx, &holder_id, expires).await?
                {
                    self.commit(tx).await?;
                    return Ok(TxCreate::Held(Box::new(holder)));
                }
                // Past retention the holder is gone for every reader (its
                // rows leave with their partition): free the key.
                sqlx::query(
                    "DELETE FROM execution_keys \
                     WHERE org_id = $1 AND project_id = $2 AND user_id = $3 AND idempotency_key = $4",
                )
                .bind(&new.org_id)
                .bind(&new.project_id)
                .bind(&new.user_id)
                .bind(key)
                .execute(&mut *tx)
                .await?;
            }
            if !insert_key(&mut tx, new, key).await? {
                return Ok(TxCreate::Raced);
            }
        }
        let query = bind_row(sqlx::query(AssertSqlSafe(INSERT_ONE.as_str())), new, due.clone());
        query.execute(&mut *tx).await?;
        insert_event(&mut tx, new, "created", "pending", Some(due.execution_type)).await?;
        self.commit(tx).await?;
        Ok(TxCreate::Inserted)
    }

    /// The live execution an Idempotency-Key of `new`'s caller already names, if any.
    pub(crate) async fn find_idempotent(
        &self,
        new: &NewExecution,
        key: &str,
        now: Millis,
    ) -> Result<Option<ExecutionRecord>> {
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions e JOIN execution_keys k \
             ON e.id = k.execution_id AND e.retention_expires_at = k.retention_expires_at \
             WHERE k.org_id = $1 AND k.project_id = $2 AND k.user_id = $3 AND k.idempotency_key = $4 \
             AND k.retention_expires_at > $5",
            EXECUTION_COLUMNS = qualified_columns()
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(&new.org_id)
            .bind(&new.project_id)
            .bind(&new.user_id)
            .bind(key)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(execution_from_row).transpose()
    }
}

const INSERT_COLUMNS: &str = "id, org_id, project_id, gateway_id, tool_name, toolkit_name, toolkit_version, \
    user_id, started_by, surface, execution_type, status, not_before, attempts, max_attempts, cancel_requested, \
    created_at, scheduled_at, updated_at, execution_deadline, retention_expires_at, poll_interval_ms, \
    idempotency_key, request_fingerprint, input_ct, payload_bytes, traceparent, version";

/// The CTE `k`: the key rows of `v`'s keyed rows that were free, taken.
/// A create's credential and tool are checked in the statement that writes
/// it: a start may have read them from memory (`engine/batch/start_reads.rs`),
/// and a revocation or a tool disabled since must refuse it. `credentials` and
/// `tools` are reference tables (one copy on every node when distributed), so
/// this reads no other shard.
const LIVE_CREDENTIAL: &str = "SELECT 1 FROM credentials WHERE id = $1 AND revoked_at IS NULL";
const DISABLED_TOOL: &str = "SELECT 1 FROM tools WHERE project_id = $1 AND name = $2 AND disabled_at IS NOT NULL";

/// The condition, after `guard` (the fence's `WHERE`, or nothing), that keeps
/// only the rows of `alias` whose starting credential is live and whose tool
/// is not disabled.
pub(super) fn started_by_live(guard: &str, alias: &str) -> String {
    let joiner = if guard.is_empty() { " WHERE" } else { " AND" };
    format!(
        "{joiner} EXISTS (SELECT 1 FROM credentials c WHERE c.id = {alias}.started_by AND c.revoked_at IS NULL) \
         AND NOT EXISTS (SELECT 1 FROM tools t WHERE t.project_id = {alias}.project_id \
         AND t.name = {alias}.tool_name AND t.disabled_at IS NOT NULL)"
    )
}

pub(super) const KEYS_CTE: &str = "k AS (INSERT INTO execution_keys \
    (org_id, project_id, user_id, idempotency_key, execution_id, retention_expires_at) \
    SELECT org_id, project_id, user_id, idempotency_key, id, retention_expires_at FROM v \
    WHERE idempotency_key IS NOT NULL ON CONFLICT DO NOTHING RETURNING execution_id)";

/// `EXECUTION_COLUMNS` of the table aliased `e`.
fn qualified_columns() -> String {
    EXECUTION_COLUMNS.split(',').map(|c| format!("e.{}", c.trim())).collect::<Vec<_>>().join(", ")
}

/// One row of `INSERT_COLUMNS`: `$k` is the k-th of the row's `ROW_PARAMS`
/// bound values (see `bind_row`), the rest are literals.
const ROW: [&str; 28] = [
    "$1",
    "$2",
    "$3",
    "$4",
    "$5",
    "$6",
    "$7",
    "$8",
    "$9",
    "$10",
    "$11",
    "'pending'",
    "$12",
    "0",
    "$13",
    "0",
    "$14",
    "$15",
    "$14",
    "$16",
    "$17",
    "$18",
    "$19",
    "$20",
    "$21",
    "$22",
    "$23",
    "1",
];
const ROW_PARAMS: usize = 23;

/// The one rule for a taken Idempotency-Key: the same request gets the
/// execution that holds the key; anything else is a conflict.
fn answer_with_holder(holder: ExecutionRecord, new: &NewExecution) -> Result<Created> {
    if holder.request_fingerprint == new.request_fingerprint {
        Ok(Created { record: holder, replayed: true })
    } else {
        Err(Error::IdempotencyConflict)
    }
}

/// The VALUES tuple of one row whose parameters are numbered from `first`.
fn values_row(first: usize) -> String {
    let cells: Vec<String> = ROW
        .iter()
        .map(|cell| match cell.strip_prefix('$').and_then(|k| k.parse::<usize>().ok()) {
            Some(k) => format!("${}", first + k - 1),
            None => (*cell).to_owned(),
        })
        .collect();
    format!("({})", cells.join(", "))
}

static INSERT_ONE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("INSERT INTO executions ({INSERT_COLUMNS}) VALUES {}", values_row(1)));

/// The row as just inserted, without reading it back (also what `bulk` seeds).
pub(super) fn inserted_record(new: &NewExecution) -> ExecutionRecord {
    let due = Due::of(new);
    ExecutionRecord {
        id: new.id.clone(),
        org_id: new.org_id.clone(),
        project_id: new.project_id.clone(),
        gateway_id: new.gateway_id.clone(),
        tool_name: new.tool_name.clone(),
        toolkit_name: new.toolkit_name.clone(),
        toolkit_version: new.toolkit_version.clone(),
        user_id: new.user_id.clone(),
        started_by: new.started_by.clone(),
        surface: new.surface.clone(),
        execution_type: due.execution_type.to_owned(),
        state: due.state,
        error_message: None,
        summary: None,
        created_at: new.created_at,
        scheduled_at: due.scheduled_at,
        started_at: None,
        finished_at: None,
        updated_at: new.created_at,
        execution_deadline: new.execution_deadline,
        retention_expires_at: new.retention_expires_at,
        poll_interval_ms: new.poll_interval_ms,
        idempotency_key: new.idempotency_key.clone(),
        request_fingerprint: new.request_fingerprint.clone(),
        input_ct: Some(new.input_ct.clone()),
        output_ct: None,
        error_detail_ct: None,
        payload_bytes: new.payload_bytes,
        traceparent: new.traceparent.clone(),
        remote_task_id: None,
        version: 1,
        changed_version: 1,
        progress: None,
    }
}

enum TxCreate {
    Inserted,
    /// The Idempotency-Key belongs to this live execution.
    Held(Box<ExecutionRecord>),
    /// The key was freed and taken again meanwhile: try once more.
    Raced,
}

/// Where and when a new execution first becomes due, and its first state.
#[derive(Clone)]
struct Due {
    execution_type: &'static str,
    not_before: Millis,
    scheduled_at: Option<Millis>,
    state: State,
}

impl Due {
    fn of(new: &NewExecution) -> Due {
        let (execution_type, not_before, scheduled_at) = match new.run_at {
            Some(at) if at > new.created_at => ("scheduled", at, Some(at)),
            _ => ("immediate", new.created_at, None),
        };
        let state = State::new(not_before, new.execution_deadline, new.max_attempts);
        Due { execution_type, not_before, scheduled_at, state }
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

/// `query` with one more row's `ROW_PARAMS` values bound.
fn bind_row<'q>(query: AnyQuery<'q>, new: &'q NewExecution, due: Due) -> AnyQuery<'q> {
    query
        .bind(new.id.as_str())
        .bind(&new.org_id)
        .bind(&new.project_id)
        .bind(&new.gateway_id)
        .bind(&new.tool_name)
        .bind(&new.toolkit_name)
        .bind(&new.toolkit_version)
        .bind(&new.user_id)
        .bind(&new.started_by)
        .bind(&new.surface)
        .bind(due.execution_type)
        .bind(due.not_before)
        .bind(i64::from(due.state.max_attempts))
        .bind(new.created_at)
        .bind(due.scheduled_at)
        .bind(new.execution_deadline)
        .bind(new.retention_expires_at)
        .bind(new.poll_interval_ms)
        .bind(&new.idempotency_key)
        .bind(&new.request_fingerprint)
        .bind(&new.input_ct)
        .bind(new.payload_bytes)
        .bind(&new.traceparent)
}

/// Takes `key` for `new`; false when it is already held.
async fn insert_key(tx: &mut Transaction<'_, Any>, new: &NewExecution, key: &str) -> Result<bool> {
    let done = sqlx::query(
        "INSERT INTO execution_keys (org_id, project_id, user_id, idempotency_key, execution_id, retention_expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
    )
    .bind(&new.org_id)
    .bind(&new.project_id)
    .bind(&new.user_id)
    .bind(key)
    .bind(new.id.as_str())
    .bind(new.retention_expires_at)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The execution `id` whose retention ends at `expires` (its partition), if any.
async fn execution_by_id(
    tx: &mut Transaction<'_, Any>,
    id: &ExecutionId,
    expires: Millis,
) -> Result<Option<ExecutionRecord>> {
    let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1 AND retention_expires_at = $2");
    let row = sqlx::query(AssertSqlSafe(sql)).bind(id.as_str()).bind(expires).fetch_optional(&mut **tx).await?;
    row.as_ref().map(execution_from_row).transpose()
}

/// The first event of `new`.
async fn insert_event(
    tx: &mut Transaction<'_, Any>,
    new: &NewExecution,
    kind: &str,
    status: &str,
    detail: Option<&str>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO execution_events (org_id, execution_id, seq, at, kind, status, detail, retention_expires_at) \
         VALUES ($1, $2, 1, $3, $4, $5, $6, $7)",
    )
    .bind(&new.org_id)
    .bind(new.id.as_str())
    .bind(new.created_at)
    .bind(kind)
    .bind(status)
    .bind(detail)
    .bind(new.retention_expires_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
