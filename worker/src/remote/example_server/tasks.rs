//! The example server's task store: tasks run their tool in the background,
//! may park in `input_required` on one or more form elicitations (answered by
//! key), and are viewed in either dialect's shape.

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::{Notify, oneshot};

pub(super) const POLL_MS: u64 = 100;
pub(super) const DEFAULT_TTL_MS: i64 = 3_600_000;
const MAX_TTL_MS: i64 = 24 * 3_600_000;

/// What a tool run produced: a `CallToolResult`, or a JSON-RPC error.
pub(super) type Outcome = Result<Value, Value>;

pub(super) struct Pending {
    pub method: String,
    pub params: Value,
    answer: Option<oneshot::Sender<Value>>,
}

pub(super) struct Task {
    pub id: String,
    pub status: &'static str,
    pub message: Option<String>,
    created: OffsetDateTime,
    updated: OffsetDateTime,
    pub ttl_ms: i64,
    /// In creation order (keys carry a counter).
    pub pending: BTreeMap<String, Pending>,
    pub outcome: Option<Outcome>,
    /// 2025-11-25: the session that created it (for `tasks/list`).
    pub session: Option<String>,
    abort: Option<tokio::task::AbortHandle>,
    asked: u32,
    pub changed: Arc<Notify>,
}

fn stamp(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

pub(super) fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if getrandom::fill(&mut b).is_err() {
        let nanos = OffsetDateTime::from(baton_proto::clock::now()).unix_timestamp_nanos();
        b.iter_mut().enumerate().for_each(|(i, x)| *x = (nanos >> (i % 16 * 8)) as u8);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Task {
    pub(super) fn terminal(&self) -> bool {
        matches!(self.status, "completed" | "failed" | "cancelled")
    }

    /// The status a 2025-11-25 client sees: a tool error result is `failed` there.
    fn v1_status(&self) -> &'static str {
        match &self.outcome {
            Some(Ok(r)) if self.status == "completed" && r["isError"] == true => "failed",
            _ => self.status,
        }
    }

    /// 2025-11-25 `Task`.
    pub(super) fn v1_view(&self) -> Value {
        let mut v = json!({
            "taskId": self.id, "status": self.v1_status(), "createdAt": stamp(self.created),
            "lastUpdatedAt": stamp(self.updated), "ttl": self.ttl_ms, "pollInterval": POLL_MS,
        });
        if let Some(m) = &self.message {
            v["statusMessage"] = m.clone().into();
        }
        v
    }

    /// 2026-07-28 `CreateTaskResult` (`detailed` false) or `DetailedTask`.
    pub(super) fn v2_view(&self, detailed: bool) -> Value {
        let mut v = json!({
            "resultType": if detailed { "complete" } else { "task" },
            "taskId": self.id, "status": self.status, "createdAt": stamp(self.created),
            "lastUpdatedAt": stamp(self.updated), "ttlMs": self.ttl_ms, "pollIntervalMs": POLL_MS,
        });
        if let Some(m) = &self.message {
            v["statusMessage"] = m.clone().into();
        }
        if !detailed {
            return v;
        }
        match (self.status, &self.outcome) {
            ("input_required", _) => {
                let requests: serde_json::Map<String, Value> = self
                    .pending
                    .iter()
                    .map(|(k, p)| (k.clone(), json!({"method": p.method, "params": p.params})))
                    .collect();
                v["inputRequests"] = Value::Object(requests);
            }
            ("completed", Some(Ok(r))) => v["result"] = r.clone(),
            ("failed", Some(Err(e))) => v["error"] = e.clone(),
            _ => {}
        }
        v
    }
}

/// Every task of the server.
#[derive(Default)]
pub(super) struct Tasks {
    inner: Mutex<HashMap<String, Task>>,
}

impl Tasks {
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Task>) -> R) -> R {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let now = OffsetDateTime::from(baton_proto::clock::now());
        guard.retain(|_, t| !t.terminal() || (now - t.created).whole_milliseconds() < i128::from(t.ttl_ms));
        f(&mut guard)
    }

    /// Creates a task (visible to `tasks/get` before this returns) and starts
    /// `run` for it in the background.
    pub(super) fn create<F, Fut>(self: &Arc<Self>, ttl_ms: Option<i64>, session: Option<String>, run: F) -> String
    where
        F: FnOnce(Asker) -> Fut,
        Fut: std::future::Future<Output = Outcome> + Send + 'static,
    {
        let id = random_hex(16);
        let now = OffsetDateTime::from(baton_proto::clock::now());
        let task = Task {
            id: id.clone(),
            status: "working",
            message: None,
            created: now,
            updated: now,
            ttl_ms: ttl_ms.unwrap_or(DEFAULT_TTL_MS).clamp(1_000, MAX_TTL_MS),
            pending: BTreeMap::new(),
            outcome: None,
            session,
            abort: None,
            asked: 0,
            changed: Arc::new(Notify::new()),
        };
        self.with(|m| m.insert(id.clone(), task));
        let fut = run(Asker { tasks: self.clone(), task_id: id.clone() });
        let tasks = self.clone();
        let task_id = id.clone();
        let handle = crate::supervise::spawn_supervised("example server task", async move {
            let outcome = fut.await;
            tasks.update(&task_id, |t| {
                if !t.terminal() {
                    t.status = if outcome.is_ok() { "completed" } else { "failed" };
                    t.outcome = Some(outcome);
                    t.pending.clear();
                }
            });
        });
        self.update(&id, |t| t.abort = Some(handle.abort_handle()));
        id
    }

    /// Changes a task and wakes whoever waits on it.
    pub(super) fn update(&self, id: &str, f: impl FnOnce(&mut Task)) -> bool {
        self.with(|m| match m.get_mut(id) {
            Some(t) => {
                f(t);
                t.updated = OffsetDateTime::from(baton_proto::clock::now());
                t.changed.notify_waiters();
                true
            }
            None => false,
        })
    }

    /// Delivers an answer to a pending request; false when the key is not pending.
    pub(super) fn answer(&self, key: &str, response: Value) -> bool {
        let Some(task_id) = self.with(|m| m.values().find(|t| t.pending.contains_key(key)).map(|t| t.id.clone()))
        else {
            return false;
        };
        let mut answered = false;
        self.update(&task_id, |t| {
            if let Some(mut p) = t.pending.remove(key)
                && let Some(tx) = p.answer.take()
            {
                answered = tx.send(response).is_ok();
            }
            if t.pending.is_empty() && t.status == "input_required" {
                t.status = "working";
            }
        });
        answered
    }

    /// Cancels a running task; false when it is already terminal.
    pub(super) fn cancel(&self, id: &str) -> Option<bool> {
        self.with(|m| {
            let t = m.get_mut(id)?;
            if t.terminal() {
                return Some(false);
            }
            if let Some(a) = t.abort.take() {
                a.abort();
            }
            t.status = "cancelled";
            t.message = Some("The task was cancelled by request.".into());
            t.pending.clear();
            t.updated = OffsetDateTime::from(baton_proto::clock::now());
            t.changed.notify_waiters();
            Some(true)
        })
    }
}

/// What a running tool uses to talk to its task.
#[derive(Clone)]
pub struct Asker {
    tasks: Arc<Tasks>,
    pub task_id: String,
}

impl Asker {
    /// For a tool that runs without a task (it must not ask).
    pub fn detached() -> Asker {
        Asker { tasks: Arc::new(Tasks::default()), task_id: String::new() }
    }

    pub fn progress(&self, message: &str) {
        self.tasks.update(&self.task_id, |t| t.message = Some(message.to_owned()));
    }

    /// Asks the client for input with a form elicitation; the task is
    /// `input_required` while any question is open. Returns the client's
    /// `ElicitResult` (`{action, content?}`).
    pub async fn ask(&self, message: &str, schema: Value) -> Value {
        let (tx, rx) = oneshot::channel();
        self.tasks.update(&self.task_id, |t| {
            t.asked += 1;
            let key = format!("task-{}-{}", t.id, t.asked);
            let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
            t.pending.insert(key, Pending { method: "elicitation/create".into(), params, answer: Some(tx) });
            t.status = "input_required";
        });
        rx.await.unwrap_or_else(|_| json!({"action": "cancel"}))
    }
}
