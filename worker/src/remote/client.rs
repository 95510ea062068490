//! An MCP client over Streamable HTTP for one remote server, speaking the
//! dialect the server speaks: 2026-07-28 (stateless, per-request `_meta`,
//! `Mcp-Method`/`Mcp-Name` headers, the tasks extension) when `server/discover`
//! answers, else 2025-11-25 (`initialize`, a session, the core tasks utility).

use super::config::{Protocol, RemoteServer};
use super::transport::{CallError, Incoming, Stream, request};
use base64::Engine as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

pub const V2025: &str = "2025-11-25";
pub const V2026: &str = "2026-07-28";
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
const SESSION_HEADER: &str = "mcp-session-id";
/// Bounds every request that is not expected to block (discovery, polls, acks).
const SHORT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// 2025-11-25: tasks are created with `params.task`, input arrives as
    /// server→client requests on `tasks/result`.
    V2025,
    /// 2026-07-28 with the tasks extension: flat tasks, `inputRequests` on
    /// `tasks/get`, answers through `tasks/update`.
    V2026,
}

/// A tool as the remote server lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// `execution.taskSupport` where the server states it.
    pub task_support: Option<String>,
    /// MCP metadata the server declared, carried to Baton's own `tools/list`.
    pub title: Option<String>,
    pub annotations: Option<Value>,
    pub output_schema: Option<Value>,
    pub icons: Vec<Value>,
}

pub struct Client {
    http: reqwest::Client,
    server: RemoteServer,
    pub dialect: Dialect,
    /// The server creates tasks for `tools/call`.
    pub tasks: bool,
    pub server_name: String,
    pub server_version: String,
    /// 2025-11-25: the negotiated version and the current session.
    version: String,
    session: std::sync::Mutex<Option<String>>,
    reinit: tokio::sync::Mutex<()>,
    next_id: AtomicI64,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("url", &self.server.display_url()).field("dialect", &self.dialect).finish()
    }
}

/// Encodes a routing header value as 2026-07-28 asks: plain when it is
/// visible ASCII without edge whitespace, else `=?base64?…?=`.
pub fn header_value(v: &str) -> String {
    let plain = v.bytes().all(|b| (0x20..0x7f).contains(&b)) && v.trim() == v;
    if plain { v.to_owned() } else { format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(v)) }
}

impl Client {
    /// Finds out which dialect the server speaks and opens a session if it
    /// needs one.
    pub async fn connect(server: RemoteServer) -> Result<Client, CallError> {
        crate::dial::install_crypto_provider();
        let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
        if server.ca_file.is_some() {
            builder = builder.tls_certs_only(server.root_certificates().map_err(CallError::Tls)?);
        }
        let http = builder.build().map_err(|e| CallError::from_reqwest(&e))?;
        let mut client = Client {
            http,
            server,
            dialect: Dialect::V2026,
            tasks: false,
            server_name: String::new(),
            server_version: String::new(),
            version: V2026.to_owned(),
            session: std::sync::Mutex::new(None),
            reinit: tokio::sync::Mutex::new(()),
            next_id: AtomicI64::new(1),
        };
        if client.server.protocol != Protocol::V2025 {
            match client.call("server/discover", json!({}), None, Some(SHORT)).await {
                Ok(found) => {
                    let versions = found["supportedVersions"].as_array().cloned().unwrap_or_default();
                    if versions.iter().any(|v| v == V2026) {
                        client.tasks = found["capabilities"]["extensions"].get(TASKS_EXTENSION).is_some();
                        let info = &found["_meta"]["io.modelcontextprotocol/serverInfo"];
                        client.server_name = info["name"].as_str().unwrap_or_default().to_owned();
                        client.server_version = info["version"].as_str().unwrap_or_default().to_owned();
                        return Ok(client);
                    }
                }
                Err(e) if client.server.protocol == Protocol::V2026 || matches!(e, CallError::Unreached(_)) => {
                    return Err(e);
                }
                Err(_) => {}
            }
        }
        client.dialect = Dialect::V2025;
        client.version = V2025.to_owned();
        let init = client.initialize().await?;
        client.tasks = init["capabilities"]["tasks"]["requests"]["tools"].get("call").is_some();
        client.server_name = init["serverInfo"]["name"].as_str().unwrap_or_default().to_owned();
        client.server_version = init["serverInfo"]["version"].as_str().unwrap_or_default().to_owned();
        if let Some(v) = init["protocolVersion"].as_str() {
            client.version = v.to_owned();
        }
        Ok(client)
    }

    /// 2025-11-25: `initialize` and `notifications/initialized`; keeps the session.
    async fn initialize(&self) -> Result<Value, CallError> {
        let params = json!({
            "protocolVersion": V2025,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "baton-worker", "version": env!("CARGO_PKG_VERSION")},
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let resp = self.post(&request(id, "initialize", params), None, Some(SHORT), None).await?;
        let session = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let mut stream = Stream::new(resp)?;
        let result = loop {
            match stream.next().await? {
                Some(Incoming::Response { outcome: Ok(r), .. }) => break r,
                Some(Incoming::Response { outcome: Err(e), .. }) => return Err(CallError::rpc(&e)),
                Some(_) => continue,
                None => return Err(CallError::Transport("initialize got no answer".into())),
            }
        };
        self.set_session(session.clone());
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(&note, session.as_deref(), Some(SHORT), None).await?;
        Ok(result)
    }

    /// The session new requests use (2025-11-25).
    pub fn session(&self) -> Option<String> {
        self.session.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_session(&self, s: Option<String>) {
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }

    /// Opens a new session unless another caller already replaced `stale`.
    pub async fn reinitialize(&self, stale: Option<&str>) -> Result<(), CallError> {
        let _one = self.reinit.lock().await;
        if self.session().as_deref() != stale {
            return Ok(());
        }
        tracing::info!(server = %self.server.display_url(), "remote session lost; opening a new one");
        self.initialize().await.map(|_| ())
    }

    fn headers(&self, method: Option<&str>, name: Option<&str>, session: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(reqwest::header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        if let Some(token) = &self.server.bearer_token
            && let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        {
            h.insert(reqwest::header::AUTHORIZATION, v);
        }
        for (k, v) in &self.server.headers {
            if let (Ok(k), Ok(v)) = (HeaderName::from_bytes(k.as_bytes()), HeaderValue::from_str(v.expose())) {
                h.insert(k, v);
            }
        }
        if method != Some("initialize")
            && let Ok(v) = HeaderValue::from_str(&self.version)
        {
            h.insert("mcp-protocol-version", v);
        }
        if let Some(s) = session
            && let Ok(v) = HeaderValue::from_str(s)
        {
            h.insert(SESSION_HEADER, v);
        }
        // The execution's trace continues into the remote server.
        baton_proto::trace::inject_headers(&mut h);
        if self.dialect == Dialect::V2026 {
            for (k, v) in [("mcp-method", method), ("mcp-name", name)] {
                if let Some(v) = v
                    && let Ok(v) = HeaderValue::from_str(&header_value(v))
                {
                    h.insert(k, v);
                }
            }
        }
        h
    }

    /// POSTs one message; a non-success status becomes an error.
    async fn post(
        &self,
        body: &Value,
        session: Option<&str>,
        timeout: Option<Duration>,
        name: Option<&str>,
    ) -> Result<reqwest::Response, CallError> {
        let method = body["method"].as_str();
        let mut req = self.http.post(&self.server.url).headers(self.headers(method, name, session)).json(body);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let resp = req.send().await.map_err(|e| CallError::from_reqwest(&e))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let bytes = resp.bytes().await.unwrap_or_default();
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes)
            && let Some(error) = v.get("error").filter(|e| e.is_object())
        {
            if status == reqwest::StatusCode::NOT_FOUND && session.is_some() {
                return Err(CallError::SessionLost);
            }
            return Err(CallError::rpc(error));
        }
        Err(match status.as_u16() {
            404 if session.is_some() => CallError::SessionLost,
            500..=599 => CallError::Transport(format!("HTTP {status}")),
            _ => CallError::Protocol(format!("HTTP {status}")),
        })
    }

    /// The params of a request in this dialect: 2026-07-28 carries the
    /// protocol version and client capabilities in every request.
    pub fn envelope(&self, mut params: Value) -> Value {
        if self.dialect == Dialect::V2026 {
            if !params.is_object() {
                params = json!({});
            }
            let meta = params.as_object_mut().map(|p| p.entry("_meta").or_insert_with(|| json!({})));
            if let Some(meta) = meta.and_then(Value::as_object_mut) {
                meta.insert("io.modelcontextprotocol/protocolVersion".into(), V2026.into());
                meta.insert(
                    "io.modelcontextprotocol/clientInfo".into(),
                    json!({"name": "baton-worker", "version": env!("CARGO_PKG_VERSION")}),
                );
                meta.insert(
                    "io.modelcontextprotocol/clientCapabilities".into(),
                    json!({"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}),
                );
            }
        }
        params
    }

    /// Sends a request and returns its response stream. `session` overrides the
    /// client's own (a task lives in the session that created it).
    pub async fn open(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<(i64, Stream), CallError> {
        let name = match method {
            "tools/call" | "prompts/get" => params["name"].as_str().map(str::to_owned),
            "resources/read" => params["uri"].as_str().map(str::to_owned),
            m if m.starts_with("tasks/") => params["taskId"].as_str().map(str::to_owned),
            _ => None,
        };
        let mut params = self.envelope(params);
        // MCP carries trace context in `_meta` too, for servers behind proxies
        // that drop unknown headers.
        let traceparent = baton_proto::trace::current_traceparent();
        if !traceparent.is_empty()
            && let Some(p) = params.as_object_mut()
            && let Some(meta) = p.entry("_meta").or_insert_with(|| json!({})).as_object_mut()
        {
            meta.insert("traceparent".into(), traceparent.into());
        }
        let own = self.session();
        let session = session.map(str::to_owned).or(own);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = request(id, method, params);
        let resp = self.post(&body, session.as_deref(), timeout, name.as_deref()).await?;
        Ok((id, Stream::new(resp)?))
    }

    /// A request and its result. Server→client `ping`s are answered; any other
    /// server request is refused and reported as an unsupported interaction.
    /// A lost session of this client is replaced once.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let first = self.call_once(method, params.clone(), session, timeout).await;
        match first {
            Err(CallError::SessionLost) if self.dialect == Dialect::V2025 && method != "initialize" => {
                let own = self.session();
                if session.is_some() && session != own.as_deref() {
                    return Err(CallError::SessionLost);
                }
                self.reinitialize(own.as_deref()).await?;
                self.call_once(method, params, None, timeout).await
            }
            other => other,
        }
    }

    async fn call_once(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let (id, mut stream) = self.open(method, params, session, timeout).await?;
        loop {
            match stream.next().await? {
                Some(Incoming::Response { id: rid, outcome }) if rid == json!(id) => {
                    return outcome.map_err(|e| CallError::rpc(&e));
                }
                Some(Incoming::Request { id: rid, method: asked, params: p }) => {
                    if asked == "ping" {
                        let _ = self.respond(&rid, Ok(json!({})), session).await;
                        continue;
                    }
                    let _ = self.refuse(&rid, session).await;
                    return Err(CallError::Unsupported(describe_request(&asked, &p)));
                }
                Some(_) => continue,
                None => return Err(CallError::Transport(format!("{method}: the response ended without an answer"))),
            }
        }
    }

    /// Answers a server→client request (2025-11-25).
    pub async fn respond(
        &self,
        id: &Value,
        outcome: Result<Value, Value>,
        session: Option<&str>,
    ) -> Result<(), CallError> {
        let body = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        let own = self.session();
        let session = session.map(str::to_owned).or(own);
        self.post(&body, session.as_deref(), Some(SHORT), None).await.map(|_| ())
    }

    /// Refuses a server request Baton cannot serve.
    pub async fn refuse(&self, id: &Value, session: Option<&str>) -> Result<(), CallError> {
        let error = json!({"code": -32601, "message": "not supported by this client"});
        self.respond(id, Err(error), session).await
    }

    /// Every tool the server lists (all pages).
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.call("tools/list", params, None, Some(SHORT)).await?;
            for t in page["tools"].as_array().into_iter().flatten() {
                let Some(name) = t["name"].as_str() else { continue };
                tools.push(ToolInfo {
                    name: name.to_owned(),
                    description: t["description"].as_str().unwrap_or_default().to_owned(),
                    input_schema: t
                        .get("inputSchema")
                        .filter(|s| s.is_object())
                        .cloned()
                        .unwrap_or(json!({"type": "object"})),
                    task_support: t["execution"]["taskSupport"].as_str().map(str::to_owned),
                    title: t["title"].as_str().map(str::to_owned),
                    annotations: t.get("annotations").filter(|a| a.is_object()).cloned(),
                    output_schema: t.get("outputSchema").filter(|a| a.is_object()).cloned(),
                    icons: t["icons"].as_array().cloned().unwrap_or_default(),
                });
            }
            cursor = page["nextCursor"].as_str().filter(|c| !c.is_empty()).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// A short request (poll, update, cancel) with the standard timeout.
    pub async fn short(&self, method: &str, params: Value, session: Option<&str>) -> Result<Value, CallError> {
        self.call(method, params, session, Some(SHORT)).await
    }
}

/// What a server request asked for, for `unsupported_interaction`.
pub fn describe_request(method: &str, params: &Value) -> String {
    match (method, params["mode"].as_str()) {
        ("elicitation/create", Some(mode)) if mode != "form" => format!("elicitation/create ({mode} mode)"),
        _ => method.to_owned(),
    }
}

/// A form elicitation Baton can relay to the owner: (message, requested schema).
pub fn form_elicitation(method: &str, params: &Value) -> Option<(String, Value)> {
    if method != "elicitation/create" || params["mode"].as_str().is_some_and(|m| m != "form") {
        return None;
    }
    let schema = params.get("requestedSchema").filter(|s| s.is_object()).cloned()?;
    Some((params["message"].as_str().unwrap_or_default().to_owned(), schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_header_values() {
        assert_eq!(header_value("te_abc"), "te_abc");
        assert_eq!(header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(header_value("é"), "=?base64?w6k=?=");
    }

    #[test]
    fn only_form_elicitation_is_relayed() {
        let form = json!({"message": "Name?", "requestedSchema": {"type": "object"}});
        assert!(form_elicitation("elicitation/create", &form).is_some());
        let url = json!({"mode": "url", "message": "go", "url": "https://x"});
        assert!(form_elicitation("elicitation/create", &url).is_none());
        assert_eq!(describe_request("elicitation/create", &url), "elicitation/create (url mode)");
        assert!(form_elicitation("sampling/createMessage", &form).is_none());
    }
}
