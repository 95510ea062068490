//! rmcp 3.11.0, a strict third-party client of the 2026-07-28
//! `io.modelcontextprotocol/tasks` extension, against a real cluster: its
//! deserializers reject a CreateTaskResult without `resultType: "task"` and a
//! tasks/cancel ack without `resultType: "complete"`, so a pass also checks
//! those discriminators on the wire.

use crate::harness::{Cluster, Settings};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig, CreateTaskResult,
    GetTaskParams, GetTaskResult, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceError};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::Instant;

type Client = RunningService<RoleClient, ClientConfig>;

/// Demo.Sleep past the gateway's foreground budget (10 s by default) becomes a task.
const BEYOND_BUDGET: f64 = 11.0;

async fn connect(c: &Cluster, token: &str) -> Client {
    let url = format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let caps = ClientCapabilities::builder().enable_elicitation().enable_tasks().build();
    ClientConfig::new(caps, Implementation::new("baton-rmcp-test", "1.0.0"))
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .expect("server/discover with rmcp")
}

fn call(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args)
}

async fn start_task(client: &Client, seconds: f64) -> CreateTaskResult {
    match client.peer().call_tool_once(call("Demo.Sleep", json!({"seconds": seconds}))).await {
        Ok(CallToolResponse::Task(created)) => created,
        Ok(other) => panic!("Demo.Sleep {seconds} s should become a task, got {other:?}"),
        Err(e) => panic!("tools/call: {e}"),
    }
}

async fn until_terminal(client: &Client, id: &str) -> GetTaskResult {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = client.peer().get_task(GetTaskParams::new(id)).await.expect("tasks/get");
        assert_eq!(got.task.task.task_id, id);
        if matches!(got.task.status(), TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled) {
            return got;
        }
        assert!(Instant::now() < deadline, "task {id} still {:?}", got.task.status());
        let poll = got.task.task.poll_interval_ms.unwrap_or(500).clamp(50, 1000);
        tokio::time::sleep(Duration::from_millis(poll)).await;
    }
}

fn error_code(e: &ServiceError) -> Option<i32> {
    match e {
        ServiceError::McpError(data) => Some(data.code.0),
        _ => None,
    }
}

#[tokio::test]
async fn rmcp_drives_the_tasks_extension_including_cancel() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let client = connect(&c, &c.id.user_token).await;

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "Demo.Sleep"), "tools: {tools:?}");

    // A quick tool answers in the foreground, without a task.
    match client.peer().call_tool_once(call("Demo.Echo", json!({"text": "hi"}))).await.expect("tools/call") {
        CallToolResponse::Complete(r) => assert_eq!(r.content[0].as_text().map(|t| t.text.as_str()), Some("hi")),
        other => panic!("Demo.Echo should answer at once, got {other:?}"),
    }

    // The tool's own failure is a tool result the caller reads, not a JSON-RPC error.
    let failing = client.peer().call_tool_once(call("Demo.Fail", json!({"retryable": false, "times": 1}))).await;
    match failing.expect("tools/call of a failing tool") {
        CallToolResponse::Complete(r) => {
            assert_eq!(r.is_error, Some(true), "{r:?}");
            assert_eq!(r.content[0].as_text().map(|t| t.text.as_str()), Some("planned failure 1 of 1"));
        }
        other => panic!("Demo.Fail should answer at once, got {other:?}"),
    }

    // Two long calls at once: both wait out the same foreground budget.
    let (finishing, cancelling) = tokio::join!(start_task(&client, BEYOND_BUDGET), start_task(&client, 300.0));
    for created in [&finishing, &cancelling] {
        assert!(created.task.task_id.starts_with("te_"), "{created:?}");
        assert_eq!(created.task.status, TaskStatus::Working, "{created:?}");
        assert!(created.task.poll_interval_ms.is_some_and(|ms| ms > 0), "{created:?}");
        assert!(created.task.ttl_ms.is_none_or(|ms| ms > 0), "{created:?}");
    }

    // Cancel a running task: an empty ack, then tasks/get reads cancelled.
    let id = cancelling.task.task_id.clone();
    client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.expect("tasks/cancel ack");
    let cancelled = until_terminal(&client, &id).await;
    assert!(matches!(cancelled.task.payload, TaskPayload::Cancelled), "{cancelled:?}");

    // The other one completes with the tool result inline.
    let id = finishing.task.task_id.clone();
    let done = until_terminal(&client, &id).await;
    let TaskPayload::Completed { result } = &done.task.payload else { panic!("expected completed: {done:?}") };
    assert_eq!(result["content"][0]["text"], format!("slept {BEYOND_BUDGET} s"), "{result:?}");
    assert!(result.get("_meta").and_then(|m| m.get("io.modelcontextprotocol/related-task")).is_none());

    // Cancelling a terminal task is the same ack and changes nothing.
    client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.expect("tasks/cancel of a terminal task");
    let again = client.peer().get_task(GetTaskParams::new(id.clone())).await.expect("tasks/get");
    assert_eq!(again.task.status(), TaskStatus::Completed);

    // Unknown ids and another user's task answer alike: -32602.
    let unknown = client.peer().get_task(GetTaskParams::new("te_000000000000000000000000000")).await;
    assert_eq!(unknown.as_ref().err().and_then(error_code), Some(-32602), "{unknown:?}");
    let bob = connect(&c, &c.id.other_user_token).await;
    let foreign = bob.peer().get_task(GetTaskParams::new(id.clone())).await;
    assert_eq!(foreign.as_ref().err().and_then(error_code), Some(-32602), "{foreign:?}");
    let foreign_cancel = bob.peer().cancel_task(CancelTaskParams::new(id)).await;
    assert_eq!(foreign_cancel.as_ref().err().and_then(error_code), Some(-32602), "{foreign_cancel:?}");

    let _ = bob.cancel().await;
    let _ = client.cancel().await;
}

/// Over its admission bound a call is refused with -32025 on HTTP 200 (with
/// `Retry-After`), `data` naming the scope and `retryAfterMs`: rmcp surfaces
/// it as an error carrying that data, the client goes on, and once the place
/// is free the same call is served.
#[tokio::test]
async fn rmcp_sees_saturation_as_a_retryable_error() {
    let c = Cluster::single(Settings { principal_concurrency: 1, ..Settings::default() }).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let holder = alice.start("Demo.Sleep", json!({"seconds": 300}), None).await.expect("start").json();
    let holder = holder["execution_id"].as_str().expect("id").to_owned();
    let client = connect(&c, &c.id.user_token).await;

    let refused = client.peer().call_tool_once(call("Demo.Sleep", json!({"seconds": 1}))).await;
    let Err(ServiceError::McpError(e)) = &refused else { panic!("expected a JSON-RPC error: {refused:?}") };
    assert_eq!(e.code.0, -32025, "{e:?}");
    let data = e.data.clone().unwrap_or_default();
    assert_eq!((data["code"].as_str(), data["scope"].as_str()), (Some("capacity_exceeded"), Some("principal")));
    assert!(data["retryAfterMs"].as_u64().is_some_and(|ms| ms > 0), "{data}");
    // The client goes on: the session is intact.
    let tools = client.peer().list_all_tools().await.expect("tools/list after the refusal");
    assert!(tools.iter().any(|t| t.name == "Demo.Echo"));

    // On the wire: HTTP 200 with Retry-After, so no client's transport fails.
    let url = format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let raw = reqwest::Client::new()
        .post(url)
        .bearer_auth(&c.id.user_token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "Demo.Echo")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "Demo.Echo", "arguments": {"text": "x"}, "_meta": meta}}))
        .send()
        .await
        .expect("raw tools/call");
    assert_eq!(raw.status().as_u16(), 200);
    let retry_after = raw.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert!(retry_after.as_deref().and_then(|s| s.parse::<u64>().ok()).is_some_and(|s| s >= 1), "{retry_after:?}");
    let body: Value = raw.json().await.expect("json");
    assert_eq!(body["error"]["code"], -32025, "{body}");
    assert_eq!(body["error"]["data"]["scope"], "principal", "{body}");

    // Once the place is free, the same call is served.
    alice.post(&format!("/tool-executions/{holder}/cancel"), json!({})).await.expect("cancel");
    alice.until_terminal(&holder, Duration::from_secs(20)).await.expect("terminal");
    match client.peer().call_tool_once(call("Demo.Echo", json!({"text": "again"}))).await.expect("tools/call") {
        CallToolResponse::Complete(r) => assert_eq!(r.content[0].as_text().map(|t| t.text.as_str()), Some("again")),
        other => panic!("Demo.Echo should answer at once, got {other:?}"),
    }
    let _ = client.cancel().await;
}
