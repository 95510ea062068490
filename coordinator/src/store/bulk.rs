//! Seeding a large history at once, for `baton bench history`: each run is
//! played through the state machine in memory (`domain::apply`, then
//! `write::next_row` and `records::phase_columns`, the functions the real
//! create and transition paths use), and only its final row, its event log
//! and its attempts are written, thousands of runs per statement. So the
//! measured reads see the rows real traffic leaves, at a fraction of the cost
//! of one transaction per transition.
//!
//! Postgres only: the rows travel as one JSON parameter per table and batch
//! (`json_populate_recordset`), which keeps a batch to a single bind. The
//! same played rows serve `claimed.rs`, which creates executions already
//! leased to a worker.

use super::records::{ExecutionRecord, NewExecution, phase_columns};
use super::write::{EventData, Pending, default_message, next_row};
use super::{Dialect, Error, Result, Store};
use crate::domain::{self, Effect, Event, FailureReason, Millis, Phase};
use sqlx::AssertSqlSafe;

/// An event of a seeded run: when it was applied, and the data it carried.
pub type Step = (Millis, Event, EventData);

/// One run to seed: how it was created, and what happened to it, in order.
#[derive(Clone, Debug)]
pub struct SeedRun {
    pub new: NewExecution,
    pub events: Vec<Step>,
}

/// How many rows a seeding wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seeded {
    pub executions: u64,
    pub events: u64,
    pub attempts: u64,
}

impl std::ops::AddAssign for Seeded {
    fn add_assign(&mut self, o: Seeded) {
        self.executions += o.executions;
        self.events += o.events;
        self.attempts += o.attempts;
    }
}

/// An attempt row as the transition path leaves it.
struct AttemptRow {
    attempt: u32,
    worker_id: String,
    started_at: Millis,
    finished_at: Option<Millis>,
    success: Option<bool>,
    error_message: Option<String>,
    output_ct: Option<Vec<u8>>,
    error_detail_ct: Option<Vec<u8>>,
}

/// The rows one run leaves behind.
pub(super) struct Played {
    /// The execution row after the run's last event.
    pub(crate) record: ExecutionRecord,
    /// (seq, at, kind, status, detail)
    events: Vec<(i64, Millis, &'static str, &'static str, Option<String>)>,
    attempts: Vec<AttemptRow>,
}

/// The error an attempt ending in `p` records (as `write::reported_error`).
fn reported_error(p: &Pending<'_>) -> Option<String> {
    p.data.error_message.clone().or_else(|| match p.transition.next.phase {
        Phase::Failed { reason } if reason != FailureReason::ToolError => Some(default_message(reason).to_owned()),
        _ => None,
    })
}

/// Plays `run` through the state machine; an event the machine ignores is a
/// mistake in the script, reported rather than silently dropped.
pub(super) fn play(run: &SeedRun) -> Result<Played> {
    let mut record = super::create::inserted_record(&run.new);
    let mut events = vec![(1, run.new.created_at, "created", "pending", Some(record.execution_type.clone()))];
    let mut attempts: Vec<AttemptRow> = Vec::new();
    for (now, event, data) in &run.events {
        let transition = domain::apply(&record.state, event, *now).map_err(|ignored| {
            Error::Corrupt(format!("seed script of {}: {} ignored ({ignored})", run.new.id, event.name()))
        })?;
        let p = Pending { before: &record, event, transition: &transition, data };
        let after = next_row(&p, *now);
        if !matches!(event, Event::Heartbeat { .. }) {
            events.push((after.version, *now, event.name(), phase_columns(&after.state.phase).status, None));
        }
        for effect in &transition.effects {
            match effect {
                Effect::Invoke { worker_id, attempt } => attempts.push(AttemptRow {
                    attempt: *attempt,
                    worker_id: worker_id.clone(),
                    started_at: *now,
                    finished_at: None,
                    success: None,
                    error_message: None,
                    output_ct: None,
                    error_detail_ct: None,
                }),
                Effect::AttemptFinished { attempt, success } => {
                    if let Some(a) = attempts.iter_mut().find(|a| a.attempt == *attempt && a.finished_at.is_none()) {
                        a.finished_at = Some(*now);
                        a.success = Some(*success);
                        a.error_message = reported_error(&p);
                        a.output_ct.clone_from(&data.output_ct);
                        a.error_detail_ct.clone_from(&data.error_detail_ct);
                    }
                }
                Effect::AttemptVoided { attempt } => attempts.retain(|a| a.attempt != *attempt),
                _ => {}
            }
        }
        record = after;
    }
    Ok(Played { record, events, attempts })
}

/// Postgres' text form of bytes, which its bytea input reads.
fn hex(bytes: &Option<Vec<u8>>) -> Option<String> {
    bytes.as_ref().map(|b| {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(2 + b.len() * 2);
        s.push_str("\\x");
        for byte in b {
            s.push(char::from(DIGITS[usize::from(byte >> 4)]));
            s.push(char::from(DIGITS[usize::from(byte & 15)]));
        }
        s
    })
}

/// Rows for `json_populate_recordset`, written as JSON text as they come: no
/// `serde_json::Value` is built per row (that map and its display were about
/// a twentieth of a coordinator's CPU on the create path).
#[derive(Default)]
pub(super) struct JsonRows {
    text: Vec<u8>,
}

/// Appends one JSON object of `"column": value` pairs to a [`JsonRows`].
macro_rules! push_row {
    ($rows:expr; $($column:literal: $value:expr),* $(,)?) => {{
        use serde::ser::{SerializeMap as _, Serializer as _};
        let text = $rows.next_row();
        let mut ser = serde_json::Serializer::new(text);
        let written: serde_json::Result<()> = (|| {
            let mut row = ser.serialize_map(None)?;
            $(row.serialize_entry($column, &$value)?;)*
            row.end()
        })();
        written.map_err(|e| Error::Corrupt(format!("a row's JSON: {e}")))
    }};
}

impl JsonRows {
    /// The buffer to write the next row to, after its separator.
    fn next_row(&mut self) -> &mut Vec<u8> {
        self.text.push(if self.text.is_empty() { b'[' } else { b',' });
        &mut self.text
    }

    pub(super) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The rows as one JSON array.
    pub(super) fn into_text(self) -> Result<String> {
        let mut text = self.text;
        if text.is_empty() {
            text.push(b'[');
        }
        text.push(b']');
        String::from_utf8(text).map_err(|_| Error::Corrupt("rows' JSON is not UTF-8".into()))
    }
}

fn push_execution(rows: &mut JsonRows, r: &ExecutionRecord) -> Result<()> {
    let cols = phase_columns(&r.state.phase);
    push_row!(rows;
        "id": r.id.as_str(), "org_id": r.org_id, "project_id": r.project_id, "gateway_id": r.gateway_id,
        "tool_name": r.tool_name, "toolkit_name": r.toolkit_name, "toolkit_version": r.toolkit_version,
        "user_id": r.user_id, "started_by": r.started_by, "surface": r.surface,
        "execution_type": r.execution_type, "status": cols.status, "failure_reason": cols.failure_reason,
        "error_message": r.error_message, "summary": r.summary, "not_before": cols.not_before,
        "worker_id": cols.worker_id, "lease_attempt": cols.lease_attempt, "lease_expires_at": cols.lease_expires_at,
        "attempts": r.state.attempts, "max_attempts": r.state.max_attempts,
        "cancel_requested": i64::from(r.state.cancel_requested),
        "owner_loss_detection_at": r.state.owner_loss_detection_at, "created_at": r.created_at,
        "scheduled_at": r.scheduled_at, "started_at": r.started_at, "finished_at": r.finished_at,
        "updated_at": r.updated_at, "execution_deadline": r.execution_deadline,
        "retention_expires_at": r.retention_expires_at, "poll_interval_ms": r.poll_interval_ms,
        "idempotency_key": r.idempotency_key, "request_fingerprint": r.request_fingerprint,
        "input_ct": hex(&r.input_ct), "output_ct": hex(&r.output_ct), "error_detail_ct": hex(&r.error_detail_ct),
        "payload_bytes": r.payload_bytes, "traceparent": r.traceparent, "remote_task_id": r.remote_task_id,
        "version": r.version, "changed_version": r.changed_version,
    )
}

/// The columns each table has in the database as it stands; a table that
/// does not exist has none.
struct Schema(Vec<(String, String)>);

impl Schema {
    async fn read(store: &Store) -> Result<Schema> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT) FROM information_schema.columns \
             WHERE table_schema = current_schema() \
             AND table_name IN ('executions', 'execution_events', 'attempts', 'execution_keys')",
        )
        .fetch_all(&store.pool)
        .await?;
        Ok(Schema(rows))
    }

    /// The ones of `columns` that `table` has, in their order.
    fn present(&self, table: &str, columns: &str) -> String {
        let has = |c: &str| self.0.iter().any(|(t, col)| t == table && col == c);
        columns.split(',').map(str::trim).filter(|c| has(c)).collect::<Vec<_>>().join(", ")
    }
}

/// Inserts `rows` (JSON objects named like `table`'s columns) in one
/// statement, writing those of `columns` the table has (a database at an
/// older schema version lacks the newer ones), and nothing into a table it
/// does not have.
async fn insert_json(store: &Store, schema: &Schema, table: &str, columns: &str, rows: JsonRows) -> Result<u64> {
    let columns = schema.present(table, columns);
    if rows.is_empty() || columns.is_empty() {
        return Ok(0);
    }
    let sql = format!(
        "INSERT INTO {table} ({columns}) SELECT {columns} FROM json_populate_recordset(NULL::{table}, $1::json)"
    );
    let body = rows.into_text()?;
    let done = sqlx::query(AssertSqlSafe(sql)).bind(body).persistent(false).execute(&store.pool).await?;
    Ok(done.rows_affected())
}

/// The rows of played runs as JSON objects named like their tables' columns.
#[derive(Default)]
pub(super) struct RowsJson {
    pub(crate) executions: JsonRows,
    pub(crate) events: JsonRows,
    pub(crate) attempts: JsonRows,
}

impl RowsJson {
    pub(super) fn push(&mut self, played: &Played) -> Result<()> {
        // Every row of a run carries its organization and its retention end
        // (the history's partition key).
        let (id, org_id, expires) =
            (played.record.id.as_str(), &played.record.org_id, played.record.retention_expires_at);
        for (seq, at, kind, status, detail) in &played.events {
            push_row!(self.events;
                "org_id": org_id, "execution_id": id, "seq": seq, "at": at, "kind": kind, "status": status,
                "detail": detail, "retention_expires_at": expires,
            )?;
        }
        for a in &played.attempts {
            push_row!(self.attempts;
                "org_id": org_id, "execution_id": id, "retention_expires_at": expires,
                "attempt": a.attempt, "worker_id": a.worker_id,
                "started_at": a.started_at, "finished_at": a.finished_at,
                "success": a.success.map(i64::from), "error_message": a.error_message,
                "output_ct": hex(&a.output_ct), "error_detail_ct": hex(&a.error_detail_ct),
            )?;
        }
        push_execution(&mut self.executions, &played.record)
    }
}

pub(super) const EXECUTION_INSERT: &str = super::records::EXECUTION_COLUMNS;
const KEY_COLUMNS: &str = "org_id, project_id, user_id, idempotency_key, execution_id, retention_expires_at";
pub(super) const EVENT_COLUMNS: &str = "org_id, execution_id, seq, at, kind, status, detail, retention_expires_at";
pub(super) const ATTEMPT_COLUMNS: &str = "org_id, execution_id, attempt, worker_id, started_at, finished_at, success, \
    error_message, output_ct, error_detail_ct, retention_expires_at";

impl Store {
    /// Writes `runs` as if each had been created and then taken through its
    /// events one transaction at a time: the same executions row, event log
    /// and attempts. Not atomic across tables (a seeding is thrown away whole
    /// if it fails). Postgres only.
    ///
    /// The rows take the form of the schema the database has, so a database
    /// migrated only part way (`baton bench migrate`) gets the rows that
    /// schema held: the columns a later migration added are left out, and
    /// before 0018 the Idempotency-Key lives only on the run's row (there is
    /// no `execution_keys`).
    pub async fn seed_runs(&self, runs: &[SeedRun]) -> Result<Seeded> {
        if self.dialect != Dialect::Postgres {
            return Err(Error::Database(sqlx::Error::Configuration("seeding runs needs Postgres".into())));
        }
        let mut rows = RowsJson::default();
        for run in runs {
            rows.push(&play(run)?)?;
        }
        let mut keys = JsonRows::default();
        for r in runs {
            let Some(key) = &r.new.idempotency_key else { continue };
            push_row!(keys;
                "org_id": r.new.org_id, "project_id": r.new.project_id, "user_id": r.new.user_id,
                "idempotency_key": key, "execution_id": r.new.id.as_str(),
                "retention_expires_at": r.new.retention_expires_at,
            )?;
        }
        let schema = Schema::read(self).await?;
        insert_json(self, &schema, "execution_keys", KEY_COLUMNS, keys).await?;
        let RowsJson { executions, events, attempts } = rows;
        Ok(Seeded {
            executions: insert_json(self, &schema, "executions", EXECUTION_INSERT, executions).await?,
            events: insert_json(self, &schema, "execution_events", EVENT_COLUMNS, events).await?,
            attempts: insert_json(self, &schema, "attempts", ATTEMPT_COLUMNS, attempts).await?,
        })
    }

    /// After a seeding: what autovacuum would do on its own in time (the
    /// visibility map that index-only scans need, and planner statistics),
    /// done now so the first measurements do not depend on when it runs.
    pub async fn seed_settle(&self) -> Result<()> {
        for table in ["executions", "execution_events", "attempts"] {
            sqlx::query(AssertSqlSafe(format!("VACUUM (ANALYZE) {table}"))).execute(&self.pool).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "bulk_tests.rs"]
mod tests;
