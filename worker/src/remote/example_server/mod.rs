//! An example remote MCP server speaking both task dialects, for `baton dev`
//! and the worker's own tests: 2025-11-25 (`initialize`, sessions, tasks
//! created with `params.task`, input as server→client requests on the
//! `tasks/result` SSE stream) and 2026-07-28 with the tasks extension
//! (stateless, `server/discover`, flat tasks, `inputRequests` on `tasks/get`,
//! `tasks/update`, routing headers checked). Every tool runs as a task and may
//! ask for input (see [`tools`]). Serve it with [`serve`] on loopback only: it
//! has no authentication.

mod tasks;
pub mod tools;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tasks::Tasks;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const V2025: &str = "2025-11-25";
const V2026: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[derive(Default)]
struct App {
    tasks: Arc<Tasks>,
    sessions: Mutex<HashSet<String>>,
}

/// The server's router: `POST /mcp` (GET and DELETE answer 405).
pub fn router() -> axum::Router {
    axum::Router::new().route("/mcp", post(handle)).with_state(Arc::new(App::default()))
}

/// Serves the example server on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "example remote MCP server listening");
    }
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router()).with_graceful_shutdown(shutdown.cancelled_owned()).await
}

fn reply(status: StatusCode, id: &Value, body: Result<Value, Value>) -> Response {
    let msg = match body {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    (status, [("content-type", "application/json")], msg.to_string()).into_response()
}

fn rpc_error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

async fn handle(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return reply(StatusCode::BAD_REQUEST, &Value::Null, Err(rpc_error(-32700, "parse error")));
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = msg["method"].as_str().map(str::to_owned) else {
        // A client's answer to one of our requests (2025-11-25).
        if let Some(key) = id.as_str() {
            let answer = msg.get("result").cloned().unwrap_or(json!({"action": "cancel"}));
            app.tasks.answer(key, answer);
        }
        return StatusCode::ACCEPTED.into_response();
    };
    let params = msg.get("params").cloned().unwrap_or(json!({}));
    if method == "initialize" {
        let session = tasks::random_hex(16);
        app.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(session.clone());
        let result = json!({
            "protocolVersion": V2025,
            "capabilities": {"tools": {"listChanged": false}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "baton-example", "version": env!("CARGO_PKG_VERSION")},
        });
        let mut r = reply(StatusCode::OK, &id, Ok(result));
        if let Ok(v) = session.parse() {
            r.headers_mut().insert("mcp-session-id", v);
        }
        return r;
    }
    if params["_meta"].get("io.modelcontextprotocol/protocolVersion").is_some() {
        return modern(&app, &headers, &id, &method, &params).await;
    }
    let Some(session) = header(&headers, "mcp-session-id").map(str::to_owned) else {
        return reply(StatusCode::BAD_REQUEST, &id, Err(rpc_error(-32600, "Bad Request: Missing session ID")));
    };
    if !app.sessions.lock().unwrap_or_else(|p| p.into_inner()).contains(&session) {
        return reply(StatusCode::NOT_FOUND, &id, Err(rpc_error(-32001, "Session not found")));
    }
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    legacy(&app, &id, &method, &params, session).await
}

/// 2025-11-25, in a session.
async fn legacy(app: &Arc<App>, id: &Value, method: &str, params: &Value, session: String) -> Response {
    let task_id = params["taskId"].as_str().unwrap_or_default().to_owned();
    let not_found = || rpc_error(-32602, format!("Task not found: {task_id}"));
    let result = match method {
        "ping" => Ok(json!({})),
        "tools/list" => {
            let tools: Vec<Value> = tools::list()
                .into_iter()
                .map(|mut t| {
                    let support =
                        if tools::immediate(t["name"].as_str().unwrap_or_default()) { "forbidden" } else { "required" };
                    t["execution"] = json!({"taskSupport": support});
                    t
                })
                .collect();
            Ok(json!({"tools": tools}))
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            if !tools::exists(&name) {
                Err(rpc_error(-32602, format!("unknown tool {name:?}")))
            } else if tools::immediate(&name) {
                return immediate(id, name, params["arguments"].clone(), false).await;
            } else if !params["task"].is_object() {
                Err(rpc_error(-32601, "this tool must be called as a task"))
            } else {
                let args = params["arguments"].clone();
                let ttl = params["task"]["ttl"].as_i64();
                let task_id = app.tasks.create(ttl, Some(session), move |a| tools::run(name, args, a));
                app.tasks.with(|m| m.get(&task_id).map(|t| json!({"task": t.v1_view()}))).ok_or_else(not_found)
            }
        }
        "tasks/get" => app.tasks.with(|m| m.get(&task_id).map(|t| t.v1_view())).ok_or_else(not_found),
        "tasks/list" => {
            let mine = app.tasks.with(|m| {
                m.values().filter(|t| t.session.as_deref() == Some(&session)).map(|t| t.v1_view()).collect::<Vec<_>>()
            });
            Ok(json!({"tasks": mine}))
        }
        "tasks/cancel" => match app.tasks.cancel(&task_id) {
            None => Err(not_found()),
            Some(false) => Err(rpc_error(-32602, "Cannot cancel a task in a terminal state")),
            Some(true) => app.tasks.with(|m| m.get(&task_id).map(|t| t.v1_view())).ok_or_else(not_found),
        },
        "tasks/result" => {
            if app.tasks.with(|m| m.contains_key(&task_id)) {
                return task_result(app.clone(), id.clone(), task_id);
            }
            Err(not_found())
        }
        _ => Err(rpc_error(-32601, format!("method not found: {method}"))),
    };
    reply(StatusCode::OK, id, result)
}

/// A tool answered in the request itself.
async fn immediate(id: &Value, name: String, args: Value, modern: bool) -> Response {
    let outcome = tools::run(name, args, tasks::Asker::detached()).await.map(|mut r| {
        if modern {
            r["resultType"] = "complete".into();
        }
        r
    });
    reply(StatusCode::OK, id, outcome)
}

/// 2025-11-25 `tasks/result`: an SSE stream carrying the task's open
/// requests (again on every new stream, until answered), then its result.
fn task_result(app: Arc<App>, id: Value, task_id: String) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, std::convert::Infallible>>(16);
    let event = |v: Value| Ok(Event::default().event("message").data(v.to_string()));
    crate::supervise::spawn_supervised("example server tasks/result stream", async move {
        let mut sent = HashSet::new();
        let related = json!({RELATED_TASK: {"taskId": task_id}});
        loop {
            let Some(changed) = app.tasks.with(|m| m.get(&task_id).map(|t| t.changed.clone())) else {
                let _ = tx
                    .send(event(json!({"jsonrpc": "2.0", "id": id, "error": rpc_error(-32602, "Task not found")})))
                    .await;
                return;
            };
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (requests, done) = app.tasks.with(|m| match m.get(&task_id) {
                None => (Vec::new(), Some(Err(rpc_error(-32602, "Task not found")))),
                Some(t) => {
                    let requests: Vec<(String, String, Value)> = t
                        .pending
                        .iter()
                        .filter(|(k, _)| !sent.contains(*k))
                        .map(|(k, p)| (k.clone(), p.method.clone(), p.params.clone()))
                        .collect();
                    let done = match (&t.outcome, t.status) {
                        (Some(o), _) => Some(o.clone()),
                        (None, "cancelled") => Some(Err(rpc_error(-32603, "The task was cancelled"))),
                        _ => None,
                    };
                    (requests, done)
                }
            });
            for (key, method, mut params) in requests {
                params["_meta"] = related.clone();
                let msg = json!({"jsonrpc": "2.0", "id": key, "method": method, "params": params});
                if tx.send(event(msg)).await.is_err() {
                    return;
                }
                sent.insert(key);
            }
            if let Some(outcome) = done {
                let msg = match outcome {
                    Ok(mut r) => {
                        r["_meta"] = related.clone();
                        json!({"jsonrpc": "2.0", "id": id, "result": r})
                    }
                    Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
                };
                let _ = tx.send(event(msg)).await;
                return;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tx.closed() => return,
            }
        }
    });
    Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response()
}

/// A routing header's value, decoded from `=?base64?…?=` and trimmed.
fn routing(h: &HeaderMap, name: &str) -> Option<String> {
    let raw = header(h, name)?.trim();
    match raw.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(b64) => base64::engine::general_purpose::STANDARD.decode(b64).ok().and_then(|b| String::from_utf8(b).ok()),
        None => Some(raw.to_owned()),
    }
}

/// 2026-07-28 with the tasks extension: stateless, headers checked.
async fn modern(app: &Arc<App>, h: &HeaderMap, id: &Value, method: &str, params: &Value) -> Response {
    let meta = &params["_meta"];
    let bad = |status: StatusCode, e: Value| reply(status, id, Err(e));
    if meta["io.modelcontextprotocol/protocolVersion"] != V2026 {
        let mut e = rpc_error(-32022, "Unsupported protocol version");
        e["data"] = json!({"supported": [V2026], "requested": meta["io.modelcontextprotocol/protocolVersion"]});
        return bad(StatusCode::BAD_REQUEST, e);
    }
    if header(h, "mcp-protocol-version") != Some(V2026) || routing(h, "mcp-method").as_deref() != Some(method) {
        return bad(
            StatusCode::BAD_REQUEST,
            rpc_error(-32020, "MCP-Protocol-Version or Mcp-Method does not match the body"),
        );
    }
    let name = match method {
        "tools/call" => params["name"].as_str(),
        m if m.starts_with("tasks/") => params["taskId"].as_str(),
        _ => None,
    };
    if let Some(name) = name
        && routing(h, "mcp-name").as_deref() != Some(name)
    {
        return bad(StatusCode::BAD_REQUEST, rpc_error(-32020, "Mcp-Name does not match the body"));
    }
    let extension = meta["io.modelcontextprotocol/clientCapabilities"]["extensions"].get(TASKS).is_some();
    let immediate_call = method == "tools/call" && tools::immediate(params["name"].as_str().unwrap_or_default());
    let needs_extension =
        (method == "tools/call" && !immediate_call) || matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel");
    if needs_extension && !extension {
        let mut e = rpc_error(-32021, "Missing required client capability");
        e["data"] = json!({"requiredCapabilities": {"extensions": {TASKS: {}}}});
        return bad(StatusCode::BAD_REQUEST, e);
    }
    let task_id = params["taskId"].as_str().unwrap_or_default().to_owned();
    let not_found = || rpc_error(-32602, format!("Task not found: {task_id}"));
    let info =
        json!({"io.modelcontextprotocol/serverInfo": {"name": "baton-example", "version": env!("CARGO_PKG_VERSION")}});
    let result = match method {
        "server/discover" => Ok(json!({
            "resultType": "complete", "supportedVersions": [V2026],
            "capabilities": {"tools": {}, "extensions": {TASKS: {}}},
            "ttlMs": 3_600_000, "cacheScope": "public", "_meta": info,
        })),
        "ping" => Ok(json!({"resultType": "complete"})),
        "tools/list" => {
            Ok(json!({"resultType": "complete", "tools": tools::list(), "ttlMs": 60_000, "cacheScope": "public"}))
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            if !tools::exists(&name) {
                Err(rpc_error(-32602, format!("unknown tool {name:?}")))
            } else if tools::immediate(&name) {
                return immediate(id, name, params["arguments"].clone(), true).await;
            } else {
                let args = params["arguments"].clone();
                let task_id = app.tasks.create(None, None, move |a| tools::run(name, args, a));
                app.tasks.with(|m| m.get(&task_id).map(|t| t.v2_view(false))).ok_or_else(not_found)
            }
        }
        "tasks/get" => app.tasks.with(|m| m.get(&task_id).map(|t| t.v2_view(true))).ok_or_else(not_found),
        "tasks/update" => {
            let keys: Option<Vec<String>> =
                app.tasks.with(|m| m.get(&task_id).map(|t| t.pending.keys().cloned().collect()));
            match keys {
                None => Err(not_found()),
                Some(pending) => {
                    for (key, response) in params["inputResponses"].as_object().into_iter().flatten() {
                        if pending.contains(key) {
                            app.tasks.answer(key, response.clone());
                        }
                    }
                    Ok(json!({"resultType": "complete"}))
                }
            }
        }
        "tasks/cancel" => match app.tasks.cancel(&task_id) {
            None => Err(not_found()),
            Some(_) => Ok(json!({"resultType": "complete"})),
        },
        _ => return bad(StatusCode::NOT_FOUND, rpc_error(-32601, format!("method not found: {method}"))),
    };
    let status = if result.is_err() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    reply(status, id, result)
}

#[cfg(test)]
mod tests;
