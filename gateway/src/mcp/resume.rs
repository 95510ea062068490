//! Where a `tasks/result` stream can be resumed from: the SSE event id of
//! each point a client may reconnect after (`GET` with `Last-Event-ID`).
//! Gateways keep nothing, so the id itself says which stream it belongs to
//! (the task, the request id the stream answers) and what it already sent
//! (the input requests). It is not a credential: whoever resumes is
//! authenticated and authorized again, and an id naming another caller's
//! task finds nothing. The last message of a stream is followed by an id
//! marked done: a client that still reconnects after it (the TypeScript SDK
//! does after an error response) is told there is no stream (405), rather
//! than sent the error again, and again.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const PREFIX: &str = "rs1.";
/// A longer `Last-Event-ID` is refused unread.
pub(super) const MAX_EVENT_ID_BYTES: usize = 4096;
/// Input requests named in one id; a stream that sent more resends the rest.
const MAX_SENT: usize = 32;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResumePoint {
    /// The task (execution id).
    #[serde(rename = "t")]
    pub(crate) task_id: String,
    /// The JSON-RPC id of the `tasks/result` request the stream answers.
    #[serde(rename = "i")]
    pub(crate) request_id: Value,
    /// Request keys of the input requests already sent on the stream.
    #[serde(rename = "s", default)]
    pub(crate) sent: Vec<String>,
    /// The stream sent its last message: nothing more will come on it.
    #[serde(rename = "d", default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) done: bool,
}

impl ResumePoint {
    /// The SSE event id.
    pub(super) fn event_id(&self) -> String {
        let mut point = self.clone();
        point.sent.truncate(MAX_SENT);
        // A struct of strings and a JSON value always serializes.
        let json = serde_json::to_vec(&point).unwrap_or_default();
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json))
    }

    /// The point a `Last-Event-ID` names; None for anything this gateway did not mint.
    pub(super) fn parse(event_id: &str) -> Option<ResumePoint> {
        if event_id.len() > MAX_EVENT_ID_BYTES {
            return None;
        }
        let json = URL_SAFE_NO_PAD.decode(event_id.strip_prefix(PREFIX)?).ok()?;
        let point: ResumePoint = serde_json::from_slice(&json).ok()?;
        let id_ok = matches!(point.request_id, Value::String(_) | Value::Number(_));
        (id_ok && point.sent.len() <= MAX_SENT).then_some(point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_id_names_its_stream_and_what_it_sent() {
        let p = ResumePoint { task_id: "te_1".into(), request_id: json!(9), sent: vec!["ir_a".into()], done: false };
        let id = p.event_id();
        assert!(id.starts_with("rs1.") && !id.contains(['\n', '\r', ':']), "{id}");
        assert_eq!(ResumePoint::parse(&id), Some(p.clone()));
        let done = ResumePoint { done: true, ..p };
        assert_eq!(ResumePoint::parse(&done.event_id()).map(|p| p.done), Some(true));
    }

    #[test]
    fn anything_else_is_not_a_resume_point() {
        let bad = |json: Value| format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json.to_string()));
        for id in [
            String::new(),
            "42".into(),
            "rs1.***".into(),
            bad(json!({"t": "te_1", "i": null})),
            bad(json!({"t": "te_1", "i": 1, "x": 2})),
            bad(json!({"t": "te_1", "i": 1, "s": vec!["k"; MAX_SENT + 1]})),
            format!("{PREFIX}{}", "A".repeat(MAX_EVENT_ID_BYTES)),
        ] {
            assert_eq!(ResumePoint::parse(&id), None, "{id}");
        }
    }
}
