//! Native `tasks/cancel` (2026-07-28, tasks extension) answers only what it
//! can prove, each outcome produced for real against a cluster: the empty
//! acknowledgement for a stop delivered, one already asked for and a task
//! already ended; -32023 (`unsupported`: nothing was sent) and -32024
//! (`stop_delivery_unknown`: get the task before starting new work), each with
//! `data: {outcome, taskId}`. Worker sessions are driven by hand (as in the
//! operator cancel test), so the test decides what each worker does.

use crate::harness::{Cluster, Settings, eventually};
use crate::operator_outcomes::register;
use crate::worker_trust::tool;
use anyhow::Result;
use baton_proto::worker::v1::coordinator_message::Msg;
use serde_json::{Value, json};
use std::time::Duration;

const EXT: &str = "io.modelcontextprotocol/tasks";

/// One 2026-07-28 request declaring the tasks extension; returns the HTTP
/// status and the JSON-RPC response.
async fn modern(c: &Cluster, token: &str, method: &str, mut params: Value) -> Result<(u16, Value)> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
    });
    let url = format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id);
    let mut req = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(id) = params.get("taskId").and_then(Value::as_str) {
        req = req.header("Mcp-Name", id);
    }
    let resp = req.json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})).send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await?))
}

async fn cancel(c: &Cluster, id: &str) -> Value {
    let (status, body) =
        modern(c, &c.id.user_token, "tasks/cancel", json!({"taskId": id})).await.expect("tasks/cancel");
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["jsonrpc"].as_str(), body["id"].as_i64()), (Some("2.0"), Some(7)), "{body}");
    body
}

/// The empty acknowledgement: a result with nothing but its result type.
fn assert_ack(body: &Value) {
    assert!(body.get("error").is_none(), "{body}");
    assert_eq!(body["result"], json!({"resultType": "complete"}), "{body}");
}

fn assert_error(body: &Value, code: i64, outcome: &str, id: &str) {
    assert!(body.get("result").is_none(), "{body}");
    let error = &body["error"];
    assert_eq!(error["code"], code, "{body}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert_eq!(error["data"], json!({"outcome": outcome, "taskId": id}), "{body}");
}

async fn status(c: &Cluster, id: &str) -> Value {
    let (_, body) = modern(c, &c.id.user_token, "tasks/get", json!({"taskId": id})).await.expect("tasks/get");
    body["result"]["status"].clone()
}

/// What the owner's REST cancel says now: names the outcome an ack stood for.
async fn rest_outcome(c: &Cluster, id: &str) -> Value {
    let r =
        c.rest(0, &c.id.user_token).post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    r.json()["outcome"].clone()
}

/// Starts `tool` as the end user and waits until a worker holds it.
async fn running(c: &Cluster, tool: &str) -> Result<String> {
    crate::operator_outcomes::running(c, &c.rest(0, &c.id.user_token), tool).await
}

#[tokio::test]
async fn native_cancel_answers_each_outcome_with_its_json_rpc_shape() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let mut commit = tool("Op.Commit");
    commit.cancel_unsupported = true;
    let mut unstoppable = register(&c, "wk_mcp_commit", commit).await.expect("worker");
    let mut stubborn = register(&c, "wk_mcp_stubborn", tool("Op.Stubborn")).await.expect("worker");
    let vanishing = register(&c, "wk_mcp_vanishing", tool("Op.Vanishing")).await.expect("worker");

    // A tool that declares it cannot be stopped: -32023, and nothing is sent.
    let id = running(&c, "Op.Commit").await.expect("running");
    assert_error(&cancel(&c, &id).await, -32023, "unsupported", &id);
    let stop = unstoppable.next(Duration::from_secs(2), |m| matches!(m, Msg::Stop(_)).then_some(())).await;
    assert!(stop.is_err(), "an unsupported cancel never reaches the worker");
    assert_eq!(status(&c, &id).await, "working");

    // Delivered to the holder's live session: the empty ack; asked again
    // before the worker stopped: the same ack (the stop was already asked for).
    let id = running(&c, "Op.Stubborn").await.expect("running");
    assert_ack(&cancel(&c, &id).await);
    stubborn.next(Duration::from_secs(10), |m| matches!(m, Msg::Stop(_)).then_some(())).await.expect("stop");
    assert_ack(&cancel(&c, &id).await);
    assert_eq!(rest_outcome(&c, &id).await, "stop_already_requested");

    // The holder's session is gone, its lease not lapsed: -32024, and the task
    // reads as still working (the durable record is what to inspect).
    let id = running(&c, "Op.Vanishing").await.expect("running");
    drop(vanishing);
    eventually(Duration::from_secs(20), "the coordinator to see the session end", || async {
        Ok((c.scalar("SELECT COUNT(*) FROM workers WHERE id = 'wk_mcp_vanishing'").await? == 0).then_some(()))
    })
    .await
    .expect("disconnected");
    assert_error(&cancel(&c, &id).await, -32024, "stop_delivery_unknown", &id);
    assert_eq!(status(&c, &id).await, "working");
    // The cancel is on record: asking again is an ack, the stop already requested.
    assert_ack(&cancel(&c, &id).await);

    // A task already ended: the empty ack, and nothing changes.
    let done = c.rest(0, &c.id.user_token).start("Demo.Echo", json!({"text": "x"}), None).await.expect("start").json();
    let done = done["execution_id"].as_str().expect("id").to_owned();
    c.rest(0, &c.id.user_token).until_terminal(&done, Duration::from_secs(20)).await.expect("terminal");
    assert_ack(&cancel(&c, &done).await);
    assert_eq!(status(&c, &done).await, "completed");
    assert_eq!(rest_outcome(&c, &done).await, "already_terminal");

    // Another user's task answers like an unknown one, and nothing is sent.
    let id = running(&c, "Op.Stubborn").await.expect("running");
    let (_, foreign) =
        modern(&c, &c.id.other_user_token, "tasks/cancel", json!({"taskId": id})).await.expect("tasks/cancel");
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert!(foreign["error"].get("data").is_none_or(|d| d.get("outcome").is_none()), "{foreign}");
    let stop = stubborn.next(Duration::from_secs(2), |m| matches!(m, Msg::Stop(_)).then_some(())).await;
    assert!(stop.is_err(), "a foreign cancel never reaches the worker");
}
