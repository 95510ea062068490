//! Writing transitions. Every transition — one or a batch — is written with a
//! fixed number of statements whatever the batch size (on Postgres one: the
//! row update, the event, attempt and webhook-signal writes as parts of it):
//! a batch of claims or settlements costs a round trip or a few and one
//! commit, not several per execution. Rows are guarded by their version. Each
//! part's rows are padded to a few sizes, so the statements' text takes a
//! handful of shapes, all kept prepared.

use super::records::{ExecutionRecord, phase_columns};
use super::{Error, PADDED_UP_TO, Result, padded};
use crate::domain::{Effect, Event, FailureReason, Millis, Phase, Status, Transition};
use sqlx::any::{Any, AnyArguments};
use sqlx::{Arguments, AssertSqlSafe, Transaction};

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
    /// With `InputRequested`: the requests to publish.
    pub new_input_requests: Vec<PublishedRequest>,
}

/// An input request a remote server made, published under a key Baton minted.
#[derive(Clone, Debug)]
pub struct PublishedRequest {
    pub(crate) request_key: String,
    /// The remote server's own identifier for it.
    pub(crate) remote_key: String,
    /// The sealed `{"message", "requested_schema"}`.
    pub(crate) spec_ct: Vec<u8>,
}

/// One transition to write.
pub(super) struct Pending<'a> {
    pub(crate) before: &'a ExecutionRecord,
    pub(crate) event: &'a Event,
    pub(crate) transition: &'a Transition,
    pub(crate) data: &'a EventData,
}

pub(super) fn default_message(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::ToolError => "the tool reported an error",
        FailureReason::DeadlineExceeded => "the execution deadline passed before the tool finished",
        FailureReason::OwnerLost => "the worker running this execution stopped responding",
        FailureReason::UnsupportedInteraction => "the tool requested an interaction Baton does not support",
        FailureReason::InvocationRefused => "the tool's execution policy refused this invocation",
        FailureReason::ProtocolError => "the tool's server failed the call with a protocol error",
    }
}

/// `($first, …), (…)` for `rows` rows of `width` placeholders, numbered from `first`.
fn placeholders(first: usize, rows: usize, width: usize) -> String {
    (0..rows)
        .map(|r| {
            let cells: Vec<String> = (0..width).map(|c| format!("${}", first + r * width + c)).collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Adds each of `items` with `one`, then the first item again as padding
/// until there are `to`. A padding row names the execution `''`, which no
/// execution has: it updates nothing, so no part of it is written either.
fn add_padded<T>(
    args: &mut AnyArguments,
    items: impl Iterator<Item = T>,
    to: usize,
    one: impl Fn(&mut AnyArguments, &T, bool) -> Result<()>,
) -> Result<()> {
    let mut first = None;
    let mut added = 0;
    for item in items {
        one(args, &item, false)?;
        added += 1;
        first.get_or_insert(item);
    }
    if let Some(item) = first {
        for _ in added..to {
            one(args, &item, true)?;
        }
    }
    Ok(())
}

/// The row's execution id, or `''` for a padding row (see [`add_padded`]).
fn id_or_padding(row: &ExecutionRecord, padding: bool) -> String {
    if padding { String::new() } else { row.id.to_string() }
}

fn add<'t, T>(args: &mut AnyArguments, v: T) -> Result<()>
where
    T: sqlx::Encode<'t, Any> + sqlx::Type<Any>,
{
    args.add(v).map_err(|e| Error::Database(sqlx::Error::Encode(e)))
}

const ROW_COLUMNS: &str = "id, old_version, status, failure_reason, not_before, worker_id, lease_attempt, \
    lease_expires_at, attempts, cancel_requested, owner_loss_detection_at, started_at, finished_at, updated_at, \
    error_message, summary, output_ct, error_detail_ct, payload_bytes, version, deadline, remote_task_id, \
    changed_version";
const ROW_WIDTH: usize = 23;
/// Reads the rows' values from `v`; guarded by each row's version.
const UPDATE_ROWS: &str = "UPDATE executions SET status = v.status, failure_reason = v.failure_reason, \
    not_before = v.not_before, worker_id = v.worker_id, lease_attempt = v.lease_attempt, \
    lease_expires_at = v.lease_expires_at, attempts = v.attempts, cancel_requested = v.cancel_requested, \
    owner_loss_detection_at = v.owner_loss_detection_at, started_at = v.started_at, \
    finished_at = v.finished_at, updated_at = v.updated_at, error_message = v.error_message, \
    summary = v.summary, output_ct = v.output_ct, error_detail_ct = v.error_detail_ct, \
    payload_bytes = v.payload_bytes, version = v.version, execution_deadline = v.deadline, \
    remote_task_id = v.remote_task_id, changed_version = v.changed_version \
    FROM v WHERE executions.id = v.id AND executions.version = v.old_version";
const INSERT_EVENTS: &str = "INSERT INTO execution_events (execution_id, seq, at, kind, status, org_id, \
    retention_expires_at)";
const EVENT_WIDTH: usize = 7;
const INSERT_STARTED: &str =
    "INSERT INTO attempts (execution_id, attempt, worker_id, started_at, org_id, retention_expires_at)";
const STARTED_WIDTH: usize = 6;
/// In one statement, a part of a row is written only if that row's update
/// matched (`u` returns the ids it updated): an unlocked batch whose row moved
/// meanwhile leaves no trace of it.
const UPDATED: &str = "IN (SELECT id FROM u)";
const FINISHED_COLUMNS: &str = "f(execution_id, attempt, success, error_message, output_ct, error_detail_ct)";
const FINISHED_WIDTH: usize = 6;

/// `UPDATE attempts` from `f`, finishing at placeholder `$now`, in the
/// partitions `days` names (see `Batch::days`), for the executions `gate` admits.
fn update_finished(now: usize, days: &str, gate: &str) -> String {
    format!(
        "UPDATE attempts SET finished_at = ${now}, success = f.success, error_message = f.error_message, \
         output_ct = f.output_ct, error_detail_ct = f.error_detail_ct FROM f \
         WHERE attempts.execution_id = f.execution_id AND attempts.attempt = f.attempt \
         AND attempts.finished_at IS NULL AND attempts.retention_expires_at IN ({days}){gate}"
    )
}

/// The error this transition reports: the tool's own message, or a system
/// message for failures the tool did not report itself.
fn reported_error(p: &Pending<'_>) -> Option<String> {
    p.data.error_message.clone().or_else(|| match p.transition.next.phase {
        Phase::Failed { reason } if reason != FailureReason::ToolError => Some(default_message(reason).to_owned()),
        _ => None,
    })
}

/// The execution row after `p`: the one place that decides every column, used
/// both for the statement's values and for the record handed back.
pub(super) fn next_row(p: &Pending<'_>, now: Millis) -> ExecutionRecord {
    let (before, next) = (p.before, &p.transition.next);
    let started_now = p.transition.effects.iter().any(|e| matches!(e, Effect::Invoke { .. }));
    let mut after = before.clone();
    after.state = next.clone();
    after.execution_deadline = next.deadline;
    if started_now && after.started_at.is_none() {
        after.started_at = Some(now);
    }
    after.finished_at = next.status().is_terminal().then_some(now);
    after.updated_at = now;
    after.error_message = reported_error(p).or(after.error_message);
    after.summary = p.data.summary.clone().or(after.summary);
    after.output_ct = p.data.output_ct.clone().or(after.output_ct);
    after.error_detail_ct = p.data.error_detail_ct.clone().or(after.error_detail_ct);
    if next.status() == Status::Completed {
        // An earlier attempt's failure is the attempt's, not the execution's:
        // a completed execution carries no error (its attempts keep theirs).
        after.error_message = None;
        after.error_detail_ct = None;
    }
    after.payload_bytes += p.data.payload_bytes;
    after.remote_task_id = if next.remote_task { p.data.remote_task_id.clone().or(after.remote_task_id) } else { None };
    after.version = before.version + 1;
    if !matches!(p.event, Event::Heartbeat { .. }) {
        after.changed_version = after.version;
    }
    after
}

/// The rows as a batch wrote them, and whether it queued any webhook delivery
/// (a signal of a project without endpoints queues none).
pub(super) struct Written {
    pub(super) records: Vec<ExecutionRecord>,
    pub(super) deliveries_queued: bool,
}

/// Writes the transitions (distinct executions) and returns the rows as written.
///
/// On Postgres the whole batch (rows, events, attempts, webhook signals) is one
/// statement of data-modifying CTEs: one round trip where there were up to five,
/// inside the caller's transaction all the same. SQLite, which has no such
/// statements, writes each part as its own.
pub(super) async fn persist_many(tx: &mut Transaction<'_, Any>, items: &[Pending<'_>], now: Millis) -> Result<Written> {
    if items.is_empty() {
        return Ok(Written { records: Vec::new(), deliveries_queued: false });
    }
    let batch = Batch::plan(items, now);
    let deliveries = if tx.backend_name() == "PostgreSQL" && batch.one_statement_holds() {
        let (updated, queued) = batch.write_as_one(&mut **tx).await?;
        batch.check_updated(updated.len() as u64)?;
        queued
    } else {
        batch.write_each(tx).await?
    };
    for p in items {
        extras(tx, p, now).await?;
    }
    Ok(Written { records: batch.written, deliveries_queued: deliveries > 0 })
}

/// The ids a one-statement write updated.
type Updated = std::collections::HashSet<String>;

/// What the one statement answers: a row per updated execution, each with the
/// deliveries queued.
fn updated_and_queued(rows: Vec<(String, i64)>) -> (Updated, u64) {
    let queued = rows.first().map_or(0, |(_, q)| u64::try_from(*q).unwrap_or(0));
    (rows.into_iter().map(|(id, _)| id).collect(), queued)
}

/// Transitions of rows read without a lock, written as one statement that
/// commits itself (Postgres): each row only if it still has the version it
/// was read at. `None` when the batch needs more than one statement (it then
/// takes the locked path); otherwise each item's row as written, or `None`
/// for a row another writer moved meanwhile.
pub(super) async fn persist_unlocked(
    store: &super::Store,
    items: &[Pending<'_>],
    now: Millis,
) -> Result<Option<(Vec<Option<ExecutionRecord>>, bool)>> {
    let batch = Batch::plan(items, now);
    if items.is_empty() || !batch.one_statement_holds() || items.iter().any(needs_extras) {
        return Ok(None);
    }
    let (sql, args) = batch.one_statement()?;
    let write = sqlx::query_as_with(AssertSqlSafe(sql), args).persistent(batch.kept()).fetch_all(&store.hot);
    let (updated, queued) = updated_and_queued(store.autocommit(write).await?);
    let records = batch.written.into_iter().map(|r| updated.contains(r.id.as_str()).then_some(r)).collect();
    Ok(Some((records, queued > 0)))
}

/// The one statement of `items` and its arguments, as [`persist_unlocked`]
/// would run it.
#[cfg(test)]
pub(super) fn one_statement_of(items: &[Pending<'_>], now: Millis) -> Result<(String, AnyArguments)> {
    Batch::plan(items, now).one_statement()
}

/// Whether `p` writes more than the parts of the one statement (`extras`).
fn needs_extras(p: &Pending<'_>) -> bool {
    !p.data.new_input_requests.is_empty()
        || p.transition.effects.iter().any(|e| matches!(e, Effect::AttemptVoided { .. }))
}

/// A batch's rows as written, and how many of each part it writes.
struct Batch<'a> {
    items: &'a [Pending<'a>],
    now: Millis,
    written: Vec<ExecutionRecord>,
    /// The outbox: signals are written with the transitions that cause them.
    signals: Vec<crate::webhooks::signal::Signal>,
    events: usize,
    started: usize,
    finished: usize,
}

impl<'a> Batch<'a> {
    fn plan(items: &'a [Pending<'a>], now: Millis) -> Batch<'a> {
        let mut batch = Batch {
            items,
            now,
            written: Vec::with_capacity(items.len()),
            signals: Vec::new(),
            events: 0,
            started: 0,
            finished: 0,
        };
        for p in items {
            let after = next_row(p, now);
            batch.signals.extend(crate::webhooks::signal::of_transition(p.before, &after));
            // Heartbeats only move the lease; they are not part of the history.
            batch.events += usize::from(!matches!(p.event, Event::Heartbeat { .. }));
            for effect in &p.transition.effects {
                match effect {
                    Effect::Invoke { .. } => batch.started += 1,
                    Effect::AttemptFinished { .. } => batch.finished += 1,
                    _ => {}
                }
            }
            batch.written.push(after);
        }
        batch
    }

    /// In one statement every part reads the rows as they were before it, so
    /// an attempt started and finished by the same batch needs two.
    fn one_statement_holds(&self) -> bool {
        // Settlements start nothing and claims finish nothing: the usual
        // batch needs no look at its attempts.
        if self.started == 0 || self.finished == 0 {
            return true;
        }
        let started: std::collections::HashSet<(&str, u32)> = self
            .pairs()
            .flat_map(|(p, after)| {
                p.transition.effects.iter().filter_map(move |e| match e {
                    Effect::Invoke { attempt, .. } => Some((after.id.as_str(), *attempt)),
                    _ => None,
                })
            })
            .collect();
        !self.pairs().any(|(p, after)| {
            p.transition.effects.iter().any(
                |e| matches!(e, Effect::AttemptFinished { attempt, .. } if started.contains(&(after.id.as_str(), *attempt))),
            )
        })
    }

    /// The retention ends of the batch's rows, as literals (the one statement
    /// takes them as parameters). Naming them lets Postgres prune the updates
    /// to the day partitions that hold the rows instead of every partition. A
    /// row read locked has its current value (a re-dating waits for the
    /// lock); one read unlocked and re-dated since matches no partition
    /// named, so it is left as a row another writer moved.
    fn days(&self) -> String {
        let ends: std::collections::BTreeSet<Millis> =
            self.items.iter().map(|p| p.before.retention_expires_at).collect();
        ends.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
    }

    fn pairs(&self) -> impl Iterator<Item = (&Pending<'a>, &ExecutionRecord)> {
        self.items.iter().zip(&self.written)
    }

    /// The rows' values, padded to `to` rows (see [`padded`]).
    fn add_rows(&self, args: &mut AnyArguments, to: usize) -> Result<()> {
        add_padded(args, self.pairs(), to, |args, (p, after), padding| {
            let cols = phase_columns(&after.state.phase);
            add(args, id_or_padding(after, padding))?;
            add(args, p.before.version)?;
            add(args, cols.status)?;
            add(args, cols.failure_reason)?;
            add(args, cols.not_before)?;
            add(args, cols.worker_id.clone())?;
            add(args, cols.lease_attempt)?;
            add(args, cols.lease_expires_at)?;
            add(args, i64::from(after.state.attempts))?;
            add(args, i64::from(after.state.cancel_requested))?;
            add(args, after.state.owner_loss_detection_at)?;
            add(args, after.started_at)?;
            add(args, after.finished_at)?;
            add(args, after.updated_at)?;
            add(args, after.error_message.clone())?;
            add(args, after.summary.clone())?;
            add(args, after.output_ct.clone())?;
            add(args, after.error_detail_ct.clone())?;
            add(args, after.payload_bytes)?;
            add(args, after.version)?;
            add(args, after.execution_deadline)?;
            add(args, after.remote_task_id.clone())?;
            add(args, after.changed_version)
        })
    }

    fn add_events(&self, args: &mut AnyArguments, to: usize) -> Result<()> {
        let events = self.pairs().filter(|(p, _)| !matches!(p.event, Event::Heartbeat { .. }));
        add_padded(args, events, to, |args, (p, after), padding| {
            add(args, id_or_padding(after, padding))?;
            add(args, after.version)?;
            add(args, self.now)?;
            add(args, p.event.name())?;
            add(args, phase_columns(&after.state.phase).status)?;
            add(args, after.org_id.clone())?;
            add(args, after.retention_expires_at)
        })
    }

    fn add_started(&self, args: &mut AnyArguments, to: usize) -> Result<()> {
        let started = self.pairs().flat_map(|(p, after)| {
            p.transition.effects.iter().filter_map(move |e| match e {
                Effect::Invoke { worker_id, attempt } => Some((after, worker_id, *attempt)),
                _ => None,
            })
        });
        add_padded(args, started, to, |args, (after, worker_id, attempt), padding| {
            add(args, id_or_padding(after, padding))?;
            add(args, i64::from(*attempt))?;
            add(args, (*worker_id).clone())?;
            add(args, self.now)?;
            add(args, after.org_id.clone())?;
            add(args, after.retention_expires_at)
        })
    }

    /// The finished attempts' values, then the time they finished.
    fn add_finished(&self, args: &mut AnyArguments, to: usize) -> Result<()> {
        let finished = self.pairs().flat_map(|(p, after)| {
            p.transition.effects.iter().filter_map(move |e| match e {
                Effect::AttemptFinished { attempt, success } => Some((p, after, *attempt, *success)),
                _ => None,
            })
        });
        add_padded(args, finished, to, |args, (p, after, attempt, success), padding| {
            add(args, id_or_padding(after, padding))?;
            add(args, i64::from(*attempt))?;
            add(args, i64::from(*success))?;
            // What this attempt reported, not what an earlier one did.
            add(args, reported_error(p))?;
            add(args, p.data.output_ct.clone())?;
            add(args, p.data.error_detail_ct.clone())
        })?;
        add(args, self.now)
    }

    fn check_updated(&self, updated: u64) -> Result<()> {
        if updated != self.items.len() as u64 {
            return Err(Error::Corrupt("concurrent write to an execution in a batch".into()));
        }
        Ok(())
    }

    /// Every part in one statement, each row's parts only if its update
    /// matched the version it was read at. Answers the ids updated and the
    /// webhook deliveries queued. Inside a transaction that locked the rows
    /// every update matches; run alone (it commits itself) on rows read
    /// unlocked, a row another writer moved meanwhile is left as it is.
    async fn write_as_one<'e>(&self, on: impl sqlx::Executor<'e, Database = Any>) -> Result<(Updated, u64)> {
        let (sql, args) = self.one_statement()?;
        let rows = sqlx::query_as_with(AssertSqlSafe(sql), args).persistent(self.kept()).fetch_all(on).await?;
        Ok(updated_and_queued(rows))
    }

    /// The statement of [`Batch::write_as_one`] and its arguments, each part
    /// padded (see [`padded`]). The rows' retention ends come first, as
    /// parameters (see [`Batch::days`]).
    fn one_statement(&self) -> Result<(String, AnyArguments)> {
        let mut args = AnyArguments::default();
        let n = padded(self.items.len());
        let ends = self.items.iter().map(|p| p.before.retention_expires_at);
        add_padded(&mut args, ends, n, |args, end, _| add(args, *end))?;
        let days = (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
        self.add_rows(&mut args, n)?;
        let mut next = n + n * ROW_WIDTH + 1;
        let mut sql = format!(
            "WITH v({ROW_COLUMNS}) AS (VALUES {}), u AS ({UPDATE_ROWS} AND executions.retention_expires_at IN ({days}) \
             RETURNING executions.id)",
            placeholders(n + 1, n, ROW_WIDTH),
        );
        if self.events > 0 {
            let events = padded(self.events);
            self.add_events(&mut args, events)?;
            let values = placeholders(next, events, EVENT_WIDTH);
            sql += &format!(", e AS ({INSERT_EVENTS} SELECT * FROM (VALUES {values}) AS x WHERE x.column1 {UPDATED})");
            next += events * EVENT_WIDTH;
        }
        if self.started > 0 {
            let started = padded(self.started);
            self.add_started(&mut args, started)?;
            let values = placeholders(next, started, STARTED_WIDTH);
            sql += &format!(", s AS ({INSERT_STARTED} SELECT * FROM (VALUES {values}) AS x WHERE x.column1 {UPDATED})");
            next += started * STARTED_WIDTH;
        }
        if self.finished > 0 {
            let finished = padded(self.finished);
            self.add_finished(&mut args, finished)?;
            let values = placeholders(next, finished, FINISHED_WIDTH);
            next += finished * FINISHED_WIDTH;
            let gate = format!(" AND f.execution_id {UPDATED}");
            sql +=
                &format!(", {FINISHED_COLUMNS} AS (VALUES {values}), g AS ({})", update_finished(next, &days, &gate));
            next += 1;
        }
        if !self.signals.is_empty() {
            let to = padded(self.signals.len());
            let (values, insert) = super::webhooks::enqueue_parts(&mut args, next, &self.signals, to, self.now)?;
            sql += &format!(", {values}, h AS ({insert} AND w.execution_id {UPDATED} RETURNING 1)");
            sql += " SELECT u.id, (SELECT count(*) FROM h) FROM u";
        } else {
            sql += " SELECT u.id, 0::bigint FROM u";
        }
        Ok((sql, args))
    }

    /// Whether the statement is kept prepared on its connection: its text
    /// depends only on the padded sizes of its parts (see [`padded`]).
    fn kept(&self) -> bool {
        self.items.len().max(self.signals.len()) <= PADDED_UP_TO
    }

    /// Each part as a statement of its own. Answers the webhook deliveries it queued.
    async fn write_each(&self, tx: &mut Transaction<'_, Any>) -> Result<u64> {
        let n = self.items.len();
        let days = self.days();
        let mut rows = AnyArguments::default();
        self.add_rows(&mut rows, n)?;
        let sql = format!(
            "WITH v({ROW_COLUMNS}) AS (VALUES {}) {UPDATE_ROWS} AND executions.retention_expires_at IN ({days})",
            placeholders(1, n, ROW_WIDTH),
        );
        let updated = sqlx::query_with(AssertSqlSafe(sql), rows).persistent(false).execute(&mut **tx).await?;
        self.check_updated(updated.rows_affected())?;
        if self.events > 0 {
            let mut events = AnyArguments::default();
            self.add_events(&mut events, self.events)?;
            let sql = format!("{INSERT_EVENTS} VALUES {}", placeholders(1, self.events, EVENT_WIDTH));
            sqlx::query_with(AssertSqlSafe(sql), events).persistent(false).execute(&mut **tx).await?;
        }
        if self.started > 0 {
            let mut started = AnyArguments::default();
            self.add_started(&mut started, self.started)?;
            let sql = format!("{INSERT_STARTED} VALUES {}", placeholders(1, self.started, STARTED_WIDTH));
            sqlx::query_with(AssertSqlSafe(sql), started).persistent(false).execute(&mut **tx).await?;
        }
        if self.finished > 0 {
            let mut finished = AnyArguments::default();
            self.add_finished(&mut finished, self.finished)?;
            let sql = format!(
                "WITH {FINISHED_COLUMNS} AS (VALUES {}) {}",
                placeholders(1, self.finished, FINISHED_WIDTH),
                update_finished(self.finished * FINISHED_WIDTH + 1, &days, "")
            );
            sqlx::query_with(AssertSqlSafe(sql), finished).persistent(false).execute(&mut **tx).await?;
        }
        super::webhooks::enqueue(tx, &self.signals, self.now).await
    }
}

/// The rare per-transition writes: published input requests, undelivered attempts.
async fn extras(tx: &mut Transaction<'_, Any>, p: &Pending<'_>, now: Millis) -> Result<()> {
    for PublishedRequest { request_key: key, remote_key, spec_ct } in &p.data.new_input_requests {
        sqlx::query(
            "INSERT INTO input_requests \
             (execution_id, request_key, remote_key, attempt, spec_ct, state, created_at, org_id, retention_expires_at) \
             VALUES ($1, $2, $3, $4, $5, 'open', $6, $7, $8)",
        )
        .bind(p.before.id.as_str())
        .bind(key)
        .bind(remote_key)
        .bind(i64::from(p.transition.next.attempts))
        .bind(spec_ct)
        .bind(now)
        .bind(&p.before.org_id)
        .bind(p.before.retention_expires_at)
        .execute(&mut **tx)
        .await?;
    }
    for effect in &p.transition.effects {
        if let Effect::AttemptVoided { attempt } = effect {
            sqlx::query("DELETE FROM attempts WHERE execution_id = $1 AND attempt = $2")
                .bind(p.before.id.as_str())
                .bind(i64::from(*attempt))
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}
