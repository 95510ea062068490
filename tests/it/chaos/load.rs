//! The load: clients that start executions over REST and MCP, retry with the
//! same key, and wait for each to end.

use super::*;

/// What a start attempt came to.
pub(super) enum Answer {
    Acked(String),
    /// Retry after this long; `true`: through the other gateway.
    Retry(Duration, bool),
    /// An answer no retry changes (reported as unexpected).
    GiveUp,
}

pub(super) async fn rest_start(s: &Shared, gw: usize, token: &str, body: &Value, key: &str) -> Answer {
    let sent =
        s.http.post(s.rest_url(gw, "")).bearer_auth(token).header("Idempotency-Key", key).json(body).send().await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            s.count(format!("REST start: {}", error_kind(&e)));
            return Answer::Retry(Duration::from_millis(200), true);
        }
    };
    let status = resp.status().as_u16();
    let wait = retry_after(resp.headers());
    if status == 429
        && let Some(secs) = retry_after_secs(resp.headers())
    {
        s.note_retry_after(secs * 1000);
    }
    let Ok(bytes) = resp.bytes().await else {
        s.count("REST start: body lost".into());
        return Answer::Retry(Duration::from_millis(200), true);
    };
    s.count(format!("REST start: {status}"));
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    match status {
        200..=202 => match v["execution_id"].as_str() {
            Some(id) => Answer::Acked(id.to_owned()),
            None => {
                s.unexpected(format!("REST start {status} without an execution id: {v}"));
                Answer::Retry(Duration::from_millis(500), false)
            }
        },
        429 => Answer::Retry(wait.unwrap_or(Duration::from_secs(1)), false),
        503 => Answer::Retry(wait.unwrap_or(Duration::from_secs(1)), true),
        500..=599 => {
            s.server_error(format!("REST start via gateway {gw} (key {key}): {status} {v}"));
            Answer::Retry(Duration::from_millis(500), true)
        }
        _ => {
            s.unexpected(format!("REST start via gateway {gw} (key {key}): {status} {v}"));
            Answer::GiveUp
        }
    }
}

/// One JSON-RPC exchange with a gateway's MCP endpoint.
pub(super) struct McpReply {
    pub(super) status: u16,
    pub(super) retry_after: Option<Duration>,
    /// The JSON-RPC response, from a JSON or an SSE body.
    pub(super) message: Option<Value>,
}

/// `_meta` of a 2026-07-28 request; `tasks`: declare the tasks extension.
pub(super) fn meta(tasks: bool) -> Value {
    let capabilities = if tasks { json!({"extensions": {TASKS_EXTENSION: {}}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "baton-chaos", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

pub(super) async fn mcp_post(
    s: &Shared,
    gw: usize,
    token: &str,
    method: &str,
    name: &str,
    params: Value,
) -> Result<McpReply, reqwest::Error> {
    let id = 1;
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = s
        .http
        .post(format!("http://{}/mcp/{}", s.gateways[gw], s.gateway_id))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .json(&body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers());
    let text = resp.text().await?;
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(text.trim()))
        .find_map(|d| serde_json::from_str::<Value>(d).ok().filter(|v| v["id"] == id));
    Ok(McpReply { status, retry_after, message })
}

/// What an MCP exchange came to.
pub(super) enum Rpc {
    Result(Value),
    /// Saturated or unavailable: retry after this long; `true`: elsewhere.
    Retry(Duration, bool),
    /// Counted already; retry later.
    Failed,
}

pub(super) fn classify(s: &Shared, what: &str, gw: usize, sent: Result<McpReply, reqwest::Error>) -> Rpc {
    let reply = match sent {
        Ok(r) => r,
        Err(e) => {
            s.count(format!("MCP {what}: {}", error_kind(&e)));
            return Rpc::Retry(Duration::from_millis(200), true);
        }
    };
    let wait = reply.retry_after.unwrap_or(Duration::from_secs(1));
    let code = reply.message.as_ref().and_then(|m| m["error"]["data"]["code"].as_str()).map(str::to_owned);
    s.count(format!("MCP {what}: HTTP {} {}", reply.status, code.as_deref().unwrap_or("ok")));
    if reply.status >= 500 && reply.status != 503 {
        s.server_error(format!("MCP {what} via gateway {gw}: HTTP {} {:?}", reply.status, reply.message));
        return Rpc::Failed;
    }
    if reply.status == 503 {
        return Rpc::Retry(wait, true);
    }
    let Some(message) = reply.message else {
        s.unexpected(format!("MCP {what} via gateway {gw}: HTTP {} without a JSON-RPC response", reply.status));
        return Rpc::Failed;
    };
    if let Some(result) = message.get("result") {
        return Rpc::Result(result.clone());
    }
    if code.as_deref() == Some("capacity_exceeded")
        && let Some(ms) = message["error"]["data"]["retryAfterMs"].as_u64()
    {
        s.note_retry_after(ms);
    }
    match code.as_deref() {
        // Admission, or the gateway's bound on parked waits: both ask to come back.
        Some("capacity_exceeded" | "too_many_waits") => Rpc::Retry(wait, false),
        Some("unavailable") => Rpc::Retry(wait, true),
        Some("internal") => {
            s.server_error(format!("MCP {what} via gateway {gw}: {message}"));
            Rpc::Failed
        }
        _ => {
            s.unexpected(format!("MCP {what} via gateway {gw}: HTTP {} {message}", reply.status));
            Rpc::Failed
        }
    }
}

pub(super) async fn mcp_start(
    s: &Shared,
    gw: usize,
    token: &str,
    surface: Surface,
    tool: &str,
    args: &Value,
) -> Answer {
    let params = json!({"name": tool, "arguments": args, "_meta": meta(surface == Surface::McpTask)});
    let sent = mcp_post(s, gw, token, "tools/call", tool, params).await;
    match classify(s, "tools/call", gw, sent) {
        Rpc::Result(r) => {
            let id = match surface {
                Surface::McpTask => r["taskId"].as_str().filter(|_| r["resultType"] == "task"),
                _ => r["structuredContent"]["execution_id"].as_str(),
            };
            match id {
                Some(id) => Answer::Acked(id.to_owned()),
                None => {
                    s.unexpected(format!("MCP tools/call ({}) answered without an execution: {r}", surface.name()));
                    Answer::GiveUp
                }
            }
        }
        Rpc::Retry(d, elsewhere) => Answer::Retry(d, elsewhere),
        Rpc::Failed => Answer::Retry(Duration::from_millis(500), true),
    }
}

/// Waits for `id` to end, the way its surface's client would; the status, or
/// `None` once the run is abandoned.
pub(super) async fn until_terminal(
    s: &Shared,
    rng: &mut Rng,
    surface: Surface,
    mut gw: usize,
    token: &str,
    id: &str,
) -> Option<String> {
    while !s.abandon.load(Ordering::Relaxed) {
        let pause = match surface {
            Surface::Rest => {
                let sent = s.http.get(s.rest_url(gw, &format!("/{id}?wait_ms=15000"))).bearer_auth(token).send().await;
                match sent {
                    Err(e) => {
                        s.count(format!("REST wait: {}", error_kind(&e)));
                        gw = s.next_gateway(gw);
                        Duration::from_millis(200)
                    }
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let wait = retry_after(resp.headers()).unwrap_or(Duration::from_secs(1));
                        let v: Value = resp.json().await.unwrap_or(Value::Null);
                        s.count(format!("REST wait: {status}"));
                        match status {
                            // The gateway's bound on parked waits (`too_many_waits`).
                            429 => wait,
                            200 => match v["status"].as_str() {
                                Some(st) if is_terminal(st) => return Some(st.to_owned()),
                                _ => Duration::from_millis(20),
                            },
                            503 => {
                                gw = s.next_gateway(gw);
                                Duration::from_millis(500)
                            }
                            500..=599 => {
                                s.server_error(format!("REST wait for {id} via gateway {gw}: {status} {v}"));
                                Duration::from_millis(500)
                            }
                            _ => {
                                s.unexpected(format!("REST wait for {id} via gateway {gw}: {status} {v}"));
                                Duration::from_secs(1)
                            }
                        }
                    }
                }
            }
            Surface::McpTask => {
                let params = json!({"taskId": id, "_meta": meta(true)});
                let sent = mcp_post(s, gw, token, "tasks/get", id, params).await;
                match classify(s, "tasks/get", gw, sent) {
                    Rpc::Result(r) => match r["status"].as_str() {
                        Some(st) if is_terminal(st) => return Some(st.to_owned()),
                        Some(_) => s.task_poll,
                        None => {
                            s.unexpected(format!("MCP tasks/get for {id} without a status: {r}"));
                            Duration::from_secs(1)
                        }
                    },
                    Rpc::Retry(d, elsewhere) => {
                        if elsewhere {
                            gw = s.next_gateway(gw);
                        }
                        d
                    }
                    Rpc::Failed => Duration::from_millis(500),
                }
            }
            Surface::McpCompat => {
                let args = json!({"execution_id": id, "wait_ms": 15000});
                let params = json!({"name": "Baton_GetToolExecution", "arguments": args, "_meta": meta(false)});
                let sent = mcp_post(s, gw, token, "tools/call", "Baton_GetToolExecution", params).await;
                match classify(s, "Baton_GetToolExecution", gw, sent) {
                    Rpc::Result(r) => match r["structuredContent"]["state"].as_str() {
                        Some(st) if is_terminal(st) => return Some(st.to_owned()),
                        Some(_) => Duration::from_millis(20),
                        None => {
                            s.unexpected(format!("Baton_GetToolExecution for {id} without a state: {r}"));
                            Duration::from_secs(1)
                        }
                    },
                    Rpc::Retry(d, elsewhere) => {
                        if elsewhere {
                            gw = s.next_gateway(gw);
                        }
                        d
                    }
                    Rpc::Failed => Duration::from_millis(500),
                }
            }
        };
        tokio::time::sleep(rng.jitter(pause)).await;
    }
    None
}

/// One client: executions one after another until told to stop.
pub(super) async fn client(s: Arc<Shared>, i: usize) {
    let mut rng = Rng::new();
    let surface = match i % 4 {
        0 | 1 => Surface::Rest,
        2 => Surface::McpTask,
        _ => Surface::McpCompat,
    };
    let token = s.tokens[(i / 4) % 2].clone();
    tokio::time::sleep(Duration::from_secs(1).mul_f64(rng.unit())).await;
    let mut n = 0usize;
    while !s.stop.load(Ordering::Relaxed) {
        n += 1;
        let mut gw = (i + n) % s.gateways.len();
        let key = format!("chaos-{i}-{n}");
        let (tool, args) = match rng.next() % 3 {
            0 => ("Demo.Echo", json!({"text": key})),
            1 => {
                let (lo, hi) = s.sleep_s;
                let seconds = ((lo + (hi - lo) * rng.unit()) * 10.0).round() / 10.0;
                ("Demo.Sleep", json!({"seconds": seconds}))
            }
            _ => ("Demo.Fail", json!({"retryable": true, "times": 1})),
        };
        let body = json!({"gateway_id": s.gateway_id, "tool_name": tool, "input": args});
        let id = loop {
            if s.abandon.load(Ordering::Relaxed) {
                return;
            }
            let answer = match surface {
                Surface::Rest => rest_start(&s, gw, &token, &body, &key).await,
                _ => mcp_start(&s, gw, &token, surface, tool, &args).await,
            };
            match answer {
                Answer::Acked(id) => break Some(id),
                Answer::Retry(d, elsewhere) => {
                    if elsewhere {
                        gw = s.next_gateway(gw);
                    }
                    tokio::time::sleep(rng.jitter(d)).await;
                }
                Answer::GiveUp => break None,
            }
        };
        let Some(id) = id else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        {
            let mut t = s.tally();
            t.acked.insert(id.clone(), (tool.to_owned(), surface));
            if surface == Surface::Rest {
                let first = t.rest_keys.entry(key.clone()).or_insert_with(|| id.clone()).clone();
                if first != id {
                    t.key_conflicts.push(format!("key {key}: {first} and {id}"));
                }
            }
        }
        if let Some(status) = until_terminal(&s, &mut rng, surface, gw, &token, &id).await {
            *s.tally().seen.entry(status).or_default() += 1;
        }
    }
}
