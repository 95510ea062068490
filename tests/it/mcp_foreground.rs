//! A foreground `tools/call` (2026-07-28, stateless) is one coordinator call
//! (`CallExecution`): it answers the tool's result in the same request and runs
//! the tool once, and the caller is held to its credential for the whole wait:
//! an unknown credential is refused before anything starts, and one revoked
//! while the call waits gets 401, never the result.

use crate::harness::{Cluster, Settings, baton_bin, eventually};
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::time::Duration;

/// The gateway's MCP endpoint, as a client holds it.
#[derive(Clone)]
struct Endpoint {
    http: reqwest::Client,
    url: String,
}

fn endpoint(c: &Cluster) -> Endpoint {
    Endpoint { http: c.http.clone(), url: format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id) }
}

/// One stateless `tools/call`; the HTTP status and the body.
async fn call(mcp: &Endpoint, token: &str, tool: &str, arguments: Value) -> Result<(u16, String)> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "baton-it-foreground", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}});
    let resp = mcp
        .http
        .post(&mcp.url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await?;
    Ok((resp.status().as_u16(), resp.text().await?))
}

async fn admin(c: &Cluster, args: &[&str]) -> Result<Value> {
    let out = tokio::process::Command::new(baton_bin())
        .args(["admin", "--config"])
        .arg(&c.config)
        .args(args)
        .output()
        .await?;
    anyhow::ensure!(out.status.success(), "baton admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[tokio::test]
async fn a_foreground_call_answers_its_result_and_runs_the_tool_once() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let (status, body) = call(&endpoint(&c), &c.id.user_token, "Demo.Echo", json!({"text": "one request"})).await?;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).context("a JSON answer, not a stream")?;
    assert_eq!(answer["result"]["content"][0]["text"], "one request", "{answer}");
    assert_eq!(c.invocations("Demo.Echo").await?, 1);
    Ok(())
}

#[tokio::test]
async fn an_unknown_or_revoked_credential_gets_no_result() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let (status, body) = call(&endpoint(&c), "not-a-token", "Demo.Echo", json!({"text": "x"})).await?;
    assert_eq!(status, 401, "{body}");
    assert_eq!(c.invocations("Demo.Echo").await?, 0, "nothing started");

    // A token of its own, revoked while its call waits for the tool. The tool
    // ends before any safety re-read of the wait: the coordinator must have
    // heard of the revocation to refuse the settlement it just committed.
    let issued =
        admin(&c, &["create-end-user-token", "--gateway", &c.id.gateway_id, "--user", "alice@example.com"]).await?;
    let token = issued["token"].as_str().context("token")?.to_owned();
    let mcp = endpoint(&c);
    let waiting = tokio::spawn(async move { call(&mcp, &token, "Demo.Sleep", json!({"seconds": 3})).await });
    let alice = c.rest(0, &c.id.user_token);
    eventually(Duration::from_secs(20), "the call's execution is working", || async {
        let listed = alice.get("/tool-executions").await?.json();
        Ok(listed["items"].as_array().and_then(|items| {
            items.iter().any(|e| e["tool_name"] == "Demo.Sleep" && e["status"] == "working").then_some(())
        }))
    })
    .await?;
    admin(&c, &["revoke", "--id", issued["id"].as_str().context("id")?]).await?;
    let (status, body) = waiting.await??;
    assert_eq!(status, 401, "the revoked caller gets no result: {body}");
    assert!(!body.contains("\"result\""), "{body}");
    Ok(())
}
