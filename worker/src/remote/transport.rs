//! Streamable HTTP, client side: one JSON-RPC message per POST, answered with
//! either one JSON body or an SSE stream that may carry server→client requests
//! and notifications before the response. Errors say whether the request
//! provably never reached the server (safe to send again) or may have.

use serde_json::{Value, json};
use std::collections::VecDeque;

/// Why a request did not produce a JSON-RPC result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The request never reached the server (connection refused, no route):
    /// sending it again cannot duplicate anything.
    #[error("remote server unreachable: {0}")]
    Unreached(String),
    /// It may have reached the server, but no usable answer came back
    /// (connection reset, timeout, HTTP 5xx, a stream that ended early).
    #[error("remote server did not answer: {0}")]
    Transport(String),
    /// The server does not know the session (HTTP 404 on a session request).
    #[error("remote session expired")]
    SessionLost,
    /// A JSON-RPC error answer.
    #[error("remote error {code}: {message}")]
    Rpc { code: i64, message: String, data: Option<Value> },
    /// An answer that is not the MCP we speak.
    #[error("remote protocol error: {0}")]
    Protocol(String),
    /// The server asked this client for something Baton does not support.
    #[error("the remote server requested an unsupported interaction: {0}")]
    Unsupported(String),
    /// This worker's TLS setup for the server is unusable (its `ca_file`).
    #[error("remote server tls: {0}")]
    Tls(String),
}

/// The rustls error somewhere in `e`'s sources, if a TLS handshake failed.
/// It sits inside nested `io::Error`s, whose `source` skips the wrapped error.
fn tls_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        next = match err.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

impl CallError {
    /// Worth trying again for a request that is safe to repeat.
    pub fn is_transient(&self) -> bool {
        matches!(self, CallError::Unreached(_) | CallError::Transport(_) | CallError::SessionLost)
    }

    pub fn from_reqwest(e: &reqwest::Error) -> Self {
        // Without the source chain: it may name a URL with credentials.
        let what = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "connection failed"
        } else if e.is_body() || e.is_decode() {
            "broken response body"
        } else {
            "request failed"
        };
        // A failed TLS handshake says why (an unknown issuer, a wrong name):
        // rustls' message names no URL.
        let what = match tls_cause(e) {
            Some(tls) => format!("{what}: tls: {tls}"),
            None => what.to_owned(),
        };
        if e.is_connect() { CallError::Unreached(what) } else { CallError::Transport(what) }
    }

    pub fn rpc(error: &Value) -> Self {
        CallError::Rpc {
            code: error["code"].as_i64().unwrap_or(-32603),
            message: error["message"].as_str().unwrap_or_default().chars().take(500).collect(),
            data: error.get("data").cloned(),
        }
    }
}

/// A message the server sent, by JSON-RPC shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A server→client request: must be answered (POST a response).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The answer to a client request: `result` or `error`.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
}

impl Incoming {
    pub fn classify(msg: Value) -> Option<Incoming> {
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = msg.get("id").filter(|v| !v.is_null()).cloned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            (Some(method), Some(id)) => Some(Incoming::Request { id, method, params }),
            (Some(method), None) => Some(Incoming::Notification { method, params }),
            (None, id) => {
                let id = id.unwrap_or(Value::Null);
                if let Some(error) = msg.get("error") {
                    Some(Incoming::Response { id, outcome: Err(error.clone()) })
                } else {
                    msg.get("result").map(|r| Incoming::Response { id, outcome: Ok(r.clone()) })
                }
            }
        }
    }
}

pub fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Incremental SSE parser: feed bytes, take the `data` of complete events.
#[derive(Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<String>,
}

impl SseParser {
    pub fn feed(&mut self, bytes: &[u8], out: &mut VecDeque<String>) {
        for &b in bytes {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.line_done(&String::from_utf8_lossy(&line), out);
            } else {
                self.line.push(b);
            }
        }
    }

    fn line_done(&mut self, line: &str, out: &mut VecDeque<String>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                out.push_back(std::mem::take(&mut self.data).join("\n"));
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            self.data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
        }
    }
}

/// The messages of one HTTP response, JSON or SSE, in order.
pub struct Stream {
    body: Body,
    queue: VecDeque<String>,
}

enum Body {
    Json(Option<reqwest::Response>),
    Sse(reqwest::Response, SseParser),
    Done,
}

impl Stream {
    /// Takes a response whose status was a success.
    pub fn new(resp: reqwest::Response) -> Result<Stream, CallError> {
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let body = if resp.status() == reqwest::StatusCode::ACCEPTED || resp.content_length() == Some(0) {
            Body::Done
        } else if content_type.starts_with("text/event-stream") {
            Body::Sse(resp, SseParser::default())
        } else if content_type.starts_with("application/json") {
            Body::Json(Some(resp))
        } else {
            return Err(CallError::Protocol(format!("unexpected content type {content_type:?}")));
        };
        Ok(Stream { body, queue: VecDeque::new() })
    }

    /// The next message, or `None` when the response is over.
    pub async fn next(&mut self) -> Result<Option<Incoming>, CallError> {
        loop {
            if let Some(data) = self.queue.pop_front() {
                if data.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(&data)
                    .map_err(|_| CallError::Protocol("an SSE event that is not JSON".into()))?;
                match Incoming::classify(v) {
                    Some(m) => return Ok(Some(m)),
                    None => continue,
                }
            }
            match &mut self.body {
                Body::Json(resp) => {
                    let Some(resp) = resp.take() else {
                        self.body = Body::Done;
                        continue;
                    };
                    let bytes = resp.bytes().await.map_err(|e| CallError::from_reqwest(&e))?;
                    self.body = Body::Done;
                    let v: Value = serde_json::from_slice(&bytes)
                        .map_err(|_| CallError::Protocol("a response body that is not JSON".into()))?;
                    return Ok(Incoming::classify(v));
                }
                Body::Sse(resp, parser) => match resp.chunk().await {
                    Ok(Some(chunk)) => parser.feed(&chunk, &mut self.queue),
                    Ok(None) => {
                        parser.feed(b"\n\n", &mut self.queue);
                        self.body = Body::Done;
                    }
                    Err(e) => return Err(CallError::from_reqwest(&e)),
                },
                Body::Done => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks() {
        let mut p = SseParser::default();
        let mut out = VecDeque::new();
        p.feed(b"id: 1\r\ndata:\r\n\r\nevent: message\ndata: {\"a\":", &mut out);
        assert_eq!(out.len(), 1, "only the priming event is complete");
        p.feed(b"1}\n\n: keep-alive\n\ndata: x\ndata: y\n\n", &mut out);
        assert_eq!(out, VecDeque::from(vec!["".to_owned(), "{\"a\":1}".to_owned(), "x\ny".to_owned()]));
    }

    #[test]
    fn classifies_messages() {
        let r =
            Incoming::classify(json!({"jsonrpc": "2.0", "id": "t-1", "method": "elicitation/create", "params": {}}));
        assert!(matches!(r, Some(Incoming::Request { method, .. }) if method == "elicitation/create"));
        let r = Incoming::classify(json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "x"}}));
        assert!(matches!(r, Some(Incoming::Response { outcome: Err(_), .. })));
        let r = Incoming::classify(json!({"jsonrpc": "2.0", "method": "notifications/progress"}));
        assert!(matches!(r, Some(Incoming::Notification { .. })));
    }
}
