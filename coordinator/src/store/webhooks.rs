//! Webhook endpoints and the signal outbox. `enqueue` runs inside the
//! transaction that writes transitions (`write::persist_many`): one statement
//! that turns the batch's signals into one row per enabled endpoint of each
//! project (none when a project has none). Delivery rows are claimed with a
//! lease (`SKIP LOCKED` on Postgres), so each is attempted by one replica at a
//! time and taken again when a replica dies holding it.

use super::{Result, Store};
use crate::domain::Millis;
use crate::webhooks::signal::Signal;
use sqlx::any::{Any, AnyArguments, AnyRow};
use sqlx::{Arguments, AssertSqlSafe, Row, Transaction};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointRecord {
    pub id: String,
    pub(crate) org_id: String,
    pub project_id: String,
    pub url: String,
    pub event_type: String,
    pub(crate) secret_ct: Vec<u8>,
    pub(crate) previous_secret_ct: Option<Vec<u8>>,
    pub previous_until: Option<Millis>,
    pub enabled: bool,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// A delivery as admins see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub message_id: String,
    pub(crate) endpoint_id: String,
    pub execution_id: String,
    pub state: String,
    /// pending | delivered | failed
    pub status: String,
    pub attempts: i64,
    pub created_at: Millis,
    /// When the next attempt is due (pending only).
    pub next_attempt_at: Option<Millis>,
    pub last_attempt_at: Option<Millis>,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
    pub finished_at: Option<Millis>,
}

/// A delivery claimed for one attempt, with what is needed to make it.
#[derive(Clone, Debug)]
pub struct ClaimedDelivery {
    pub(crate) id: String,
    pub(crate) message_id: String,
    pub(crate) endpoint_id: String,
    pub(crate) body: String,
    pub(crate) attempts: i64,
    pub(crate) created_at: Millis,
    pub(crate) url: String,
    pub(crate) secret_ct: Vec<u8>,
    pub(crate) previous_secret_ct: Option<Vec<u8>>,
    pub(crate) previous_until: Option<Millis>,
}

/// How an attempt ended, as it is recorded.
#[derive(Clone, Debug)]
pub struct AttemptOutcome {
    pub(crate) at: Millis,
    pub(crate) status_code: Option<i64>,
    pub(crate) error: Option<String>,
    /// delivered | pending | failed
    pub(crate) status: &'static str,
    pub(crate) next_attempt_at: Millis,
}

const ENDPOINT_COLUMNS: &str = "id, org_id, project_id, url, event_type, secret_ct, previous_secret_ct, \
    previous_until, enabled, created_at, updated_at";

fn endpoint_from_row(r: &AnyRow) -> Result<EndpointRecord> {
    let enabled: i64 = r.try_get("enabled")?;
    Ok(EndpointRecord {
        id: r.try_get("id")?,
        org_id: r.try_get("org_id")?,
        project_id: r.try_get("project_id")?,
        url: r.try_get("url")?,
        event_type: r.try_get("event_type")?,
        secret_ct: r.try_get("secret_ct")?,
        previous_secret_ct: r.try_get("previous_secret_ct")?,
        previous_until: r.try_get("previous_until")?,
        enabled: enabled != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn delivery_from_row(r: &AnyRow) -> Result<DeliveryRecord> {
    let status: String = r.try_get("status")?;
    let next: i64 = r.try_get("next_attempt_at")?;
    Ok(DeliveryRecord {
        message_id: r.try_get("message_id")?,
        endpoint_id: r.try_get("endpoint_id")?,
        execution_id: r.try_get("execution_id")?,
        state: r.try_get("state")?,
        next_attempt_at: (status == "pending").then_some(next),
        status,
        attempts: r.try_get("attempts")?,
        created_at: r.try_get("created_at")?,
        last_attempt_at: r.try_get("last_attempt_at")?,
        last_status_code: r.try_get("last_status_code")?,
        last_error: r.try_get("last_error")?,
        finished_at: r.try_get("finished_at")?,
    })
}

fn add<'t, T>(args: &mut AnyArguments, v: T) -> Result<()>
where
    T: sqlx::Encode<'t, Any> + sqlx::Type<Any>,
{
    args.add(v).map_err(|e| super::Error::Database(sqlx::Error::Encode(e)))
}

/// `$from, …` for `n` placeholders.
fn list(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// Writes the signals of a batch of transitions, one row per enabled endpoint
/// of the signal's project, in the caller's transaction.
/// Queues a delivery of each signal to each enabled endpoint of its project;
/// answers how many were queued.
pub(super) async fn enqueue(tx: &mut Transaction<'_, Any>, signals: &[Signal], now: Millis) -> Result<u64> {
    if signals.is_empty() {
        return Ok(0);
    }
    let mut args = AnyArguments::default();
    let (values, insert) = enqueue_parts(&mut args, 1, signals, signals.len(), now)?;
    let sql = format!("WITH {values} {insert}");
    Ok(sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).execute(&mut **tx).await?.rows_affected())
}

/// The signals' values as a `w(…) AS (VALUES …)` list and the `INSERT … SELECT`
/// that reads them, with placeholders numbered from `first` (their values
/// added to `args`): the statement alone, or a part of a larger one. The list
/// is padded to `to` rows with copies of the first signal for the execution
/// `''`, which the one statement's gate never admits (store/write.rs).
pub(super) fn enqueue_parts(
    args: &mut AnyArguments,
    first: usize,
    signals: &[Signal],
    to: usize,
    now: Millis,
) -> Result<(String, String)> {
    let rows = to.max(signals.len());
    let padding = signals.first().into_iter().cycle().take(rows - signals.len());
    for (i, s) in signals.iter().chain(padding).enumerate() {
        add(args, s.message_id.clone())?;
        add(args, s.project_id.clone())?;
        add(args, if i < signals.len() { s.execution_id.clone() } else { String::new() })?;
        add(args, s.state)?;
        add(args, s.body.clone())?;
    }
    let rows: Vec<String> = (0..rows).map(|i| format!("({})", list(first + i * 5, 5))).collect();
    let now_at = first + rows.len() * 5;
    add(args, now)?;
    add(args, crate::webhooks::EVENT_TYPE)?;
    let values = format!("w(message_id, project_id, execution_id, state, body) AS (VALUES {})", rows.join(", "));
    let insert = format!(
        "INSERT INTO webhook_deliveries (id, org_id, message_id, endpoint_id, project_id, execution_id, state, body, \
         status, attempts, created_at, next_attempt_at) \
         SELECT w.message_id || ':' || e.id, e.org_id, w.message_id, e.id, e.project_id, w.execution_id, w.state, w.body, \
         'pending', 0, ${now_at}, ${now_at} \
         FROM w JOIN webhook_endpoints e ON e.project_id = w.project_id AND e.enabled = 1 AND e.event_type = ${}",
        now_at + 1
    );
    Ok((values, insert))
}

impl Store {
    /// Stores `e` unless its project already has `cap` endpoints; false then.
    pub(crate) async fn create_webhook(&self, e: &EndpointRecord, cap: u32) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO webhook_endpoints (id, org_id, project_id, url, event_type, secret_ct, previous_secret_ct, \
             previous_until, enabled, created_at, updated_at) SELECT $1, $2, $3, $4, $5, $6, NULL, NULL, $7, $8, $8 \
             WHERE (SELECT COUNT(*) FROM webhook_endpoints WHERE project_id = $3) < $9",
        )
        .bind(&e.id)
        .bind(&e.org_id)
        .bind(&e.project_id)
        .bind(&e.url)
        .bind(&e.event_type)
        .bind(&e.secret_ct)
        .bind(i64::from(e.enabled))
        .bind(e.created_at)
        .bind(i64::from(cap))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A project's endpoints, oldest first.
    pub async fn webhooks(&self, project_id: &str) -> Result<Vec<EndpointRecord>> {
        let sql =
            format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE project_id = $1 ORDER BY created_at, id");
        let rows = sqlx::query(AssertSqlSafe(sql)).bind(project_id).fetch_all(&self.pool).await?;
        rows.iter().map(endpoint_from_row).collect()
    }

    pub(crate) async fn webhook(&self, id: &str) -> Result<Option<EndpointRecord>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1");
        let row = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(endpoint_from_row).transpose()
    }

    /// False when there is no such endpoint.
    pub(crate) async fn set_webhook_enabled(&self, id: &str, enabled: bool, now: Millis) -> Result<bool> {
        let done = sqlx::query("UPDATE webhook_endpoints SET enabled = $1, updated_at = $2 WHERE id = $3")
            .bind(i64::from(enabled))
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Makes `secret_ct` current and keeps `previous_ct` signing until `previous_until`.
    pub(crate) async fn rotate_webhook_secret(
        &self,
        id: &str,
        secret_ct: &[u8],
        previous_ct: &[u8],
        previous_until: Millis,
        now: Millis,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE webhook_endpoints SET secret_ct = $1, previous_secret_ct = $2, previous_until = $3, \
             updated_at = $4 WHERE id = $5",
        )
        .bind(secret_ct)
        .bind(previous_ct)
        .bind(previous_until)
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes the endpoint and the signals still owed to it.
    pub(crate) async fn delete_webhook(&self, id: &str) -> Result<bool> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1").bind(id).execute(&mut *tx).await?;
        let done = sqlx::query("DELETE FROM webhook_endpoints WHERE id = $1").bind(id).execute(&mut *tx).await?;
        self.commit(tx).await?;
        Ok(done.rows_affected() == 1)
    }

    /// An endpoint's deliveries, newest first.
    pub(crate) async fn webhook_deliveries(&self, endpoint_id: &str, limit: u32) -> Result<Vec<DeliveryRecord>> {
        let rows = sqlx::query(
            "SELECT message_id, endpoint_id, execution_id, state, status, attempts, created_at, next_attempt_at, \
             last_attempt_at, last_status_code, last_error, finished_at FROM webhook_deliveries \
             WHERE endpoint_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
        )
        .bind(endpoint_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(delivery_from_row).collect()
    }

    /// Takes up to `limit` due deliveries of enabled endpoints for `owner`
    /// until `lease_until`. Rows another replica is claiming are skipped.
    pub(crate) async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        now: Millis,
        lease_until: Millis,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        let sql = format!(
            "SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1 \
             AND (lease_until IS NULL OR lease_until <= $1) \
             AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE enabled = 1) \
             ORDER BY next_attempt_at LIMIT $2{}",
            self.dialect.for_update_skip_locked()
        );
        let mut tx = self.begin().await?;
        let ids: Vec<String> = sqlx::query(AssertSqlSafe(sql))
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| r.try_get("id"))
            .collect::<Result<_, _>>()?;
        if ids.is_empty() {
            self.commit(tx).await?;
            return Ok(Vec::new());
        }
        let mut args = AnyArguments::default();
        add(&mut args, lease_until)?;
        add(&mut args, owner.to_owned())?;
        for id in &ids {
            add(&mut args, id.clone())?;
        }
        let sql = format!(
            "UPDATE webhook_deliveries SET lease_until = $1, lease_owner = $2 WHERE id IN ({})",
            list(3, ids.len())
        );
        sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).execute(&mut *tx).await?;
        let mut args = AnyArguments::default();
        for id in &ids {
            add(&mut args, id.clone())?;
        }
        let sql = format!(
            "SELECT d.id, d.message_id, d.endpoint_id, d.body, d.attempts, d.created_at, e.url, e.secret_ct, \
             e.previous_secret_ct, e.previous_until FROM webhook_deliveries d \
             JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id IN ({})",
            list(1, ids.len())
        );
        let rows = sqlx::query_with(AssertSqlSafe(sql), args).persistent(false).fetch_all(&mut *tx).await?;
        self.commit(tx).await?;
        rows.iter()
            .map(|r| {
                Ok(ClaimedDelivery {
                    id: r.try_get("id")?,
                    message_id: r.try_get("message_id")?,
                    endpoint_id: r.try_get("endpoint_id")?,
                    body: r.try_get("body")?,
                    attempts: r.try_get("attempts")?,
                    created_at: r.try_get("created_at")?,
                    url: r.try_get("url")?,
                    secret_ct: r.try_get("secret_ct")?,
                    previous_secret_ct: r.try_get("previous_secret_ct")?,
                    previous_until: r.try_get("previous_until")?,
                })
            })
            .collect()
    }

    /// Records an attempt and releases the lease, if `owner` still holds it.
    pub(crate) async fn finish_webhook_attempt(&self, id: &str, owner: &str, o: &AttemptOutcome) -> Result<bool> {
        let finished = (o.status != "pending").then_some(o.at);
        let done = sqlx::query(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $1, last_status_code = $2, \
             last_error = $3, status = $4, next_attempt_at = $5, finished_at = $6, lease_until = NULL, \
             lease_owner = NULL WHERE id = $7 AND lease_owner = $8",
        )
        .bind(o.at)
        .bind(o.status_code)
        .bind(o.error.as_deref())
        .bind(o.status)
        .bind(o.next_attempt_at)
        .bind(finished)
        .bind(id)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Forgets settled deliveries that finished before `before`.
    pub(crate) async fn prune_webhook_deliveries(&self, before: Millis) -> Result<u64> {
        let done = sqlx::query("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND finished_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
