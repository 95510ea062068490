//! A minimal stateless MCP client for protocol 2026-07-28: one JSON-RPC request
//! per POST with the per-request `_meta` envelope and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers, optionally declaring the
//! `io.modelcontextprotocol/tasks` extension. Reads a JSON answer or the last
//! message of an SSE answer. No sessions, no retries.

use super::Target;
use super::stats::Failure;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub(super) const VERSION: &str = "2026-07-28";
pub(super) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn envelope(tasks: bool) -> Value {
    let capabilities = if tasks { json!({"extensions": {TASKS_EXTENSION: {}}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "baton-bench", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// Sends `method` with `params` (the `_meta` envelope is added) and returns
/// the JSON-RPC result. `name` is what `Mcp-Name` must mirror.
pub(super) async fn request(
    t: &Target,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    tasks: bool,
    timeout: Duration,
) -> Result<Value, Failure> {
    if let Some(obj) = params.as_object_mut() {
        obj.insert("_meta".into(), envelope(tasks));
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut req = t
        .http
        .post(&t.mcp_url)
        .bearer_auth(&t.token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", VERSION)
        .header("Mcp-Method", method)
        .timeout(timeout)
        .json(&body);
    if let Some(n) = name {
        req = req.header("Mcp-Name", n);
    }
    let resp = req.send().await.map_err(|e| Failure::transport(&e))?;
    let status = resp.status().as_u16();
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let bytes = resp.bytes().await.map_err(|e| Failure::transport(&e))?;
    let message = if sse { last_sse_message(&bytes) } else { serde_json::from_slice(&bytes).ok() };
    let Some(message) = message else {
        return Err(if status == 200 {
            Failure::Shape("not a JSON-RPC message")
        } else {
            Failure::Http { status, code: None }
        });
    };
    if let Some(code) = message.pointer("/error/code").and_then(Value::as_i64) {
        return Err(Failure::Rpc { status, code });
    }
    if status != 200 {
        return Err(Failure::Http { status, code: None });
    }
    message.get("result").cloned().ok_or(Failure::Shape("JSON-RPC answer without result"))
}

/// The last `data:` message of an SSE body that carries a result or an error.
fn last_sse_message(bytes: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
}

/// `tools/call` of `Demo.Echo` with `text`.
pub(super) async fn call_echo(t: &Target, text: &str, tasks: bool) -> Result<Value, Failure> {
    let params = json!({"name": "Demo.Echo", "arguments": {"text": text}});
    request(t, "tools/call", Some("Demo.Echo"), params, tasks, Duration::from_secs(60)).await
}

/// `tasks/get` of `task_id`.
pub(super) async fn get_task(t: &Target, task_id: &str) -> Result<Value, Failure> {
    let params = json!({"taskId": task_id});
    request(t, "tasks/get", Some(task_id), params, true, Duration::from_secs(30)).await
}

/// Checks that a `CallToolResult` is Demo.Echo's answer to `text`.
pub(super) fn check_echo(result: &Value, text: &str) -> Result<(), Failure> {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(Failure::Shape("tool result with isError"));
    }
    let echoed = result.pointer("/content/0/text").and_then(Value::as_str);
    if echoed != Some(text) {
        return Err(Failure::Shape("tool result is not the echo (handed over?)"));
    }
    Ok(())
}

/// The protocol version of the legacy (session) dialect, whose `tasks/result`
/// is a blocking SSE stream.
pub(super) const LEGACY_VERSION: &str = "2025-11-25";

fn legacy_post(t: &Target, session: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
    let req = t
        .http
        .post(&t.mcp_url)
        .bearer_auth(&t.token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", LEGACY_VERSION)
        .json(body);
    match session {
        Some(s) => req.header("Mcp-Session-Id", s),
        None => req,
    }
}

/// Opens a legacy session (initialize, then `notifications/initialized`); its id.
pub(super) async fn legacy_session(t: &Target) -> Result<String, Failure> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {},
        "clientInfo": {"name": "baton-bench", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = legacy_post(t, None, &init).send().await.map_err(|e| Failure::transport(&e))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(Failure::Http { status, code: None });
    }
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or(Failure::Shape("initialize answered without a session"))?;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = legacy_post(t, Some(&session), &note).send().await.map_err(|e| Failure::transport(&e))?;
    match resp.status().as_u16() {
        202 => Ok(session),
        status => Err(Failure::Http { status, code: None }),
    }
}

/// A `tasks/result` answer.
pub(super) struct Legacy {
    pub answer: Value,
    /// When it arrived (this machine's clock, ms).
    pub received_ms: i64,
    /// Whether it came on a stream (the request parked) rather than at once.
    pub streamed: bool,
}

/// Opens a blocking `tasks/result` for `task_id` on `session`, calls `parked`
/// if the answer is a stream (it parked), and reads it until the answer (a
/// result or an error) arrives.
pub(super) async fn legacy_result(
    t: &Target,
    session: &str,
    task_id: &str,
    timeout: Duration,
    parked: impl FnOnce(),
) -> Result<Legacy, Failure> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tasks/result", "params": {"taskId": task_id}});
    let mut resp =
        legacy_post(t, Some(session), &body).timeout(timeout).send().await.map_err(|e| Failure::transport(&e))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(Failure::Http { status, code: None });
    }
    // An SSE answer is a parked stream; a JSON one answered at once.
    let streamed = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if streamed {
        parked();
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| Failure::transport(&e))? {
        body.extend_from_slice(&chunk);
        if let Some(answer) = last_sse_message(&body).or_else(|| serde_json::from_slice(&body).ok()) {
            return Ok(Legacy { answer, received_ms: baton_proto::clock::now_ms(), streamed });
        }
    }
    Err(Failure::Shape("tasks/result ended without an answer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_result_of_an_sse_body_wins() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
                     : keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1}}\n\n";
        assert_eq!(last_sse_message(body), Some(json!({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}})));
        assert_eq!(last_sse_message(b": only a comment\n\n"), None);
    }

    #[test]
    fn echo_results_are_checked_against_the_text() {
        let ok = json!({"content": [{"type": "text", "text": "hi"}], "isError": false});
        assert_eq!(check_echo(&ok, "hi"), Ok(()));
        assert!(check_echo(&ok, "other").is_err());
        assert!(check_echo(&json!({"content": [], "isError": true}), "hi").is_err());
    }

    #[test]
    fn the_envelope_declares_the_extension_only_when_asked() {
        assert!(envelope(true).pointer("/io.modelcontextprotocol~1clientCapabilities/extensions").is_some());
        assert!(envelope(false).pointer("/io.modelcontextprotocol~1clientCapabilities/extensions").is_none());
    }
}
