//! The driver's poll loop: `tasks/get` at the server's interval, input
//! requests published and answers relayed, the 2025-11-25 `tasks/result`
//! stream read for server→client requests and the final result.

use super::{Driver, Flow, Never, StreamEvent, error};
use crate::remote::client::{Dialect, RELATED_TASK, describe_request, form_elicitation};
use crate::remote::link::Relay;
use crate::remote::task::{Status, TaskState, result_json};
use crate::remote::transport::{CallError, Incoming};
use baton_proto::worker::v1::{self as wpb, InputAction, MessageKind, settlement::Outcome, worker_message::Msg};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl Driver<'_> {
    pub(super) async fn poll_loop(&mut self) -> Result<Never, Flow> {
        let mut next_poll = Instant::now();
        let mut relay_retry = Instant::now();
        loop {
            if let Some(flow) = self.outcome.take() {
                if matches!(flow, Flow::Settle(Outcome::UnsupportedInteraction(_))) {
                    self.cancel_remote().await;
                }
                return Err(flow);
            }
            if !self.to_publish.is_empty() {
                self.publish().await?;
            }
            if !self.answers.is_empty() && Instant::now() >= relay_retry && !self.relay_answers().await {
                relay_retry = Instant::now() + Duration::from_secs(1);
            }
            if self.stop.is_some() && !self.cancel_sent {
                if self.cancel_remote().await == Some(true) {
                    return Err(Flow::Settle(Outcome::Cancelled(true)));
                }
                next_poll = Instant::now();
            }
            if self.remaining().is_zero() {
                return Err(self.timed_out().await);
            }
            if Instant::now() >= next_poll {
                let state = self.get().await?;
                let interval =
                    state.poll.unwrap_or(super::DEFAULT_POLL).clamp(Duration::from_millis(20), Duration::from_secs(60));
                self.on_state(state).await?;
                next_poll = Instant::now() + interval;
            }
            let wake = if self.answers.is_empty() { next_poll } else { next_poll.min(relay_retry) };
            let until = wake.saturating_duration_since(Instant::now()).min(self.remaining());
            self.pause(until).await?;
        }
    }

    async fn get(&mut self) -> Result<TaskState, Flow> {
        let Some(task) = self.task.clone() else { return Err(error("no remote task to poll", None)) };
        let client = self.client.clone();
        let dialect = client.dialect;
        let v = self
            .retrying(true, move || {
                let (client, task) = (client.clone(), task.clone());
                async move { client.short("tasks/get", json!({"taskId": task.id}), task.session.as_deref()).await }
            })
            .await
            .map_err(|flow| match flow {
                Flow::Settle(Outcome::Error(e)) if e.message.contains("not found") || e.message.contains("expired") => {
                    error("the remote server no longer knows the task (expired or lost)", None)
                }
                other => other,
            })?;
        TaskState::parse(&v, dialect).ok_or_else(|| error("the remote server answered tasks/get with no task", None))
    }

    /// Acts on a polled (or created) state.
    pub(super) async fn on_state(&mut self, t: TaskState) -> Result<(), Flow> {
        if t.message.is_some() && t.message != self.last_message {
            self.last_message = t.message.clone();
            self.progress(0.0, None, t.message.clone().unwrap_or_default()).await;
        }
        let v1 = self.client.dialect == Dialect::V2025;
        match t.status {
            Status::Working => {}
            Status::InputRequired if v1 => self.ensure_stream(),
            Status::InputRequired => {
                for r in &t.input_requests {
                    if self.published.contains(&r.key) || self.delivered.contains(&r.key) {
                        continue;
                    }
                    match form_elicitation(&r.method, &r.params) {
                        Some((message, schema)) => self.to_publish.push(wpb::InputRequestSpec {
                            remote_key: r.key.clone(),
                            message,
                            requested_schema_json: schema.to_string(),
                        }),
                        None => {
                            self.outcome = Some(Flow::Settle(Outcome::UnsupportedInteraction(describe_request(
                                &r.method, &r.params,
                            ))));
                            return Ok(());
                        }
                    }
                }
            }
            Status::Completed | Status::Failed if v1 => self.ensure_stream(),
            Status::Completed => {
                let r = t.result.unwrap_or(json!({"content": []}));
                self.outcome = Some(Flow::Settle(Outcome::ResultJson(result_json(&r))));
            }
            Status::Failed => {
                self.outcome = Some(match (&t.result, &t.error) {
                    (Some(r), _) => Flow::Settle(Outcome::ResultJson(result_json(r))),
                    (None, Some(e)) => error(
                        e["message"].as_str().or(t.message.as_deref()).unwrap_or("the remote task failed"),
                        Some(e),
                    ),
                    (None, None) => error(t.message.as_deref().unwrap_or("the remote task failed"), None),
                });
            }
            Status::Cancelled => self.outcome = Some(Flow::Settle(Outcome::Cancelled(true))),
        }
        Ok(())
    }

    /// Publishes new requests and waits until the coordinator recorded them.
    async fn publish(&mut self) -> Result<(), Flow> {
        let mut requests = std::mem::take(&mut self.to_publish);
        let mut seen = std::collections::HashSet::new();
        requests.retain(|r| seen.insert(r.remote_key.clone()) && !self.published.contains(&r.remote_key));
        if requests.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = requests.iter().map(|r| r.remote_key.clone()).collect();
        let m = Msg::InputRequested(wpb::InputRequested {
            execution_id: self.a.execution_id.clone(),
            attempt: self.a.attempt,
            requests,
        });
        self.await_ack(m, MessageKind::InputRequested).await?;
        self.published.extend(keys);
        Ok(())
    }

    /// Relays queued answers; false when one must be tried again later.
    async fn relay_answers(&mut self) -> bool {
        let Some(task) = self.task.clone() else { return true };
        while let Some(answer) = self.answers.pop_front() {
            let key = answer.remote_key.clone();
            if !self.delivered.contains(&key) {
                let content: Value = serde_json::from_str(&answer.content_json).unwrap_or(Value::Null);
                // MCP's elicitation actions are the wire's names; one this
                // worker cannot read neither accepts nor declines: it cancels.
                let action = match answer.action() {
                    InputAction::Unspecified => InputAction::Cancel,
                    a => a,
                };
                let mut response = json!({"action": action.name()});
                if action == InputAction::Accept && !content.is_null() {
                    response["content"] = content;
                }
                let sent = match self.client.dialect {
                    Dialect::V2026 => {
                        let params = json!({"taskId": task.id, "inputResponses": {key.clone(): response}});
                        self.client.short("tasks/update", params, None).await.map(|_| ())
                    }
                    Dialect::V2025 => {
                        response["_meta"] = json!({RELATED_TASK: {"taskId": task.id}});
                        let id: Value = serde_json::from_str(&key).unwrap_or(Value::String(key.clone()));
                        self.client.respond(&id, Ok(response), task.session.as_deref()).await
                    }
                };
                match sent {
                    Ok(()) => {}
                    Err(e) if e.is_transient() => {
                        tracing::warn!(error = %e, "relaying an answer to the remote server; will retry");
                        self.answers.push_front(answer);
                        return false;
                    }
                    Err(e) => tracing::warn!(error = %e, "the remote server refused an answer"),
                }
                self.delivered.insert(key.clone());
            }
            let d = wpb::InputDelivered {
                execution_id: self.a.execution_id.clone(),
                attempt: self.a.attempt,
                remote_key: key,
            };
            self.up.send(Msg::InputDelivered(d)).await;
        }
        true
    }

    /// Waits up to `d`, handling whatever arrives meanwhile; returns early when
    /// there is something for the loop to do.
    pub(super) async fn pause(&mut self, d: Duration) -> Result<(), Flow> {
        let stream = &mut self.stream;
        let relay = &mut *self.relay;
        let abandon = &self.abandon;
        let stream_rx = async {
            match stream.as_mut() {
                Some((rx, _)) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let event = tokio::select! {
            _ = tokio::time::sleep(d) => return Ok(()),
            _ = abandon.cancelled() => return Err(Flow::Abandon),
            r = relay.recv() => Ok(r),
            e = stream_rx => Err(e),
        };
        match event {
            Ok(Some(Relay::Input(i))) => self.answers.push_back(i),
            Ok(Some(Relay::Stop(reason))) => self.on_stop(reason).await?,
            Ok(Some(Relay::Ack(_))) => {}
            Ok(None) => return Err(Flow::Abandon),
            Err(Some(StreamEvent::Msg(m))) => self.on_stream(m).await,
            Err(Some(StreamEvent::Closed(e))) => {
                self.stream = None;
                if let Some(CallError::Rpc { code: -32602, .. }) = e {
                    self.outcome = Some(error("the remote server no longer knows the task (expired or lost)", None));
                }
            }
            Err(None) => self.stream = None,
        }
        Ok(())
    }

    /// 2025-11-25: a message on the `tasks/result` stream.
    async fn on_stream(&mut self, m: Incoming) {
        let session = self.task.as_ref().and_then(|t| t.session.clone());
        match m {
            Incoming::Request { id, method, params } => {
                if method == "ping" {
                    let _ = self.client.respond(&id, Ok(json!({})), session.as_deref()).await;
                    return;
                }
                let key = id.to_string();
                match form_elicitation(&method, &params) {
                    Some(_) if self.published.contains(&key) || self.delivered.contains(&key) => {}
                    Some((message, schema)) => self.to_publish.push(wpb::InputRequestSpec {
                        remote_key: key,
                        message,
                        requested_schema_json: schema.to_string(),
                    }),
                    None => {
                        let _ = self.client.refuse(&id, session.as_deref()).await;
                        self.outcome =
                            Some(Flow::Settle(Outcome::UnsupportedInteraction(describe_request(&method, &params))));
                    }
                }
            }
            Incoming::Notification { method, params } => {
                if method == "notifications/progress" {
                    // MCP progress: `progress` of `total` (optional), `message` (optional).
                    let current = params["progress"].as_f64().unwrap_or(0.0);
                    let total = params["total"].as_f64();
                    let message = params["message"].as_str().unwrap_or_default().to_owned();
                    let seen = format!("{current}/{total:?}/{message}");
                    if Some(&seen) != self.last_message.as_ref() {
                        self.last_message = Some(seen);
                        self.progress(current, total, message).await;
                    }
                }
            }
            Incoming::Response { outcome: Ok(r), .. } => {
                self.outcome = Some(Flow::Settle(Outcome::ResultJson(result_json(&r))));
            }
            Incoming::Response { outcome: Err(e), .. } => {
                let message = e["message"].as_str().unwrap_or("the remote task failed").to_owned();
                self.outcome = Some(if e["code"] == -32602 {
                    error("the remote server no longer knows the task (expired or lost)", Some(&e))
                } else {
                    error(message, Some(&e))
                });
            }
        }
    }

    /// 2025-11-25: keeps one `tasks/result` request open; it blocks until the
    /// task is terminal and carries the server's requests meanwhile.
    fn ensure_stream(&mut self) {
        if self.stream.is_some() {
            return;
        }
        let Some(task) = self.task.clone() else { return };
        let client = self.client.clone();
        let (tx, rx) = mpsc::channel(64);
        let reader = crate::supervise::spawn_supervised("remote tasks/result reader", async move {
            let opened = client.open("tasks/result", json!({"taskId": task.id}), task.session.as_deref(), None).await;
            let mut stream = match opened {
                Ok((_, s)) => s,
                Err(e) => {
                    let _ = tx.send(StreamEvent::Closed(Some(e))).await;
                    return;
                }
            };
            loop {
                match stream.next().await {
                    Ok(Some(m)) => {
                        if tx.send(StreamEvent::Msg(m)).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let _ = tx.send(StreamEvent::Closed(Some(e))).await;
                        return;
                    }
                }
            }
            let _ = tx.send(StreamEvent::Closed(None)).await;
        });
        self.stream = Some((rx, reader));
    }
}
