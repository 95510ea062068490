//! Execution rows: create (with idempotency), read, list, claim, and the one
//! read-modify-write path every other transition takes (`apply`).

use super::records::{
    AttemptRecord, EXECUTION_COLUMNS, ExecutionRecord, NewExecution, attempt_from_row, execution_from_row,
};
use super::write::{Pending, persist_many};
use super::{Dialect, Error, Result, Store};
use crate::domain::{self, Effect, Event, Millis, State, Transition};
use sqlx::any::Any;
use sqlx::{AssertSqlSafe, Row, Transaction};
use std::collections::HashSet;

/// Payload and message data that accompanies an event (settlements mostly).
#[derive(Clone, Debug, Default)]
pub struct EventData {
    pub output_ct: Option<Vec<u8>>,
    pub error_message: Option<String>,
    pub error_detail_ct: Option<Vec<u8>>,
    pub summary: Option<String>,
    /// Extra bytes this event adds to the execution's retained payload.
    pub payload_bytes: i64,
    /// With `RemoteTaskRecorded`: the remote task id.
    pub remote_task_id: Option<String>,
    /// With `InputRequested`: (published key, remote key, sealed spec) per request.
    pub new_input_requests: Vec<(String, String, Vec<u8>)>,
}

#[derive(Clone, Debug)]
pub struct Created {
    pub record: ExecutionRecord,
    /// True when an Idempotency-Key matched an existing execution.
    pub replayed: bool,
}

#[derive(Clone, Debug)]
pub struct Applied {
    pub record: ExecutionRecord,
    pub effects: Vec<Effect>,
}

#[derive(Clone, Debug)]
pub struct Claimed {
    pub record: ExecutionRecord,
    pub attempt: u32,
}

/// Whose executions a list shows: an end user's, or those one API key started.
#[derive(Clone, Debug)]
pub enum ListFilter {
    User { project_id: String, user_id: String, gateway_id: Option<String> },
    StartedBy { project_id: String, credential_id: String },
}

impl Store {
    pub async fn create_execution(&self, new: &NewExecution) -> Result<Created> {
        // A pass that freed an expired key can lose it to a concurrent create;
        // the next pass then finds the new holder.
        for _ in 0..2 {
            if let Some(created) = self.try_create(new).await? {
                return Ok(created);
            }
        }
        Err(Error::IdempotencyConflict)
    }

    async fn try_create(&self, new: &NewExecution) -> Result<Option<Created>> {
        // The common case writes without reading: a taken key shows as no row
        // inserted, and only then is the holder looked at.
        if let Some(created) = self.create_many(&[new]).await?.pop().flatten() {
            return Ok(Some(created));
        }
        match self.create_in_transaction(new, Due::of(new)).await? {
            TxCreate::Inserted => Ok(Some(Created { record: inserted_record(new), replayed: false })),
            TxCreate::Raced => Ok(None),
            TxCreate::Held(existing) if existing.request_fingerprint == new.request_fingerprint => {
                Ok(Some(Created { record: *existing, replayed: true }))
            }
            TxCreate::Held(_) => Err(Error::IdempotencyConflict),
        }
    }

    /// Postgres: inserts every row and its `created` event in one statement
    /// (one round trip, one commit); answers, in order, the execution created
    /// for each. A row whose Idempotency-Key is already held is skipped (None)
    /// for `create_execution` to answer. SQLite creates nothing here: its
    /// creates take the transaction.
    pub async fn create_many(&self, news: &[&NewExecution]) -> Result<Vec<Option<Created>>> {
        if self.dialect == Dialect::Sqlite || news.is_empty() {
            return Ok(vec![None; news.len()]);
        }
        let rows: Vec<String> = (0..news.len()).map(|i| values_row(i * ROW_PARAMS + 1)).collect();
        let sql = format!(
            "WITH created AS (INSERT INTO executions ({INSERT_COLUMNS}) VALUES {} {ON_KEY_CONFLICT} \
             RETURNING id, created_at, execution_type) \
             INSERT INTO execution_events (execution_id, seq, at, kind, status, detail) \
             SELECT id, 1, created_at, 'created', 'pending', execution_type FROM created RETURNING execution_id",
            rows.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for new in news {
            query = bind_row(query, new, Due::of(new));
        }
        // One statement per batch size: not worth a prepared statement each.
        let rows = query.persistent(news.len() == 1).fetch_all(&self.pool).await?;
        let inserted: HashSet<String> = rows.iter().map(|r| r.try_get("execution_id")).collect::<Result<_, _>>()?;
        Ok(news
            .iter()
            .map(|new| inserted.contains(&new.id).then(|| Created { record: inserted_record(new), replayed: false }))
            .collect())
    }

    /// The create as one transaction: SQLite's path, and Postgres' when the
    /// key is taken (then the holder is locked and either answers the request
    /// or, past retention, is deleted to free the key).
    async fn create_in_transaction(&self, new: &NewExecution, due: Due) -> Result<TxCreate> {
        let mut tx = self.pool.begin().await?;
        if !insert_execution(&mut tx, new, &due).await? {
            let key = new.idempotency_key.as_deref().ok_or_else(|| Error::Corrupt(new.id.clone()))?;
            let sql = format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions WHERE project_id = $1 AND user_id = $2 AND idempotency_key = $3{}",
                self.dialect.for_update()
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(&new.project_id)
                .bind(&new.user_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(row) = row {
                let existing = execution_from_row(&row)?;
                if existing.retention_expires_at > new.created_at {
                    tx.commit().await?;
                    return Ok(TxCreate::Held(Box::new(existing)));
                }
                // Past retention the record is gone for every reader; free the key.
                delete_execution(&mut tx, &existing.id).await?;
            }
            if !insert_execution(&mut tx, new, &due).await? {
                return Ok(TxCreate::Raced);
            }
        }
        insert_event(&mut tx, &new.id, 1, new.created_at, "created", "pending", Some(due.execution_type)).await?;
        tx.commit().await?;
        Ok(TxCreate::Inserted)
    }

    /// The live execution an Idempotency-Key already names, if any.
    pub async fn find_idempotent(
        &self,
        project_id: &str,
        user_id: &str,
        key: &str,
        now: Millis,
    ) -> Result<Option<ExecutionRecord>> {
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE project_id = $1 AND user_id = $2 \
             AND idempotency_key = $3 AND retention_expires_at > $4"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(project_id)
            .bind(user_id)
            .bind(key)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(execution_from_row).transpose()
    }

    pub async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1");
        let row = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(execution_from_row).transpose()
    }

    /// Newest first; `after` is the (created_at, id) of the last row of the previous page.
    pub async fn list_executions(
        &self,
        filter: &ListFilter,
        now: Millis,
        limit: u32,
        after: Option<(Millis, String)>,
    ) -> Result<Vec<ExecutionRecord>> {
        let (scope, a, b, c) = match filter {
            ListFilter::User { project_id, user_id, gateway_id: Some(g) } => {
                ("project_id = $1 AND user_id = $2 AND gateway_id = $3", project_id, user_id, Some(g))
            }
            ListFilter::User { project_id, user_id, gateway_id: None } => {
                ("project_id = $1 AND user_id = $2 AND $3 IS NULL", project_id, user_id, None)
            }
            ListFilter::StartedBy { project_id, credential_id } => {
                ("project_id = $1 AND started_by = $2 AND $3 IS NULL", project_id, credential_id, None)
            }
        };
        let (cursor_at, cursor_id) = after.unwrap_or((i64::MAX, String::new()));
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE {scope} AND retention_expires_at > $4 \
             AND (created_at < $5 OR (created_at = $5 AND id < $6)) ORDER BY created_at DESC, id DESC LIMIT $7"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(a)
            .bind(b)
            .bind(c)
            .bind(now)
            .bind(cursor_at)
            .bind(if cursor_at == i64::MAX { "\u{10FFFF}".to_owned() } else { cursor_id })
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(execution_from_row).collect()
    }

    pub async fn list_attempts(&self, execution_id: &str) -> Result<Vec<AttemptRecord>> {
        let rows = sqlx::query(
            "SELECT attempt, worker_id, started_at, finished_at, success, error_message, output_ct, error_detail_ct \
             FROM attempts WHERE execution_id = $1 ORDER BY attempt",
        )
        .bind(execution_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| attempt_from_row(r, execution_id)).collect()
    }

    /// (execution id, attempt) of every open execution leased to `worker_id`.
    pub async fn leased_to(&self, worker_id: &str) -> Result<Vec<(String, u32)>> {
        let rows = sqlx::query(
            "SELECT id, lease_attempt FROM executions WHERE worker_id = $1 AND status IN ('working', 'input_required')",
        )
        .bind(worker_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let attempt: i64 = r.try_get("lease_attempt")?;
                Ok((r.try_get("id")?, u32::try_from(attempt).unwrap_or(0)))
            })
            .collect()
    }

    /// The event log of one execution: (seq, at, kind, status).
    pub async fn list_events(&self, execution_id: &str) -> Result<Vec<(i64, Millis, String, String)>> {
        let rows =
            sqlx::query("SELECT seq, at, kind, status FROM execution_events WHERE execution_id = $1 ORDER BY seq")
                .bind(execution_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("seq")?, r.try_get("at")?, r.try_get("kind")?, r.try_get("status")?)))
            .collect()
    }

    /// Leases up to `limit` due pending executions of `tools` in `project_id` to
    /// `worker_id`, all in one transaction (one commit for the batch).
    pub async fn claim(
        &self,
        project_id: &str,
        tools: &[String],
        worker_id: &str,
        limit: u32,
        now: Millis,
        lease_until: Millis,
    ) -> Result<Vec<Claimed>> {
        if tools.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (0..tools.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE status = 'pending' AND project_id = $1 \
             AND not_before <= $2 AND execution_deadline > $2 AND cancel_requested = 0 AND tool_name IN ({}) \
             ORDER BY not_before LIMIT $3{}",
            placeholders.join(", "),
            self.dialect.for_update_skip_locked()
        );
        let mut tx = self.pool.begin().await?;
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(project_id).bind(now).bind(i64::from(limit));
        for tool in tools {
            query = query.bind(tool);
        }
        let rows = query.fetch_all(&mut *tx).await?;
        let event = Event::Claim { worker_id: worker_id.to_owned(), lease_until };
        let no_data = EventData::default();
        let mut decided = Vec::with_capacity(rows.len());
        for row in &rows {
            let record = execution_from_row(row)?;
            if let Ok(t) = domain::apply(&record.state, &event, now) {
                decided.push((record, t));
            }
        }
        let pending: Vec<Pending> = decided
            .iter()
            .map(|(before, t)| Pending { before, event: &event, transition: t, data: &no_data })
            .collect();
        let written = persist_many(&mut tx, &pending, now).await?;
        tx.commit().await?;
        Ok(written.into_iter().map(|record| Claimed { attempt: record.state.attempts, record }).collect())
    }

    /// Applies many events in one transaction (one commit), rows locked in id
    /// order. Each answer is as `apply`'s. An error fails the whole batch.
    pub async fn apply_batch(
        &self,
        items: &[(String, Event, EventData)],
        now: Millis,
    ) -> Result<Vec<Option<Result<Applied, (domain::Ignored, ExecutionRecord)>>>> {
        type Answer = Option<Result<Applied, (domain::Ignored, ExecutionRecord)>>;
        let mut out: Vec<Answer> = vec![None; items.len()];
        // One transition per execution per batch; a second event for the same
        // execution waits for the next transaction.
        let mut seen = std::collections::HashSet::new();
        let (first, later): (Vec<usize>, Vec<usize>) = (0..items.len()).partition(|i| seen.insert(&items[*i].0));
        let mut tx = self.pool.begin().await?;
        let ids: Vec<&str> = first.iter().map(|i| items[*i].0.as_str()).collect();
        let mut records = fetch_many(&mut tx, &ids, self.dialect.for_update()).await?;
        let mut decided = Vec::new();
        for i in first {
            let (id, event, _) = &items[i];
            let Some(record) = records.remove(id.as_str()) else { continue };
            match domain::apply(&record.state, event, now) {
                Ok(t) => decided.push((i, record, t)),
                Err(ignored) => out[i] = Some(Err((ignored, record))),
            }
        }
        let pending: Vec<Pending> = decided
            .iter()
            .map(|(i, before, t)| Pending { before, event: &items[*i].1, transition: t, data: &items[*i].2 })
            .collect();
        let written = persist_many(&mut tx, &pending, now).await?;
        tx.commit().await?;
        for ((i, _, t), record) in decided.into_iter().zip(written) {
            out[i] = Some(Ok(Applied { record, effects: t.effects }));
        }
        for i in later {
            let (id, event, data) = &items[i];
            out[i] = self.apply(id, event, data, now).await?;
        }
        Ok(out)
    }

    /// Applies `event` to one execution: load under a row lock, run the state
    /// machine, write the next state, the event log row and the attempt record in
    /// one transaction. `Ok(None)` when the id is unknown; `Err(Ignored)` inside
    /// `Ok(Some(Err))` when the machine ignored the event.
    pub async fn apply(
        &self,
        id: &str,
        event: &Event,
        data: &EventData,
        now: Millis,
    ) -> Result<Option<Result<Applied, (domain::Ignored, ExecutionRecord)>>> {
        let mut tx = self.pool.begin().await?;
        let Some(record) = fetch(&mut tx, id, self.dialect.for_update()).await? else {
            return Ok(None);
        };
        let t = match domain::apply(&record.state, event, now) {
            Ok(t) => t,
            Err(ignored) => return Ok(Some(Err((ignored, record)))),
        };
        let record = persist(&mut tx, &record, event, &t, data, now).await?;
        tx.commit().await?;
        Ok(Some(Ok(Applied { record, effects: t.effects })))
    }
}

/// Several executions, locked in id order (so concurrent batches cannot deadlock).
async fn fetch_many(
    tx: &mut Transaction<'_, Any>,
    ids: &[&str],
    lock: &str,
) -> Result<std::collections::HashMap<String, ExecutionRecord>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions WHERE id IN ({}) ORDER BY id{lock}",
        placeholders.join(", ")
    );
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(*id);
    }
    let rows = query.persistent(false).fetch_all(&mut **tx).await?;
    rows.iter().map(|r| execution_from_row(r).map(|rec| (rec.id.clone(), rec))).collect()
}

pub(super) async fn fetch(tx: &mut Transaction<'_, Any>, id: &str, lock: &str) -> Result<Option<ExecutionRecord>> {
    let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1{lock}");
    let row = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_optional(&mut **tx).await?;
    row.as_ref().map(execution_from_row).transpose()
}

const INSERT_COLUMNS: &str = "id, org_id, project_id, gateway_id, tool_name, toolkit_name, toolkit_version, \
    user_id, started_by, surface, execution_type, status, not_before, attempts, max_attempts, cancel_requested, \
    created_at, scheduled_at, updated_at, execution_deadline, retention_expires_at, poll_interval_ms, \
    idempotency_key, request_fingerprint, input_ct, payload_bytes, traceparent, version";

const ON_KEY_CONFLICT: &str =
    "ON CONFLICT (project_id, user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING";

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

static INSERT_ONE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("INSERT INTO executions ({INSERT_COLUMNS}) VALUES {} {ON_KEY_CONFLICT}", values_row(1))
});

/// The row as just inserted, without reading it back.
fn inserted_record(new: &NewExecution) -> ExecutionRecord {
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
        .bind(&new.id)
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

/// Inserts a new execution row; false when its Idempotency-Key is already held.
async fn insert_execution(tx: &mut Transaction<'_, Any>, new: &NewExecution, due: &Due) -> Result<bool> {
    let query = bind_row(sqlx::query(AssertSqlSafe(INSERT_ONE.as_str())), new, due.clone());
    Ok(query.execute(&mut **tx).await?.rows_affected() == 1)
}

async fn insert_event(
    tx: &mut Transaction<'_, Any>,
    id: &str,
    seq: i64,
    at: Millis,
    kind: &str,
    status: &str,
    detail: Option<&str>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO execution_events (execution_id, seq, at, kind, status, detail) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(seq)
    .bind(at)
    .bind(kind)
    .bind(status)
    .bind(detail)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn delete_execution(tx: &mut Transaction<'_, Any>, id: &str) -> Result<()> {
    for sql in [
        "DELETE FROM input_requests WHERE execution_id = $1",
        "DELETE FROM execution_events WHERE execution_id = $1",
        "DELETE FROM attempts WHERE execution_id = $1",
        "DELETE FROM executions WHERE id = $1",
    ] {
        sqlx::query(sql).bind(id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Writes one transition computed by the state machine (see `write`).
pub(super) async fn persist(
    tx: &mut Transaction<'_, Any>,
    before: &ExecutionRecord,
    event: &Event,
    t: &Transition,
    data: &EventData,
    now: Millis,
) -> Result<ExecutionRecord> {
    let pending = [Pending { before, event, transition: t, data }];
    persist_many(tx, &pending, now).await?.pop().ok_or_else(|| Error::Corrupt(before.id.clone()))
}
