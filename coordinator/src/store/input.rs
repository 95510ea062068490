//! Input requests published by remote MCP servers, and the owners' answers.
//! A request is `open` until answered, `answered` until the worker relayed the
//! answer to the remote server, then `delivered`.

use super::executions::{Applied, fetch, persist};
use super::write::EventData;
use super::{Result, Store};
use crate::domain::{self, Event, ExecutionId, Millis};
use sqlx::Row;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InputRequestRow {
    pub(crate) request_key: String,
    pub(crate) remote_key: String,
    pub(crate) attempt: u32,
    pub(crate) spec_ct: Vec<u8>,
    pub(crate) state: String,
    pub(crate) response_ct: Option<Vec<u8>>,
}

impl InputRequestRow {
    /// Waiting for the owner's answer.
    pub(crate) fn is_open(&self) -> bool {
        self.state == "open"
    }

    /// Answered, and the answer not yet relayed to the remote server.
    pub(crate) fn is_answered(&self) -> bool {
        self.state == "answered"
    }
}

/// An answer recorded for an open request, to relay to the lease holder.
#[derive(Clone, Debug)]
pub(crate) struct Answered {
    pub(crate) applied: Applied,
    pub(crate) remote_key: String,
    pub(crate) attempt: u32,
}

fn row_to_request(r: &sqlx::any::AnyRow) -> Result<InputRequestRow> {
    let attempt: i64 = r.try_get("attempt")?;
    Ok(InputRequestRow {
        request_key: r.try_get("request_key")?,
        remote_key: r.try_get("remote_key")?,
        attempt: u32::try_from(attempt).unwrap_or(0),
        spec_ct: r.try_get("spec_ct")?,
        state: r.try_get("state")?,
        response_ct: r.try_get("response_ct")?,
    })
}

impl Store {
    pub(crate) async fn list_input_requests(&self, execution_id: &ExecutionId) -> Result<Vec<InputRequestRow>> {
        let rows = sqlx::query(
            "SELECT request_key, remote_key, attempt, spec_ct, state, response_ct FROM input_requests \
             WHERE execution_id = $1 ORDER BY created_at, request_key",
        )
        .bind(execution_id.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(row_to_request).collect()
    }

    /// Records the owner's answer to an open request and moves the execution
    /// back to working once nothing stays open. `None` when the key is unknown or
    /// no longer open: the caller still acknowledges (the ack proves nothing).
    pub(crate) async fn answer_input(
        &self,
        execution_id: &ExecutionId,
        request_key: &str,
        response_ct: &[u8],
        now: Millis,
    ) -> Result<Option<Answered>> {
        let mut tx = self.begin().await?;
        let Some(record) = fetch(&mut tx, execution_id, self.dialect.for_update()).await? else {
            return Ok(None);
        };
        let answered = sqlx::query(
            "UPDATE input_requests SET state = 'answered', response_ct = $1, answered_at = $2 \
             WHERE execution_id = $3 AND request_key = $4 AND state = 'open' RETURNING remote_key, attempt",
        )
        .bind(response_ct)
        .bind(now)
        .bind(execution_id.as_str())
        .bind(request_key)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(answered) = answered else { return Ok(None) };
        let remote_key: String = answered.try_get("remote_key")?;
        let attempt: i64 = answered.try_get("attempt")?;
        let open: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM input_requests WHERE execution_id = $1 AND state = 'open'")
                .bind(execution_id.as_str())
                .fetch_one(&mut *tx)
                .await?;
        let event = Event::InputAnswered { all_answered: open == 0 };
        let Ok(t) = domain::apply(&record.state, &event, now) else {
            // Terminal or no longer waiting: nothing to relay.
            return Ok(None);
        };
        // The answer is kept with the record: it counts toward its retained bytes.
        let data = EventData { payload_bytes: response_ct.len() as i64, ..Default::default() };
        let (record, deliveries_queued) = persist(&mut tx, &record, &event, &t, &data, now).await?;
        self.commit(tx).await?;
        Ok(Some(Answered {
            applied: Applied { record, effects: t.effects, deliveries_queued },
            remote_key,
            attempt: u32::try_from(attempt).unwrap_or(0),
        }))
    }

    /// Marks an answer relayed, only when `worker_id` holds the execution's
    /// lease for `attempt`: false when it does not (nothing changes).
    pub(crate) async fn mark_input_delivered(
        &self,
        execution_id: &ExecutionId,
        attempt: u32,
        remote_key: &str,
        worker_id: &str,
    ) -> Result<bool> {
        let holder: Option<(Option<String>, Option<i64>)> =
            sqlx::query_as("SELECT worker_id, lease_attempt FROM executions WHERE id = $1")
                .bind(execution_id.as_str())
                .fetch_optional(&self.pool)
                .await?;
        if holder != Some((Some(worker_id.to_owned()), Some(i64::from(attempt)))) {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE input_requests SET state = 'delivered' WHERE execution_id = $1 AND remote_key = $2 \
             AND state = 'answered' AND attempt = $3",
        )
        .bind(execution_id.as_str())
        .bind(remote_key)
        .bind(i64::from(attempt))
        .execute(&self.pool)
        .await?;
        Ok(true)
    }

    /// Answers not yet relayed for the open executions leased to `worker_id`.
    pub(crate) async fn undelivered_answers(&self, worker_id: &str) -> Result<Vec<(ExecutionId, InputRequestRow)>> {
        let rows = sqlx::query(
            "SELECT i.execution_id, i.request_key, i.remote_key, i.attempt, i.spec_ct, i.state, i.response_ct \
             FROM input_requests i JOIN executions e ON e.id = i.execution_id \
             WHERE e.worker_id = $1 AND e.status IN ('working', 'input_required') AND i.state = 'answered'",
        )
        .bind(worker_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((super::records::parse_id(r.try_get("execution_id")?)?, row_to_request(r)?))).collect()
    }
}
