//! Remote-task correlation and task-time input (remote MCP servers only): the
//! worker records a remote task before relying on it, publishes input requests
//! under keys Baton mints, and relays the owners' answers.

use super::messages::{
    AttemptRef, Command, InputAnswer, InputDelivered, InputRequested, MessageKind, OpenInputRequest, OwnerAnswer,
    RemoteTaskStarted,
};
use super::workers::sessions::Session;
use super::{Engine, Error, Result, Scope};
use crate::crypto::Field;
use crate::domain::{Event, ExecutionId, Ignored, StopReason};
use crate::store::{EventData, PublishedRequest};
use baton_proto::clock::now_ms;
use serde_json::{Value, json};

impl Engine {
    /// Records the remote task of the session's lease, then acknowledges: only
    /// then may the worker rely on it. A shorter remote ttl shortens the deadline.
    pub(crate) async fn remote_task_started(&self, session: &Session, m: RemoteTaskStarted) -> Result<()> {
        if m.remote_task_id.is_empty() {
            return Err(Error::Invalid("remote task id is empty".into()));
        }
        let now = now_ms();
        // The ttl comes from a third-party server: it must not overflow.
        let deadline = (m.remote_ttl_ms > 0).then(|| now.saturating_add(m.remote_ttl_ms));
        let at = m.attempt;
        let event = Event::RemoteTaskRecorded { worker_id: session.worker_id.clone(), attempt: at.attempt, deadline };
        let data = EventData { remote_task_id: Some(m.remote_task_id), ..Default::default() };
        match self.store.apply(&at.execution_id, &event, &data, now).await? {
            Some(Ok(applied)) => {
                self.after_commit(&applied).await;
                session.send(Command::Ack { attempt: at, kind: MessageKind::RemoteTask });
            }
            Some(Err((Ignored::NotHolder, _))) => {
                session.refuse(at, MessageKind::RemoteTask);
            }
            _ => {
                session.stop(&at.execution_id, at.attempt, StopReason::OwnerLost);
            }
        }
        Ok(())
    }

    /// Publishes the remote server's requests under fresh keys; the execution
    /// turns input_required.
    pub(crate) async fn input_requested(&self, session: &Session, m: InputRequested) -> Result<()> {
        let at = m.attempt;
        // A request already published for this attempt (a resent message, or a
        // new owner that sees the same remote request again) keeps its key.
        let known: std::collections::HashMap<String, bool> = self
            .store
            .list_input_requests(&at.execution_id)
            .await?
            .into_iter()
            .filter(|r| r.attempt == at.attempt)
            .map(|r| (r.remote_key.clone(), r.is_open()))
            .collect();
        let still_open = m.requests.iter().any(|r| known.get(&r.remote_key).is_some_and(|open| *open));
        let fresh: Vec<&super::messages::RemoteInputRequest> =
            m.requests.iter().filter(|r| !known.contains_key(&r.remote_key)).collect();
        if fresh.is_empty() && !still_open {
            session.send(Command::Ack { attempt: at, kind: MessageKind::InputRequested });
            return Ok(());
        }
        let mut published = Vec::with_capacity(fresh.len());
        for r in fresh {
            let key = crate::domain::id::random_id("ir_", 128);
            let schema: Value = serde_json::from_str(&r.requested_schema_json).unwrap_or(Value::Null);
            let spec = json!({"message": r.message, "requested_schema": schema}).to_string();
            let sealed = self.ring.seal(at.execution_id.as_str(), Field::InputRequest, spec.as_bytes())?;
            published.push(PublishedRequest { request_key: key, remote_key: r.remote_key.clone(), spec_ct: sealed });
        }
        let event = Event::InputRequested { worker_id: session.worker_id.clone(), attempt: at.attempt };
        let payload_bytes = published.iter().map(|p| p.spec_ct.len() as i64).sum();
        let data = EventData { new_input_requests: published, payload_bytes, ..Default::default() };
        match self.store.apply(&at.execution_id, &event, &data, now_ms()).await? {
            Some(Ok(applied)) => {
                self.after_commit(&applied).await;
                session.send(Command::Ack { attempt: at, kind: MessageKind::InputRequested });
            }
            Some(Err((Ignored::NotHolder, _))) => {
                session.refuse(at, MessageKind::InputRequested);
            }
            _ => {
                session.stop(&at.execution_id, at.attempt, StopReason::OwnerLost);
            }
        }
        Ok(())
    }

    /// The worker relayed an answer; only the lease holder may say so.
    pub(crate) async fn input_delivered(&self, session: &Session, m: InputDelivered) -> Result<()> {
        let at = m.attempt;
        if !self.store.mark_input_delivered(&at.execution_id, at.attempt, &m.remote_key, &session.worker_id).await? {
            session.refuse(at, MessageKind::InputDelivered);
        }
        Ok(())
    }

    /// The owner answers a published request. Access and revocation are checked
    /// now, before anything reaches a worker; the acknowledgement deliberately
    /// does not say whether the key was current.
    pub(crate) async fn provide_input(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        request_key: &str,
        response: Option<OwnerAnswer>,
    ) -> Result<bool> {
        let (p, record) = self.read_owned(authorization, scope, id).await?;
        let id = &record.id;
        p.may_act()?;
        // Current tool policy, re-evaluated before the owner is contacted.
        if !record.status().is_terminal() && !self.current_tool(&record).await?.task_time_input {
            return Err(Error::PolicyRefused(format!("tool {:?} no longer accepts task-time input", record.tool_name)));
        }
        let response = response.ok_or_else(|| Error::Invalid("`response` is required".into()))?;
        if response.action.is_empty() {
            return Err(Error::Invalid("`response.action` must be accept, decline or cancel".into()));
        }
        let content: Value = serde_json::from_str(&response.content_json).unwrap_or(Value::Null);
        let sealed_body = json!({"action": response.action, "content": content}).to_string();
        let sealed = self.ring.seal(id.as_str(), Field::InputResponse, sealed_body.as_bytes())?;
        let Some(answered) = self.store.answer_input(id, request_key, &sealed, now_ms()).await? else {
            return Ok(true);
        };
        self.after_commit(&answered.applied).await;
        if let Some(lease) = answered.applied.record.state.phase.lease() {
            let msg = InputAnswer {
                attempt: AttemptRef::new(id, answered.attempt),
                remote_key: answered.remote_key,
                action: response.action,
                content_json: content.to_string(),
            };
            // Not delivered now: the answer is durable and is relayed when the
            // worker (or a new owner) registers or resumes.
            let _ = self.deliver_input(&lease.worker_id, msg).await;
        }
        Ok(true)
    }

    /// Sends an answer to the session holding the lease, wherever it lives.
    pub async fn deliver_input(&self, worker_id: &str, m: InputAnswer) -> bool {
        if let Some(s) = self.sessions.get(worker_id) {
            return s.send(Command::Answer(m));
        }
        match self.store.worker_coordinator(worker_id).await {
            Ok(Some((coordinator_id, url))) if coordinator_id != self.options.id => {
                self.peers.deliver_answer(&url, worker_id, m).await
            }
            _ => false,
        }
    }

    /// Answers recorded but not yet relayed, as messages for their lease holder.
    pub(crate) async fn pending_answers(&self, execution_id: &ExecutionId) -> Result<Vec<InputAnswer>> {
        let rows = self.store.list_input_requests(execution_id).await?;
        rows.into_iter().filter(|r| r.is_answered()).map(|r| self.answer_message(execution_id, &r)).collect()
    }

    pub(super) fn answer_message(
        &self,
        execution_id: &ExecutionId,
        r: &crate::store::InputRequestRow,
    ) -> Result<InputAnswer> {
        let body = match &r.response_ct {
            Some(ct) => {
                serde_json::from_slice::<Value>(&self.ring.open(execution_id.as_str(), Field::InputResponse, ct)?)
                    .unwrap_or(Value::Null)
            }
            None => Value::Null,
        };
        Ok(InputAnswer {
            attempt: AttemptRef::new(execution_id, r.attempt),
            remote_key: r.remote_key.clone(),
            action: body["action"].as_str().unwrap_or_default().to_owned(),
            content_json: body["content"].to_string(),
        })
    }

    /// The open requests of an execution, for the owner's view.
    pub(crate) async fn open_requests(&self, execution_id: &ExecutionId) -> Result<Vec<OpenInputRequest>> {
        let rows = self.store.list_input_requests(execution_id).await?;
        rows.into_iter()
            .filter(|r| r.is_open())
            .map(|r| {
                let spec: Value =
                    serde_json::from_slice(&self.ring.open(execution_id.as_str(), Field::InputRequest, &r.spec_ct)?)
                        .unwrap_or(Value::Null);
                Ok(OpenInputRequest {
                    request_key: r.request_key,
                    message: spec["message"].as_str().unwrap_or_default().to_owned(),
                    requested_schema_json: spec["requested_schema"].to_string(),
                })
            })
            .collect()
    }
}
