//! Remote task shapes of both dialects, read into one form: what `tools/call`
//! returned, a task's state, and the correlation Baton records durably.

use super::client::Dialect;
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

/// One outstanding request of a 2026-07-28 task (`inputRequests`).
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequest {
    pub key: String,
    pub method: String,
    pub params: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TaskState {
    pub id: String,
    pub status: Status,
    pub message: Option<String>,
    pub poll: Option<Duration>,
    pub ttl_ms: Option<i64>,
    /// 2026-07-28 only: requests listed inline.
    pub input_requests: Vec<InputRequest>,
    /// 2026-07-28 only: the result of a completed task, inline.
    pub result: Option<Value>,
    /// 2026-07-28 only: the JSON-RPC error of a failed task, inline.
    pub error: Option<Value>,
}

impl TaskState {
    /// A task object (`tasks/get` result, or the task of a `CreateTaskResult`).
    pub fn parse(v: &Value, dialect: Dialect) -> Option<TaskState> {
        let id = v["taskId"].as_str()?.to_owned();
        let status = match v["status"].as_str()? {
            "working" => Status::Working,
            "input_required" => Status::InputRequired,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            _ => return None,
        };
        let (ttl_key, poll_key) = match dialect {
            Dialect::V2025 => ("ttl", "pollInterval"),
            Dialect::V2026 => ("ttlMs", "pollIntervalMs"),
        };
        let input_requests = v["inputRequests"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(key, r)| InputRequest {
                        key: key.clone(),
                        method: r["method"].as_str().unwrap_or_default().to_owned(),
                        params: r.get("params").cloned().unwrap_or(Value::Null),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(TaskState {
            id,
            status,
            message: v["statusMessage"].as_str().map(str::to_owned),
            poll: v[poll_key].as_u64().map(Duration::from_millis),
            ttl_ms: v[ttl_key].as_i64(),
            input_requests,
            result: v.get("result").filter(|r| r.is_object()).cloned(),
            error: v.get("error").filter(|e| e.is_object()).cloned(),
        })
    }
}

/// What a `tools/call` answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Called {
    /// A task was created.
    Task(TaskState),
    /// The tool's result, without a task.
    Result(Value),
    /// 2026-07-28: input needed before the call can proceed (no task yet).
    InputRequired(Value),
}

impl Called {
    pub fn parse(v: Value, dialect: Dialect) -> Called {
        match dialect {
            Dialect::V2025 => match v.get("task").and_then(|t| TaskState::parse(t, dialect)) {
                Some(t) => Called::Task(t),
                None => Called::Result(v),
            },
            Dialect::V2026 => match v["resultType"].as_str() {
                Some("task") => match TaskState::parse(&v, dialect) {
                    Some(t) => Called::Task(t),
                    None => Called::Result(v),
                },
                Some("input_required") => Called::InputRequired(v),
                _ => Called::Result(v),
            },
        }
    }
}

/// A tool result as Baton stores it: `content`, `structuredContent` and
/// `isError` as the server sent them, nothing of the envelope.
pub fn result_json(v: &Value) -> String {
    let mut out = json!({"content": v.get("content").filter(|c| c.is_array()).cloned().unwrap_or(json!([]))});
    if let Some(s) = v.get("structuredContent").filter(|s| !s.is_null()) {
        out["structuredContent"] = s.clone();
    }
    if v["isError"].as_bool() == Some(true) {
        out["isError"] = true.into();
    }
    out.to_string()
}

/// The correlation recorded with the coordinator: the remote task id and, for
/// 2025-11-25 servers that bind tasks to sessions, the session it lives in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRef {
    pub id: String,
    pub session: Option<String>,
}

impl TaskRef {
    pub fn encode(&self) -> String {
        match &self.session {
            None => self.id.clone(),
            Some(s) => json!({"task": self.id, "session": s}).to_string(),
        }
    }

    pub fn decode(s: &str) -> TaskRef {
        if s.starts_with('{')
            && let Ok(v) = serde_json::from_str::<Value>(s)
            && let Some(id) = v["task"].as_str()
        {
            return TaskRef { id: id.to_owned(), session: v["session"].as_str().map(str::to_owned) };
        }
        TaskRef { id: s.to_owned(), session: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_create_shapes() {
        let v1 = json!({"task": {"taskId": "a", "status": "working", "ttl": 60000, "pollInterval": 500}});
        let Called::Task(t) = Called::parse(v1, Dialect::V2025) else { panic!("v1 task") };
        assert_eq!((t.ttl_ms, t.poll), (Some(60000), Some(Duration::from_millis(500))));
        let v2 =
            json!({"resultType": "task", "taskId": "b", "status": "working", "ttlMs": null, "pollIntervalMs": 100});
        let Called::Task(t) = Called::parse(v2, Dialect::V2026) else { panic!("v2 task") };
        assert_eq!((t.id.as_str(), t.ttl_ms), ("b", None));
        let plain = json!({"resultType": "complete", "content": [], "isError": true});
        assert!(matches!(Called::parse(plain, Dialect::V2026), Called::Result(_)));
    }

    #[test]
    fn input_requests_inline() {
        let v = json!({"taskId": "t", "status": "input_required", "inputRequests": {
            "k1": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {}}}}});
        let t = TaskState::parse(&v, Dialect::V2026).expect("parses");
        assert_eq!(t.input_requests[0].key, "k1");
        assert_eq!(t.status, Status::InputRequired);
    }

    #[test]
    fn results_keep_is_error_and_drop_the_envelope() {
        let v = json!({"resultType": "complete", "content": [{"type": "text", "text": "x"}], "isError": true,
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}});
        let r: Value = serde_json::from_str(&result_json(&v)).expect("json");
        assert_eq!(r, json!({"content": [{"type": "text", "text": "x"}], "isError": true}));
    }

    #[test]
    fn task_refs_round_trip() {
        for r in [TaskRef { id: "t1".into(), session: None }, TaskRef { id: "t2".into(), session: Some("s".into()) }] {
            assert_eq!(TaskRef::decode(&r.encode()), r);
        }
    }
}
