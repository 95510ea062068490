//! MCP and seed fidelity against a real cluster, in both protocol eras: a
//! tool's own failure reaches the caller as a tool result it can read
//! (`isError: true`, the tool's message as text, its detail as
//! `structuredContent`), never as a JSON-RPC error; a completed execution
//! carries no error of an earlier attempt.

use crate::harness::{Cluster, Settings, eventually};
use anyhow::{Context, Result, anyhow};
use serde_json::{Value, json};
use std::time::Duration;

const V1: &str = "2025-11-25";
const FAIL_ONCE: &str = "planned failure 1 of 1";

/// An MCP client of one gateway, speaking either era by hand so the test sees
/// the wire as it is.
struct Mcp {
    http: reqwest::Client,
    url: String,
    token: String,
    /// Speaks 2025-11-25 (sessions) rather than 2026-07-28 (stateless).
    legacy: bool,
    /// The 2025-11-25 session, once initialized.
    session: Option<String>,
}

impl Mcp {
    fn modern(c: &Cluster, token: &str) -> Mcp {
        Mcp {
            http: c.http.clone(),
            url: format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id),
            token: token.to_owned(),
            legacy: false,
            session: None,
        }
    }

    async fn legacy(c: &Cluster, token: &str) -> Result<Mcp> {
        let mut mcp = Mcp { legacy: true, ..Mcp::modern(c, token) };
        let init = mcp
            .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": V1,
                "capabilities": {}, "clientInfo": {"name": "baton-it-fidelity", "version": "1"}}}))
            .await?;
        let session = init.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).context("no session id")?;
        mcp.session = Some(session.to_owned());
        mcp.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        Ok(mcp)
    }

    /// The same client (its session too) speaking to gateway `g`.
    fn at(&self, c: &Cluster, g: usize) -> Mcp {
        Mcp {
            http: self.http.clone(),
            url: format!("http://{}/mcp/{}", c.gateways[g].addr, c.id.gateway_id),
            token: self.token.clone(),
            legacy: self.legacy,
            session: self.session.clone(),
        }
    }

    async fn post(&self, body: Value) -> Result<reqwest::Response> {
        let mut req =
            self.http.post(&self.url).bearer_auth(&self.token).header("accept", "application/json, text/event-stream");
        match &self.session {
            Some(s) => req = req.header("mcp-session-id", s).header("mcp-protocol-version", V1),
            None if self.legacy => {}
            None => {
                let method = body["method"].as_str().unwrap_or_default().to_owned();
                req = req.header("mcp-protocol-version", "2026-07-28").header("mcp-method", method);
                if let Some(name) = body["params"]["name"].as_str().or(body["params"]["taskId"].as_str()) {
                    req = req.header("mcp-name", name.to_owned());
                }
            }
        }
        Ok(req.json(&body).send().await?)
    }

    /// One request; the JSON-RPC answer carrying its id (from JSON or SSE).
    async fn request(&self, method: &str, mut params: Value) -> Result<Value> {
        if !self.legacy {
            params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "baton-it-fidelity", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
        }
        let reply = self.post(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})).await?;
        let status = reply.status();
        let text = reply.text().await?;
        anyhow::ensure!(status.is_success(), "{method}: HTTP {status}: {text}");
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            return Ok(v);
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m["id"] == 7)
            .ok_or_else(|| anyhow!("{method}: no answer in {text}"))
    }

    async fn call(&self, tool: &str, arguments: Value) -> Result<Value> {
        self.request("tools/call", json!({"name": tool, "arguments": arguments})).await
    }

    /// GET on the endpoint with `Last-Event-ID`: the status and the whole body.
    async fn resume(&self, last_event_id: &str) -> Result<(u16, String)> {
        let mut req = self.http.get(&self.url).bearer_auth(&self.token).header("accept", "text/event-stream");
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s).header("mcp-protocol-version", V1);
        }
        let reply = req.header("last-event-id", last_event_id).send().await?;
        let status = reply.status().as_u16();
        Ok((status, tokio::time::timeout(Duration::from_secs(30), reply.text()).await??))
    }
}

/// One session key for every gateway of a test: a legacy session opens on any of them.
fn shared_session_key() -> Result<(&'static str, String)> {
    use base64::Engine as _;
    let mut key = [0u8; 32];
    getrandom::fill(&mut key)?;
    Ok(("BATON_SECURITY__MCP_SESSION_KEY", base64::engine::general_purpose::STANDARD.encode(key)))
}

/// The JSON-RPC messages of an SSE body.
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}

/// What every era must show for Demo.Fail's own failure.
fn assert_tool_failure(answer: &Value, what: &str) {
    assert!(answer.get("error").is_none(), "{what}: a tool's failure is no JSON-RPC error: {answer}");
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{what}: {answer}");
    assert_eq!(result["content"][0]["text"], FAIL_ONCE, "{what}: {answer}");
    assert!(result["structuredContent"]["developer_message"].is_string(), "{what}: the tool's detail: {answer}");
}

#[tokio::test]
async fn a_tools_failure_is_a_tool_result_in_both_eras_foreground_task_and_handle() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let fail = json!({"retryable": false, "times": 1});

    let modern = Mcp::modern(&c, &c.id.user_token);
    // The worker registers its tools just after the gateway is ready.
    let answer = eventually(Duration::from_secs(30), "Demo.Fail known", || async {
        let a = modern.call("Demo.Fail", fail.clone()).await?;
        Ok((a["error"]["code"] != -32602).then_some(a))
    })
    .await?;
    assert_tool_failure(&answer, "2026-07-28 foreground");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");

    let legacy = Mcp::legacy(&c, &c.id.user_token).await?;
    assert_tool_failure(&legacy.call("Demo.Fail", fail.clone()).await?, "2025-11-25 foreground");

    // 2025-11-25 task: status `failed`, and tasks/result is the isError result.
    let created =
        legacy.request("tools/call", json!({"name": "Demo.Fail", "arguments": fail, "task": {"ttl": 60_000}})).await?;
    let id = created["result"]["task"]["taskId"].as_str().with_context(|| format!("a task: {created}"))?.to_owned();
    let got = eventually(Duration::from_secs(30), "the task ends", || async {
        let got = legacy.request("tasks/get", json!({"taskId": id})).await?;
        Ok((got["result"]["status"] != "working").then_some(got))
    })
    .await?;
    assert_eq!(got["result"]["status"], "failed", "{got}");
    assert_eq!(got["result"]["statusMessage"], FAIL_ONCE, "{got}");
    let replayed = legacy.request("tasks/result", json!({"taskId": id})).await?;
    assert_tool_failure(&replayed, "2025-11-25 tasks/result");

    // 2026-07-28 reads the same execution as a completed task whose result says isError.
    let read = modern.request("tasks/get", json!({"taskId": id})).await?;
    assert_eq!(read["result"]["status"], "completed", "{read}");
    assert_eq!(read["result"]["result"]["isError"], true, "{read}");
    assert_eq!(read["result"]["result"]["content"][0]["text"], FAIL_ONCE, "{read}");
    assert!(read["result"].get("error").is_none(), "{read}");

    // The compatibility tool answers it the same way.
    let handle = modern.call("Baton_GetToolExecution", json!({"execution_id": id})).await?;
    assert_eq!(handle["result"]["isError"], true, "{handle}");
    assert_eq!(handle["result"]["structuredContent"]["state"], "failed", "{handle}");
    assert_eq!(handle["result"]["structuredContent"]["result"]["content"][0]["text"], FAIL_ONCE, "{handle}");

    // The tool ran once per call: two foreground calls and one task.
    assert_eq!(c.invocations("Demo.Fail").await?, 3);
    Ok(())
}

#[tokio::test]
async fn a_completed_execution_carries_no_error_of_an_earlier_attempt() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Fail", json!({"retryable": true, "times": 1}), None).await?.json();
    let id = started["execution_id"].as_str().context("execution_id")?;
    let done = alice.until_terminal(id, Duration::from_secs(30)).await?;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["error_message"], Value::Null, "{done}");
    assert_eq!(done["failure_reason"], Value::Null, "{done}");

    // Over MCP the same: the result, no error.
    let modern = Mcp::modern(&c, &c.id.user_token);
    let handle = modern.call("Baton_GetToolExecution", json!({"execution_id": id})).await?;
    assert_eq!(handle["result"]["isError"], false, "{handle}");
    assert!(handle["result"]["structuredContent"].get("error").is_none(), "{handle}");
    Ok(())
}

#[tokio::test]
async fn the_retained_payload_bound_counts_results_kept_after_the_work_ended() -> Result<()> {
    let bound = 3_000;
    let c = Cluster::single(Settings { retained_payload_bytes: bound, ..Settings::default() }).await?;
    let alice = c.rest(0, &c.id.user_token);
    let text = "r".repeat(400);
    let mut finished = 0;
    let refused = loop {
        let r = alice.start("Demo.Echo", json!({"text": text}), None).await?;
        if r.status != 202 {
            break r;
        }
        let id = r.json()["execution_id"].as_str().context("execution_id")?.to_owned();
        let done = alice.until_terminal(&id, Duration::from_secs(30)).await?;
        assert_eq!(done["status"], "completed", "{done}");
        finished += 1;
        anyhow::ensure!(finished < 10, "never refused");
    };
    assert_eq!(refused.status, 429, "{:?}", refused.json());
    assert_eq!(refused.json()["error"]["scope"], "retained_payload_bytes", "{:?}", refused.json());
    assert!(refused.headers.get("retry-after").is_some());
    // Nothing runs: what fills the bound is what the ended executions keep.
    let open = "SELECT COUNT(*) FROM executions WHERE status IN ('pending','working','input_required')";
    assert_eq!(c.scalar(open).await?, 0);
    let inputs = c.scalar("SELECT CAST(SUM(LENGTH(input_ct)) AS BIGINT) FROM executions").await?;
    let kept = c.scalar("SELECT CAST(SUM(payload_bytes) AS BIGINT) FROM executions").await?;
    let one_input = inputs / finished;
    assert!(inputs + one_input <= bound as i64, "inputs alone ({inputs} B) would have left room");
    assert!(kept + one_input > bound as i64, "inputs and results ({kept} B) fill the bound");
    Ok(())
}

#[tokio::test]
async fn a_cut_tasks_result_stream_resumes_from_its_last_event_id_on_another_replica() -> Result<()> {
    let mut c = Cluster::new(Settings::default()).await?;
    c.start_coordinator().await?;
    let shared = [shared_session_key()?];
    c.start_gateway_with(0, &shared).await?;
    c.start_gateway_with(0, &shared).await?;
    c.start_worker(0).await?;
    let alice = Mcp::legacy(&c, &c.id.user_token).await?;
    let created = alice
        .request("tools/call", json!({"name": "Demo.Sleep", "arguments": {"seconds": 2}, "task": {"ttl": 60_000}}))
        .await?;
    let task_id = created["result"]["task"]["taskId"].as_str().context("taskId")?.to_owned();
    let mut stream = alice
        .post(json!({"jsonrpc": "2.0", "id": 31, "method": "tasks/result",
        "params": {"taskId": task_id}}))
        .await?;
    // The stream opens with an event that carries an id and empty data: where to resume from.
    let mut first = String::new();
    while !first.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk()).await??.context("stream ended")?;
        first.push_str(&String::from_utf8_lossy(&chunk));
    }
    let event = first.split("\n\n").next().unwrap_or_default();
    let data: Vec<_> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
    assert_eq!(data, [""], "{event}");
    let event_id = event.lines().find_map(|l| l.strip_prefix("id:")).context("no event id")?.trim().to_owned();
    drop(stream);

    // Resumed on the other gateway, the stream answers the original request.
    let (status, body) = alice.at(&c, 1).resume(&event_id).await?;
    assert_eq!(status, 200, "{body}");
    let answer = sse_messages(&body).into_iter().find(|m| m["id"] == 31).context("no answer")?;
    assert_eq!(answer["result"]["content"][0]["text"], "slept 2 s", "{answer}");
    // After its last message a stream marks its end: resuming from there finds no stream.
    let last_id = body.lines().filter_map(|l| l.strip_prefix("id:")).next_back().context("no end mark")?.trim();
    assert!(body.rfind("id:") > body.rfind("\"id\":31"), "the end mark follows the answer: {body}");
    assert_eq!(alice.resume(last_id).await?.0, 405);

    // Another user, in a session of their own, finds nothing at that point.
    let bob = Mcp::legacy(&c, &c.id.other_user_token).await?;
    let (status, body) = bob.resume(&event_id).await?;
    let answer = sse_messages(&body).into_iter().find(|m| m["id"] == 31).context("no answer")?;
    assert_eq!((status, answer["result"].clone()), (200, Value::Null), "{body}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");
    // Nor with Alice's session id.
    let thief = Mcp { session: alice.session.clone(), ..Mcp::legacy(&c, &c.id.other_user_token).await? };
    let (status, body) = thief.resume(&event_id).await?;
    assert!(!body.contains("slept"), "{status}: {body}");
    // An id this server never minted is refused; a GET without one has no stream.
    assert_eq!(alice.resume("rs1.bm90IGpzb24").await?.0, 400);
    let plain = c.http.get(&alice.url).bearer_auth(&alice.token).header("accept", "text/event-stream").send().await?;
    assert_eq!(plain.status(), 405);
    Ok(())
}

#[tokio::test]
async fn an_attempt_stopped_by_a_cancel_says_so_rather_than_failed() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let member = c.rest(0, &c.id.member_key);
    let started = member.start("Demo.Sleep", json!({"seconds": 120}), None).await?.json();
    let id = started["execution_id"].as_str().context("execution_id")?.to_owned();
    eventually(Duration::from_secs(20), "working", || async {
        Ok((member.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await?;
    let cancel = member.post(&format!("/tool-executions/{id}/cancel"), json!({})).await?;
    assert_eq!(cancel.json()["outcome"], "accepted", "{}", cancel.json());
    let done = member.until_terminal(&id, Duration::from_secs(20)).await?;
    assert_eq!(done["status"], "cancelled", "{done}");

    let detail = member.get(&format!("/tool_executions/{id}")).await?.json();
    let attempt = &detail["attempts"][0];
    assert_eq!(attempt["success"], false, "{detail}");
    assert_eq!(attempt["error"], Value::Null, "the tool reported no error: {detail}");
    assert_eq!(attempt["system_error_message"], "stopped because the execution was cancelled", "{detail}");
    Ok(())
}

/// `ttlMs` means what the product's example shows: the execution's time to
/// live (599000 for a run started with that TTL), with `retentionExpiresAt`
/// (a day after creation by default) saying how long the record is kept.
#[tokio::test]
async fn ttl_ms_is_the_executions_time_to_live_not_its_retention() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let alice = c.rest(0, &c.id.user_token);
    let body =
        json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Sleep", "input": {"seconds": 1}, "ttl_ms": 599_000});
    let started = alice.send(reqwest::Method::POST, "/tool-executions", Some(body), None).await?;
    assert_eq!(started.status, 202, "{}", started.json());
    let id = started.json()["execution_id"].as_str().context("execution_id")?.to_owned();
    let task = Mcp::modern(&c, &c.id.user_token).request("tasks/get", json!({"taskId": id})).await?;
    assert_eq!(task["result"]["ttlMs"], 599_000, "{task}");
    let created = time::OffsetDateTime::parse(
        task["result"]["createdAt"].as_str().context("createdAt")?,
        &time::format_description::well_known::Rfc3339,
    )?;
    let kept = time::OffsetDateTime::parse(
        task["result"]["retentionExpiresAt"].as_str().context("retentionExpiresAt")?,
        &time::format_description::well_known::Rfc3339,
    )?;
    assert!(kept - created > time::Duration::hours(1), "retention is its own field: {task}");
    Ok(())
}

/// Baton answers a task from any replica, where the MCP specification assumes
/// sticky task state: 200 tasks per dialect are created through gateway 0 on
/// coordinator 0, and each `tasks/get` is sent to gateway 1 on coordinator 1
/// the moment its `CreateTaskResult` arrives. Every one resolves (a
/// `CreateTaskResult` is never returned before the task exists everywhere).
#[tokio::test]
async fn a_task_created_on_one_replica_resolves_at_once_on_another_in_both_dialects() -> Result<()> {
    use futures_util::StreamExt as _;
    let mut c = Cluster::new(Settings::default()).await?;
    c.start_coordinator().await?;
    c.start_coordinator().await?;
    // No foreground budget: a 2026-07-28 call of an optional tool is a task at once.
    let shared = [shared_session_key()?, ("BATON_GATEWAY__FOREGROUND_BUDGET_MS", "0".to_owned())];
    c.start_gateway_with(0, &shared).await?;
    c.start_gateway_with(1, &shared).await?;
    c.start_worker(0).await?;
    let token = c.id.user_token.clone();
    let legacy = Mcp::legacy(&c, &token).await?;
    for (dialect, creator) in [("2026-07-28", Mcp::modern(&c, &token)), ("2025-11-25", legacy)] {
        let reader = creator.at(&c, 1);
        let unresolved: Vec<String> = futures_util::stream::iter(0..200)
            .map(|i| {
                let (creator, reader) = (&creator, &reader);
                async move {
                    let mut params = json!({"name": "Demo.Echo", "arguments": {"text": format!("task {i}")}});
                    if creator.legacy {
                        params["task"] = json!({"ttl": 60_000});
                    }
                    let created = creator.request("tools/call", params).await?;
                    let task = if creator.legacy { &created["result"]["task"] } else { &created["result"] };
                    let id = task["taskId"].as_str().with_context(|| format!("no task: {created}"))?;
                    let got = reader.request("tasks/get", json!({"taskId": id})).await?;
                    let status = got["result"]["status"].as_str().unwrap_or_default();
                    anyhow::Ok((!["working", "completed"].contains(&status)).then(|| format!("{id}: {got}")))
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .filter_map(|r| r.transpose())
            .collect::<Result<_>>()?;
        assert!(unresolved.is_empty(), "{dialect}: tasks another replica did not resolve: {unresolved:?}");
    }
    Ok(())
}

/// Seed 001's waits: a wait from a cursor answers as soon as anything changed
/// after it, so a change between two waits is never missed (a lease renewal is
/// no change); a wait for a set of states answers only in one of them; each
/// kind has its ceiling, reachable up to the seed's 300 s and 14,400 s, and a
/// longer wait is refused naming the setting, never shortened.
#[tokio::test]
async fn waits_take_a_cursor_or_a_predicate_each_under_its_own_ceiling() -> Result<()> {
    let mut c = Cluster::new(Settings::default()).await?;
    c.start_coordinator().await?;
    let ceilings = [
        ("BATON_GATEWAY__MAX_WAIT_MS", "300000".to_owned()),
        ("BATON_GATEWAY__MAX_PREDICATE_WAIT_MS", "14400000".to_owned()),
    ];
    c.start_gateway_with(0, &ceilings).await?;
    c.start_worker(0).await?;
    let alice = c.rest(0, &c.id.user_token);
    let start = async |seconds: u64| -> Result<String> {
        let started = alice.start("Demo.Sleep", json!({"seconds": seconds}), None).await?.json();
        Ok(started["execution_id"].as_str().context("execution_id")?.to_owned())
    };
    let read = async |path: String| -> Result<(u16, Value)> {
        let r = alice.get(&path).await?;
        Ok((r.status, r.json()))
    };
    let cursor = |v: &Value| v["next_cursor"].as_str().and_then(|c| c.parse::<i64>().ok()).context("next_cursor");

    // Running and renewing its lease, it does not change: the wait times out with the same cursor.
    let id = start(60).await?;
    let working = eventually(Duration::from_secs(20), "working", || async {
        let (_, v) = read(format!("/tool-executions/{id}")).await?;
        Ok((v["status"] == "working").then_some(v))
    })
    .await?;
    let at = cursor(&working)?;
    let (status, quiet) = read(format!("/tool-executions/{id}?since_cursor={at}&wait_ms=3000")).await?;
    assert_eq!((status, &quiet["timed_out"], &quiet["status"]), (200, &json!(true), &json!("working")), "{quiet}");
    assert_eq!(cursor(&quiet)?, at, "heartbeats are not changes: {quiet}");
    // A change made between two waits answers the next wait at once.
    let cancel = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await?;
    assert_eq!(cancel.json()["outcome"], "accepted", "{}", cancel.json());
    let (_, changed) = read(format!("/tool-executions/{id}?since_cursor={at}&wait_ms=300000")).await?;
    assert_eq!(changed["timed_out"], false, "{changed}");
    assert!(cursor(&changed)? > at, "{changed}");

    // A predicate wait passes through working and answers at completed.
    let id = start(2).await?;
    let (_, done) = read(format!("/tool-executions/{id}?until=completed&wait_ms=60000")).await?;
    assert_eq!((&done["status"], &done["timed_out"]), (&json!("completed"), &json!(false)), "{done}");
    // The seed's longest waits are accepted (a finished execution answers at once)...
    for query in ["until=terminal&wait_ms=14400000", "since_cursor=0&wait_ms=300000", "until=working,terminal"] {
        let (status, v) = read(format!("/tool-executions/{id}?{query}")).await?;
        assert_eq!((status, &v["status"]), (200, &json!("completed")), "{query}: {v}");
    }
    // ...and a longer one is refused naming its setting; malformed ones say why.
    for (query, says) in [
        ("until=terminal&wait_ms=14400001", "gateway.max_predicate_wait_ms"),
        ("wait_ms=300001", "gateway.max_wait_ms"),
        ("since_cursor=0&wait_ms=300001", "gateway.max_wait_ms"),
        ("since_cursor=abc", "since_cursor"),
        ("until=finished", "until"),
        ("until=terminal&since_cursor=1", "not both"),
    ] {
        let (status, v) = read(format!("/tool-executions/{id}?{query}")).await?;
        assert_eq!(status, 400, "{query}: {v}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains(says)), "{query}: {v}");
    }
    Ok(())
}

/// A watcher that lost its socket resumes with `after=<seq>`, the `seq` of
/// the last frame it saw, and gets every change it missed, in order, before
/// the execution as it stands; each frame's `seq` is the cursor a long poll
/// names too.
#[tokio::test]
async fn a_resumed_watch_replays_every_change_it_missed_in_order() -> Result<()> {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;
    let c = Cluster::single(Settings::default()).await?;
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Sleep", json!({"seconds": 2}), None).await?.json();
    let id = started["execution_id"].as_str().context("execution_id")?.to_owned();
    let offer = alice.get(&format!("/tool-executions/{id}?delivery=websocket")).await?.json();
    let url = offer["websocket_url"].as_str().context("websocket_url")?;
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await?;
    let first: Value = match socket.next().await.context("a first frame")?? {
        Message::Text(text) => serde_json::from_str(text.as_str())?,
        other => anyhow::bail!("not a text frame: {other:?}"),
    };
    assert_eq!(first["type"], "execution", "{first}");
    let seen = first["seq"].as_i64().context("seq")?;
    drop(socket);
    assert_eq!(alice.until_terminal(&id, Duration::from_secs(30)).await?["status"], "completed");

    let offer = alice.get(&format!("/tool-executions/{id}?delivery=websocket&after={seen}")).await?.json();
    let url = offer["websocket_url"].as_str().context("websocket_url")?;
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await?;
    let mut frames = Vec::new();
    while let Some(frame) = tokio::time::timeout(Duration::from_secs(30), socket.next()).await? {
        match frame? {
            Message::Text(text) => frames.push(serde_json::from_str::<Value>(text.as_str())?),
            Message::Close(_) => break,
            _ => {}
        }
    }
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap_or_default()).collect();
    let changes = kinds.iter().take_while(|k| **k == "change").count();
    assert!(changes >= 1, "at least the settlement was missed: {frames:?}");
    assert_eq!(&kinds[changes..], ["execution", "end"], "{frames:?}");
    let seqs: Vec<i64> = frames[..changes].iter().filter_map(|f| f["seq"].as_i64()).collect();
    assert!(seqs.first().is_some_and(|s| *s > seen), "only what came after {seen}: {seqs:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    assert_eq!(frames[changes - 1]["status"], "completed", "{frames:?}");
    assert_eq!(frames[changes]["seq"].as_i64(), seqs.last().copied(), "the view is the last change: {frames:?}");
    let polled = alice.get(&format!("/tool-executions/{id}")).await?.json();
    assert_eq!(polled["next_cursor"], frames[changes]["seq"].to_string(), "one cursor for both: {polled}");

    for (query, says) in [("delivery=websocket&after=x", "after"), ("after=3", "since_cursor")] {
        let r = alice.get(&format!("/tool-executions/{id}?{query}")).await?;
        assert_eq!(r.status, 400, "{query}: {}", r.json());
        assert!(r.json()["error"]["message"].as_str().is_some_and(|m| m.contains(says)), "{query}: {}", r.json());
    }
    Ok(())
}
