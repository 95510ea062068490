//! MRTR → task composition at 2026-07-28, seen by rmcp 3.11.0 against a real
//! `baton dev` (whose example remote MCP server serves `test_tool_with_task`:
//! task-required, asks for a user name at once, greets it). Round 1 is an
//! MRTR round (input requests and a sealed request state, no task id); the
//! retry carrying the answer returns the task of the same execution, whose
//! result reflects the answer; the tool runs once.

use crate::harness::{baton_bin, eventually, random_suffix};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams, Implementation,
    ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

async fn connect(url: &str, token: &str) -> RunningService<RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let caps = ClientCapabilities::builder().enable_elicitation().enable_tasks().build();
    ClientConfig::new(caps, Implementation::new("baton-composition-test", "1.0.0"))
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .expect("server/discover with rmcp")
}

#[tokio::test]
async fn a_task_required_tool_gathers_its_first_input_by_mrtr_then_becomes_the_task() {
    crate::harness::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("baton-composition-{}", random_suffix()));
    let _dev = Command::new(baton_bin())
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn baton dev");
    let dev = eventually(Duration::from_secs(30), "dev.json", || async {
        Ok(std::fs::read(dir.join("dev.json")).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()))
    })
    .await
    .expect("dev.json written");
    let url = dev["mcp_url"].as_str().expect("mcp_url").to_owned();
    let token = dev["credentials"]["end_user"]["token"].as_str().expect("token").to_owned();
    let client = connect(&url, &token).await;
    // The worker registers the example server's tools just after the gateway is up.
    eventually(Duration::from_secs(30), "test_tool_with_task listed", || async {
        let tools = client.peer().list_all_tools().await?;
        Ok(tools.iter().any(|t| t.name == "test_tool_with_task").then_some(()))
    })
    .await
    .expect("tool listed");

    let call = || CallToolRequestParams::new("test_tool_with_task").with_arguments(Default::default());
    let round = match client.peer().call_tool_once(call()).await.expect("round 1") {
        CallToolResponse::InputRequired(r) => r,
        other => panic!("round 1 should be an MRTR round: {other:?}"),
    };
    let requests = round.input_requests.clone().unwrap_or_default();
    let key = requests.keys().next().expect("an input request").clone();
    let state = round.request_state.clone().expect("requestState");
    assert!(!state.contains("te_"), "the request state is sealed: {state}");

    // Another user's retry with this state is refused before anything is
    // relayed (the final greeting shows whose answer reached the tool).
    let other = dev["credentials"]["other_end_user"]["token"].as_str().expect("token").to_owned();
    let bob = connect(&url, &other).await;
    let mallory: BTreeMap<String, Value> =
        [(key.clone(), json!({"action": "accept", "content": {"name": "Mallory"}}))].into();
    let stolen = call().with_input_responses(mallory).with_request_state(state.clone());
    let refused = bob.peer().call_tool_once(stolen).await;
    assert!(matches!(&refused, Err(ServiceError::McpError(e)) if e.code.0 == -32602), "{refused:?}");
    let _ = bob.cancel().await;

    let answers: BTreeMap<String, Value> =
        [(key.clone(), json!({"action": "accept", "content": {"name": "Alice"}}))].into();
    let retry = call().with_input_responses(answers).with_request_state(state);
    let created = match client.peer().call_tool_once(retry).await.expect("round 2") {
        CallToolResponse::Task(t) => t,
        other => panic!("round 2 should be the task: {other:?}"),
    };
    let id = created.task.task_id.clone();
    let done = eventually(Duration::from_secs(30), "the task to complete", || async {
        let got = client.peer().get_task(GetTaskParams::new(id.as_str())).await?;
        Ok(matches!(got.task.status(), TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
            .then_some(got))
    })
    .await
    .expect("terminal");
    let TaskPayload::Completed { result } = &done.task.payload else { panic!("expected completed: {done:?}") };
    assert_eq!(result["content"][0]["text"], "Hello, Alice!", "{result:?}");

    // One execution, one attempt: the tool ran once.
    let rest = dev["rest_base"].as_str().expect("rest_base").to_owned();
    let http = reqwest::Client::new();
    let list: Value = http
        .get(format!("{rest}/tool-executions?limit=100"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let mine: Vec<&Value> = list["items"]
        .as_array()
        .or_else(|| list["executions"].as_array())
        .expect("a list of executions")
        .iter()
        .filter(|e| e["tool_name"] == "test_tool_with_task")
        .collect();
    assert_eq!(mine.len(), 1, "{list}");
    assert_eq!(mine[0]["execution_id"], id.as_str());
    let _ = client.cancel().await;
    let _ = std::fs::remove_dir_all(&dir);
}
