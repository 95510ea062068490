//! Router-level tests of the MCP surface: the real axum router, driven with
//! `oneshot`, against the in-process fake coordinator of `fake`. Helpers here
//! build well-formed requests of each era; tests alter one thing at a time.

mod compat;
mod composition;
mod fake;
mod legacy;
mod modern;
mod shedding;
mod transport;

use crate::Options;
use axum::Router;
use axum::body::Body;
use fake::Fake;
use futures_util::StreamExt;
use http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub(crate) const URL: &str = "/mcp/gw1";
pub(crate) const EXT: &str = "io.modelcontextprotocol/tasks";

pub(crate) struct Harness {
    pub(crate) fake: Fake,
    pub(crate) app: Router,
    /// This gateway's graceful shutdown signal.
    pub(crate) shutdown: CancellationToken,
    options: Options,
    /// The fake's gRPC server, owned by the harness that started it.
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            server.abort();
        }
    }
}

pub(crate) async fn harness() -> Harness {
    harness_with(|_| {}).await
}

pub(crate) async fn harness_with(configure: impl FnOnce(&mut Options)) -> Harness {
    let fake = Fake::new();
    let (addr, server) = fake.serve().await;
    let mut options = Options {
        listen: "127.0.0.1:0".parse().expect("addr"),
        coordinator_url: format!("http://{addr}"),
        max_body_bytes: 1 << 20,
        foreground_budget: Duration::ZERO,
        native_mcp_tasks: true,
        mcp_tasks_compatibility: true,
        compat_prefix: "Baton".into(),
        session_key: [42u8; 32],
        allowed_hosts: vec![],
        anonymous_mcp_token: None,
        coordinator_tls: None,
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        drain_timeout: Duration::from_secs(10),
        max_waits_per_principal: 100,
        max_waits: 10_000,
        wait_limits: crate::waits::Limits::default(),
        dashboard_api_key_sign_in: true,
        dashboard_oidc: false,
    };
    configure(&mut options);
    let shutdown = CancellationToken::new();
    let app = crate::router(crate::state(options.clone(), shutdown.clone()).expect("gateway state"));
    Harness { fake, app, shutdown, options, server: Some(server) }
}

/// A response as a client sees it: status, headers and the JSON-RPC
/// messages of the body (one for JSON, every `data:` line for SSE).
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) messages: Vec<Value>,
}

impl Answer {
    /// The last message: the response to the request.
    pub(crate) fn body(&self) -> &Value {
        self.messages.last().unwrap_or(&Value::Null)
    }

    pub(crate) fn result(&self) -> &Value {
        &self.body()["result"]
    }

    pub(crate) fn error_code(&self) -> i64 {
        self.body()["error"]["code"].as_i64().unwrap_or(0)
    }
}

fn parse_body(headers: &HeaderMap, bytes: &[u8]) -> Vec<Value> {
    let sse =
        headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"));
    if sse {
        let text = String::from_utf8_lossy(bytes);
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_slice(bytes).map(|v| vec![v]).unwrap_or_default()
    }
}

impl Harness {
    /// Another gateway replica with the same options and coordinator.
    pub(crate) fn replica(&self) -> Harness {
        let shutdown = CancellationToken::new();
        let app = crate::router(crate::state(self.options.clone(), shutdown.clone()).expect("gateway state"));
        Harness { fake: self.fake.clone(), app, shutdown, options: self.options.clone(), server: None }
    }

    pub(crate) async fn send(&self, request: Request<Body>) -> Answer {
        let response = self.app.clone().oneshot(request).await.expect("router answers");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        let messages = parse_body(&headers, &bytes);
        Answer { status, headers, messages }
    }

    /// Sends without reading the body, for streams a test drives step by step.
    pub(crate) async fn open(&self, request: Request<Body>) -> (StatusCode, HeaderMap, Body) {
        let response = self.app.clone().oneshot(request).await.expect("router answers");
        (response.status(), response.headers().clone(), response.into_body())
    }

    pub(crate) async fn modern(&self, token: &str, method: &str, params: Value, ext: bool) -> Answer {
        self.send(modern_request(token, method, params, ext)).await
    }

    /// `initialize` then `notifications/initialized`; returns the session id.
    pub(crate) async fn initialize(&self, token: &str, version: &str, capabilities: Value) -> (Answer, String) {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "test", "version": "0"}}});
        let answer = self.send(post(token).body(Body::from(body.to_string())).expect("request")).await;
        let session =
            answer.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned).unwrap_or_default();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack =
            self.send(legacy_post(token, &session, version).body(Body::from(note.to_string())).expect("note")).await;
        assert_eq!(ack.status, StatusCode::ACCEPTED);
        (answer, session)
    }

    pub(crate) async fn legacy(&self, token: &str, session: &str, method: &str, params: Value) -> Answer {
        self.send(legacy_request(token, session, method, params)).await
    }
}

/// A POST with the transport headers every era needs.
pub(crate) fn post(token: &str) -> http::request::Builder {
    let builder = Request::post(URL)
        .header("host", "127.0.0.1:8080")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if token.is_empty() { builder } else { builder.header("authorization", format!("Bearer {token}")) }
}

pub(crate) fn legacy_post(token: &str, session: &str, version: &str) -> http::request::Builder {
    post(token).header("mcp-session-id", session).header("mcp-protocol-version", version)
}

pub(crate) fn legacy_request(token: &str, session: &str, method: &str, params: Value) -> Request<Body> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    legacy_post(token, session, "2025-11-25").body(Body::from(body.to_string())).expect("request")
}

/// The `_meta` envelope of a 2026-07-28 request.
pub(crate) fn meta(ext: bool) -> Value {
    let mut caps = json!({"elicitation": {}});
    if ext {
        caps["extensions"] = json!({EXT: {}});
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

/// A conformant 2026-07-28 request: `_meta`, version, method and name headers.
pub(crate) fn modern_builder(token: &str, method: &str, params: &Value) -> http::request::Builder {
    let mut builder = post(token).header("mcp-protocol-version", "2026-07-28").header("mcp-method", method);
    let name = match method {
        "tools/call" => params.get("name"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => params.get("taskId"),
        _ => None,
    };
    if let Some(name) = name.and_then(Value::as_str) {
        builder = builder.header("mcp-name", name);
    }
    builder
}

pub(crate) fn modern_body(method: &str, mut params: Value, ext: bool) -> Body {
    if params.get("_meta").is_none() {
        params["_meta"] = meta(ext);
    }
    Body::from(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
}

pub(crate) fn modern_request(token: &str, method: &str, params: Value, ext: bool) -> Request<Body> {
    modern_builder(token, method, &params).body(modern_body(method, params, ext)).expect("request")
}

/// Reads SSE messages from a streaming body until `stop` accepts one.
pub(crate) async fn read_until(
    body: &mut futures_util::stream::BoxStream<'static, Value>,
    stop: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let message = body.next().await.expect("stream ended before the expected message");
        if stop(&message) {
            return message;
        }
    }
}

/// The JSON-RPC messages of an SSE body, as they arrive.
pub(crate) fn sse_messages(body: Body) -> futures_util::stream::BoxStream<'static, Value> {
    let chunks = body.into_data_stream();
    futures_util::stream::unfold(
        (chunks, String::new(), Vec::<Value>::new()),
        |(mut chunks, mut buf, mut ready)| async move {
            loop {
                if !ready.is_empty() {
                    let next = ready.remove(0);
                    return Some((next, (chunks, buf, ready)));
                }
                let chunk = chunks.next().await?.ok()?;
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let event: String = buf.drain(..end + 2).collect();
                    for line in event.lines() {
                        if let Some(data) = line.strip_prefix("data:")
                            && let Ok(v) = serde_json::from_str(data.trim())
                        {
                            ready.push(v);
                        }
                    }
                }
            }
        },
    )
    .boxed()
}
