//! rmcp 3.3.0 against a running `baton dev` (2026-07-28, tasks extension):
//! discovery, a foreground call, a call that becomes a task and completes
//! with its result inline, a cancelled task and the uniform not-found; with
//! `over-capacity`, as the other dev user whose admission bound the caller
//! filled, a call refused over capacity. Prints one `PASS name` /
//! `FAIL name: why` line per case; exits non-zero when any failed.
//!
//! usage: baton-rmcp-3-3-check DEV_JSON [over-capacity]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientInfo, GetTaskParams,
    GetTaskResult, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceError};
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ClientInfo>;
type Outcome = Result<(), String>;

fn call(tool: &str, args: Value) -> CallToolRequestParams {
    let args = args.as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args)
}

fn code(e: &ServiceError) -> Option<i32> {
    match e {
        ServiceError::McpError(data) => Some(data.code.0),
        _ => None,
    }
}

async fn connect(url: &str, token: &str) -> Result<Client, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let caps = ClientCapabilities::builder().enable_elicitation().enable_tasks().build();
    ClientInfo::new(caps, Implementation::new("baton-rmcp-3.3-check", "1.0.0"))
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .map_err(|e| format!("server/discover: {e}"))
}

async fn start_task(client: &Client, seconds: f64) -> Result<String, String> {
    match client.peer().call_tool_once(call("Demo.Sleep", json!({"seconds": seconds}))).await {
        Ok(CallToolResponse::Task(created)) if created.task.status == TaskStatus::Working => Ok(created.task.task_id),
        Ok(other) => Err(format!("Demo.Sleep {seconds} s should be a working task, got {other:?}")),
        Err(e) => Err(format!("tools/call: {e}")),
    }
}

async fn until_terminal(client: &Client, id: &str) -> Result<GetTaskResult, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = client.peer().get_task(GetTaskParams::new(id)).await.map_err(|e| format!("tasks/get: {e}"))?;
        if matches!(got.task.status(), TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled) {
            return Ok(got);
        }
        if Instant::now() > deadline {
            return Err(format!("task {id} still {:?}", got.task.status()));
        }
        let poll = got.task.task.poll_interval_ms.unwrap_or(500).clamp(50, 1000);
        tokio::time::sleep(Duration::from_millis(poll)).await;
    }
}

async fn foreground(client: &Client) -> Outcome {
    match client.peer().call_tool_once(call("Demo.Echo", json!({"text": "hi"}))).await {
        Ok(CallToolResponse::Complete(r)) if r.content[0].as_text().map(|t| t.text.as_str()) == Some("hi") => Ok(()),
        other => Err(format!("Demo.Echo should answer at once: {other:?}")),
    }
}

/// The tool's own failure reaches the caller as a tool result it can read.
async fn tool_failure(client: &Client) -> Outcome {
    match client.peer().call_tool_once(call("Demo.Fail", json!({"retryable": false, "times": 1}))).await {
        Ok(CallToolResponse::Complete(r))
            if r.is_error == Some(true)
                && r.content.first().and_then(|c| c.as_text()).map(|t| t.text.as_str())
                    == Some("planned failure 1 of 1") =>
        {
            Ok(())
        }
        other => Err(format!("expected a result with isError and the tool's message: {other:?}")),
    }
}

/// Demo.Sleep past `baton dev`'s foreground budget (10 s) becomes a task.
const BEYOND_BUDGET: f64 = 11.0;

async fn task_completes(client: &Client) -> Outcome {
    let id = start_task(client, BEYOND_BUDGET).await?;
    let done = until_terminal(client, &id).await?;
    match &done.task.payload {
        TaskPayload::Completed { result } if result["content"][0]["text"] == format!("slept {BEYOND_BUDGET} s") => {
            Ok(())
        }
        other => Err(format!("expected the result inline: {other:?}")),
    }
}

async fn task_cancelled(client: &Client) -> Outcome {
    let id = start_task(client, 300.0).await?;
    client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.map_err(|e| format!("tasks/cancel: {e}"))?;
    let done = until_terminal(client, &id).await?;
    if !matches!(done.task.payload, TaskPayload::Cancelled) {
        return Err(format!("expected cancelled: {done:?}"));
    }
    // A terminal task: the same empty acknowledgement.
    client.peer().cancel_task(CancelTaskParams::new(id)).await.map_err(|e| format!("tasks/cancel (terminal): {e}"))
}

async fn unknown_task(client: &Client) -> Outcome {
    match client.peer().get_task(GetTaskParams::new("te_000000000000000000000000000")).await {
        Err(e) if code(&e) == Some(-32602) => Ok(()),
        other => Err(format!("expected -32602: {other:?}")),
    }
}

/// Run while the caller's admission bound is full (the check script fills
/// it over REST): the call is refused with -32025 and `data` naming the scope
/// and `retryAfterMs`, and the same client goes on working.
async fn over_capacity(client: &Client) -> Outcome {
    let refused = client.peer().call_tool_once(call("Demo.Sleep", json!({"seconds": 1}))).await;
    println!("INFO rmcp 3.3.0 shows an over-capacity call as: {refused:?}");
    match &refused {
        Err(ServiceError::McpError(e))
            if e.code.0 == -32025
                && e.data.as_ref().is_some_and(|d| d["scope"] == "principal" && d["retryAfterMs"].is_u64()) => {}
        other => return Err(format!("expected -32025 with scope and retryAfterMs: {other:?}")),
    }
    let tools = client.peer().list_all_tools().await.map_err(|e| format!("tools/list after the refusal: {e}"))?;
    if tools.iter().any(|t| t.name == "Demo.Echo") {
        Ok(())
    } else {
        Err(format!("tools after the refusal: {tools:?}"))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: baton-rmcp-3-3-check DEV_JSON");
        return ExitCode::from(2);
    };
    let dev: Value = match std::fs::read(&path).map(|b| serde_json::from_slice(&b)) {
        Ok(Ok(v)) => v,
        _ => {
            eprintln!("cannot read {path}");
            return ExitCode::from(2);
        }
    };
    let saturated = std::env::args().nth(2).as_deref() == Some("over-capacity");
    let user = if saturated { "other_end_user" } else { "end_user" };
    let url = dev["mcp_url"].as_str().unwrap_or_default().to_owned();
    let token = dev["credentials"][user]["token"].as_str().unwrap_or_default().to_owned();
    let client = match connect(&url, &token).await {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL rmcp 3.3.0 discover: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = 0;
    let cases: Vec<(&str, Outcome)> = if saturated {
        vec![("over capacity is -32025 with scope and retryAfterMs, the session goes on", over_capacity(&client).await)]
    } else {
        vec![
            ("foreground call", foreground(&client).await),
            ("a tool's failure is a result with isError and its message", tool_failure(&client).await),
            ("task completes with its result inline", task_completes(&client).await),
            ("task cancelled, terminal cancel acknowledged", task_cancelled(&client).await),
            ("unknown task is -32602", unknown_task(&client).await),
        ]
    };
    for (name, outcome) in cases {
        match outcome {
            Ok(()) => println!("PASS rmcp 3.3.0 {name}"),
            Err(why) => {
                failed += 1;
                println!("FAIL rmcp 3.3.0 {name}: {why}");
            }
        }
    }
    let _ = client.cancel().await;
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
