//! Execution rows: read, list, claim, and the one read-modify-write path every
//! transition takes (`apply`). Creating them is `create.rs`.

use super::records::{AttemptRecord, EXECUTION_COLUMNS, ExecutionRecord, attempt_from_row, execution_from_row};
use super::write::{EventData, Pending, persist_many, persist_unlocked};
use super::{Error, Result, Store};
use crate::domain::{self, AttemptRef, Effect, Event, EventKind, ExecutionId, Millis, Status, Transition};
use sqlx::AnyPool;
use sqlx::any::Any;
use sqlx::{AssertSqlSafe, Row, Transaction};

/// One entry of an execution's event log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub(crate) seq: i64,
    pub(crate) at: Millis,
    /// What happened; `None` for a kind this release does not know (a newer
    /// coordinator's, sharing the database during a rollout).
    pub(crate) kind: Option<EventKind>,
    /// The status it left the execution in; `None` for one this release does
    /// not know.
    pub(crate) status: Option<Status>,
}

/// One answer of `apply_batch`: `None` for an unknown execution.
type Answer = Option<std::result::Result<Applied, (domain::Ignored, ExecutionRecord)>>;

#[derive(Clone, Debug)]
pub struct Applied {
    pub(crate) record: ExecutionRecord,
    pub(crate) effects: Vec<Effect>,
    /// Whether its commit queued a webhook delivery: only then is the
    /// delivery loop worth waking.
    pub(crate) deliveries_queued: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Claimed {
    pub(crate) record: ExecutionRecord,
    pub(crate) attempt: u32,
}

/// Whose executions a list shows: an end user's, or those one API key started.
#[derive(Clone, Debug)]
pub(crate) enum ListFilter {
    User { project_id: String, user_id: String, gateway_id: Option<String> },
    StartedBy { project_id: String, credential_id: String },
}

impl Store {
    pub async fn get_execution(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1");
        let row = sqlx::query(AssertSqlSafe(sql)).bind(id.as_str()).fetch_optional(&self.pool).await?;
        row.as_ref().map(execution_from_row).transpose()
    }

    /// Newest first; `after` is the (created_at, id) of the last row of the previous page.
    pub(crate) async fn list_executions(
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

    pub async fn list_attempts(&self, execution_id: &ExecutionId) -> Result<Vec<AttemptRecord>> {
        attempts_on(&self.pool, execution_id).await
    }

    /// The attempts for the history (the read replica while it is fresh).
    pub(crate) async fn history_attempts(&self, execution_id: &ExecutionId) -> Result<Vec<AttemptRecord>> {
        self.heavy_read(|pool| async move { attempts_on(&pool, execution_id).await }).await
    }

    /// The attempt of every open execution leased to `worker_id`.
    pub(crate) async fn leased_to(&self, worker_id: &str) -> Result<Vec<AttemptRef>> {
        let rows = sqlx::query(
            "SELECT id, lease_attempt FROM executions WHERE worker_id = $1 AND status IN ('working', 'input_required')",
        )
        .bind(worker_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let attempt: i64 = r.try_get("lease_attempt")?;
                let execution_id = super::records::parse_id(r.try_get("id")?)?;
                Ok(AttemptRef { execution_id, attempt: u32::try_from(attempt).unwrap_or(0) })
            })
            .collect()
    }

    /// The event log of one execution: (seq, at, kind, status).
    pub async fn list_events(&self, execution_id: &ExecutionId) -> Result<Vec<EventRecord>> {
        events_on(&self.pool, execution_id).await
    }

    /// The event log for the history (the read replica while it is fresh).
    pub(crate) async fn history_events(&self, execution_id: &ExecutionId) -> Result<Vec<EventRecord>> {
        self.heavy_read(|pool| async move { events_on(&pool, execution_id).await }).await
    }

    /// Leases up to `limit` due pending executions of `tools` in `project_id` to
    /// `worker_id`, all in one transaction (one commit for the batch).
    pub(crate) async fn claim(
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
        let mut tx = self.begin().await?;
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
        self.commit(tx).await?;
        written.records.iter().for_each(|r| self.remember(r));
        Ok(written.records.into_iter().map(|record| Claimed { attempt: record.state.attempts, record }).collect())
    }

    /// Whether a pending execution of any project is due at `now`: a superset
    /// of what [`Store::claim`] would find, in one read of the claimable
    /// index, without a transaction or a lock.
    pub(crate) async fn any_claimable(&self, now: Millis) -> Result<bool> {
        let due: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT 1 FROM executions WHERE status = 'pending' AND not_before <= $1 LIMIT 1) d",
        )
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        Ok(due > 0)
    }

    /// Applies many events with one commit. Each answer is as `apply`'s. An
    /// error fails the whole batch.
    ///
    /// On Postgres each transition is first decided on the row this replica
    /// last wrote, or one read unlocked, and all are written as one statement
    /// that commits itself, each guarded by its row's version: one round trip
    /// or two where the transaction took six, and no row lock. A row another
    /// writer moved in between, and any batch that needs more than that
    /// statement, takes the locked path: one transaction, rows locked in id
    /// order.
    pub(crate) async fn apply_batch(
        &self,
        items: &[(ExecutionId, Event, EventData)],
        now: Millis,
    ) -> Result<Vec<Answer>> {
        let mut out: Vec<Answer> = vec![None; items.len()];
        // One transition per execution per batch; a second event for the same
        // execution waits for the next one.
        let mut seen = std::collections::HashSet::new();
        let (mut first, later): (Vec<usize>, Vec<usize>) = (0..items.len()).partition(|i| seen.insert(&items[*i].0));
        if self.dialect == super::Dialect::Postgres {
            first = self.apply_unlocked(items, first, now, &mut out).await?;
        }
        self.apply_locked(items, &first, now, &mut out).await?;
        for i in later {
            let (id, event, data) = &items[i];
            out[i] = self.apply(id, event, data, now).await?;
        }
        Ok(out)
    }

    /// The unlocked attempt of `apply_batch`: answers what it settled in
    /// `out` and returns the items left for the locked path.
    async fn apply_unlocked(
        &self,
        items: &[(ExecutionId, Event, EventData)],
        first: Vec<usize>,
        now: Millis,
        out: &mut [Answer],
    ) -> Result<Vec<usize>> {
        // Decided on the row as this replica last wrote it where kept; what
        // the machine would ignore there is decided again on a fresh read.
        let mut decided = Vec::new();
        let mut unread = Vec::new();
        for i in first {
            let (id, event, _) = &items[i];
            match self.last_written.get(id).map(|r| (domain::apply(&r.state, event, now), r)) {
                Some((Ok(t), record)) => decided.push((i, record, t)),
                _ => unread.push(i),
            }
        }
        let ids: Vec<&ExecutionId> = unread.iter().map(|i| &items[*i].0).collect();
        let records = if ids.is_empty() { Default::default() } else { fetch_many(&self.hot, &ids, "").await? };
        decide_read(items, &unread, records, now, out, &mut decided);
        let Some((written, queued)) = persist_unlocked(self, &pending(items, &decided), now).await? else {
            return Ok(decided.into_iter().map(|(i, _, _)| i).collect());
        };
        let mut left = Vec::new();
        for ((i, _, t), record) in decided.into_iter().zip(written) {
            match record {
                Some(record) => {
                    self.remember(&record);
                    out[i] = Some(Ok(Applied { record, effects: t.effects, deliveries_queued: queued }));
                }
                None => left.push(i),
            }
        }
        Ok(left)
    }

    /// The locked path of `apply_batch`: `which` in one transaction, rows
    /// locked in id order.
    async fn apply_locked(
        &self,
        items: &[(ExecutionId, Event, EventData)],
        which: &[usize],
        now: Millis,
        out: &mut [Answer],
    ) -> Result<()> {
        if which.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        let ids: Vec<&ExecutionId> = which.iter().map(|i| &items[*i].0).collect();
        let records = fetch_many(&mut *tx, &ids, self.dialect.for_update()).await?;
        let mut decided = Vec::new();
        decide_read(items, which, records, now, out, &mut decided);
        let written = persist_many(&mut tx, &pending(items, &decided), now).await?;
        self.commit(tx).await?;
        let queued = written.deliveries_queued;
        for ((i, _, t), record) in decided.into_iter().zip(written.records) {
            self.remember(&record);
            out[i] = Some(Ok(Applied { record, effects: t.effects, deliveries_queued: queued }));
        }
        Ok(())
    }

    /// Applies `event` to one execution: load under a row lock, run the state
    /// machine, write the next state, the event log row and the attempt record in
    /// one transaction. `Ok(None)` when the id is unknown; `Err(Ignored)` inside
    /// `Ok(Some(Err))` when the machine ignored the event.
    pub(crate) async fn apply(
        &self,
        id: &ExecutionId,
        event: &Event,
        data: &EventData,
        now: Millis,
    ) -> Result<Option<Result<Applied, (domain::Ignored, ExecutionRecord)>>> {
        let mut tx = self.begin().await?;
        let Some(record) = fetch(&mut tx, id, self.dialect.for_update()).await? else {
            return Ok(None);
        };
        let t = match domain::apply(&record.state, event, now) {
            Ok(t) => t,
            Err(ignored) => return Ok(Some(Err((ignored, record)))),
        };
        let (record, deliveries_queued) = persist(&mut tx, &record, event, &t, data, now).await?;
        self.commit(tx).await?;
        self.remember(&record);
        Ok(Some(Ok(Applied { record, effects: t.effects, deliveries_queued })))
    }
}

/// A transition decided for `items[.0]` on the row `.1`.
type Decided = (usize, ExecutionRecord, Transition);

/// Decides the events `which` of `items` on their rows as read: a transition,
/// or the machine's refusal answered in `out` (as of that read). An unknown
/// execution's answer stays `None`.
fn decide_read(
    items: &[(ExecutionId, Event, EventData)],
    which: &[usize],
    mut records: std::collections::HashMap<ExecutionId, ExecutionRecord>,
    now: Millis,
    out: &mut [Answer],
    decided: &mut Vec<Decided>,
) {
    for &i in which {
        let (id, event, _) = &items[i];
        let Some(record) = records.remove(id) else { continue };
        match domain::apply(&record.state, event, now) {
            Ok(t) => decided.push((i, record, t)),
            Err(ignored) => out[i] = Some(Err((ignored, record))),
        }
    }
}

fn pending<'a>(items: &'a [(ExecutionId, Event, EventData)], decided: &'a [Decided]) -> Vec<Pending<'a>> {
    decided
        .iter()
        .map(|(i, before, t)| Pending { before, event: &items[*i].1, transition: t, data: &items[*i].2 })
        .collect()
}

/// Several executions, locked in id order (so concurrent batches cannot deadlock).
async fn fetch_many<'e>(
    on: impl sqlx::Executor<'e, Database = Any>,
    ids: &[&ExecutionId],
    lock: &str,
) -> Result<std::collections::HashMap<ExecutionId, ExecutionRecord>> {
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
        query = query.bind(id.as_str());
    }
    let rows = query.persistent(ids.len() <= super::KEPT_UP_TO).fetch_all(on).await?;
    rows.iter().map(|r| execution_from_row(r).map(|rec| (rec.id.clone(), rec))).collect()
}

pub(super) async fn fetch(
    tx: &mut Transaction<'_, Any>,
    id: &ExecutionId,
    lock: &str,
) -> Result<Option<ExecutionRecord>> {
    let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1{lock}");
    let row = sqlx::query(AssertSqlSafe(sql)).bind(id.as_str()).fetch_optional(&mut **tx).await?;
    row.as_ref().map(execution_from_row).transpose()
}

pub(super) async fn delete_execution(tx: &mut Transaction<'_, Any>, id: &ExecutionId) -> Result<()> {
    for sql in [
        "DELETE FROM input_requests WHERE execution_id = $1",
        "DELETE FROM execution_events WHERE execution_id = $1",
        "DELETE FROM attempts WHERE execution_id = $1",
        "DELETE FROM executions WHERE id = $1",
    ] {
        sqlx::query(sql).bind(id.as_str()).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Writes one transition computed by the state machine (see `write`): the row
/// as written, and whether a webhook delivery was queued.
pub(super) async fn persist(
    tx: &mut Transaction<'_, Any>,
    before: &ExecutionRecord,
    event: &Event,
    t: &Transition,
    data: &EventData,
    now: Millis,
) -> Result<(ExecutionRecord, bool)> {
    let pending = [Pending { before, event, transition: t, data }];
    let mut written = persist_many(tx, &pending, now).await?;
    let record = written.records.pop().ok_or_else(|| Error::Corrupt(before.id.to_string()))?;
    Ok((record, written.deliveries_queued))
}

async fn attempts_on(pool: &AnyPool, execution_id: &ExecutionId) -> Result<Vec<AttemptRecord>> {
    let rows = sqlx::query(
        "SELECT attempt, worker_id, started_at, finished_at, success, error_message, output_ct, error_detail_ct \
         FROM attempts WHERE execution_id = $1 ORDER BY attempt",
    )
    .bind(execution_id.as_str())
    .fetch_all(pool)
    .await?;
    rows.iter().map(|r| attempt_from_row(r, execution_id)).collect()
}

async fn events_on(pool: &AnyPool, execution_id: &ExecutionId) -> Result<Vec<EventRecord>> {
    let rows = sqlx::query("SELECT seq, at, kind, status FROM execution_events WHERE execution_id = $1 ORDER BY seq")
        .bind(execution_id.as_str())
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(EventRecord {
                seq: r.try_get("seq")?,
                at: r.try_get("at")?,
                kind: EventKind::parse(&r.try_get::<String, _>("kind")?),
                status: Status::parse(&r.try_get::<String, _>("status")?),
            })
        })
        .collect()
}
