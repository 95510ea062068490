//! What the runtime and the remote drivers put on the wire for the SDK's types: a tool's
//! registration (with its MCP metadata) and a progress report.

use crate::sdk::{Progress, ToolSpec};
use baton_proto::worker::v1 as wpb;
use std::time::Duration;

/// At most one progress report per attempt per interval leaves the worker.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// Longest progress message sent; longer ones are cut.
const MAX_PROGRESS_MESSAGE: usize = 1_024;

pub(crate) fn progress_message(execution_id: &str, attempt: u32, p: Progress) -> wpb::Progress {
    let mut message = p.message;
    if let Some((at, _)) = message.char_indices().nth(MAX_PROGRESS_MESSAGE) {
        message.truncate(at);
    }
    let finite = |n: f64| if n.is_finite() { n.max(0.0) } else { 0.0 };
    wpb::Progress {
        execution_id: execution_id.to_owned(),
        attempt,
        message,
        current: finite(p.current),
        total: p.total.map_or(0.0, finite),
    }
}

/// The MCP metadata of a spec, as the registration carries it (JSON text, "" = none).
fn metadata(s: &ToolSpec) -> (String, String, String, String) {
    let json = |v: &Option<serde_json::Value>| v.as_ref().map_or(String::new(), serde_json::Value::to_string);
    let icons = if s.icons.is_empty() { String::new() } else { serde_json::Value::from(s.icons.clone()).to_string() };
    (s.title.clone().unwrap_or_default(), json(&s.annotations), json(&s.output_schema), icons)
}

pub(crate) fn registration_of(s: ToolSpec, remote: bool) -> wpb::ToolRegistration {
    let (title, annotations_json, output_schema_json, icons_json) = metadata(&s);
    wpb::ToolRegistration {
        input_schema_json: s.input_schema.to_string(),
        background: s.background.wire() as i32,
        max_attempts: if remote { 1 } else { s.max_attempts },
        max_ttl_ms: if remote { 0 } else { s.max_ttl.map_or(0, |d| d.as_millis() as i64) },
        name: s.name,
        toolkit_name: s.toolkit_name,
        toolkit_version: s.toolkit_version,
        description: s.description,
        task_time_input: s.task_time_input,
        remote,
        required_client_capabilities: s.required_client_capabilities,
        cancel_unsupported: s.cancel_unsupported,
        title,
        annotations_json,
        output_schema_json,
        icons_json,
    }
}
