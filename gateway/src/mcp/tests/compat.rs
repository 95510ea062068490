//! The compatibility handle and the four `Baton_…ToolExecution` tools, for
//! clients without Tasks.

use super::fake::text_result;
use super::*;
use baton_proto::coordinator::v1::Surface;

async fn call(h: &Harness, name: &str, arguments: Value) -> Answer {
    h.modern("alice", "tools/call", json!({"name": name, "arguments": arguments}), false).await
}

#[tokio::test]
async fn long_call_returns_the_handle() {
    let h = harness().await;
    let a = call(&h, "slow", json!({"text": "secret payload"})).await;
    let r = a.result();
    assert_eq!(r["isError"], false);
    let handle = &r["structuredContent"];
    let id = h.fake.last_id();
    assert_eq!(handle["type"], "baton.execution/v1");
    assert_eq!(handle["execution_id"], id.as_str());
    // Admitted but not yet claimed (pending): the handle speaks task states only.
    assert_eq!(h.fake.status(&id), "pending");
    assert_eq!(handle["state"], "working");
    assert_eq!(handle["next_action"]["tool"], "Baton_GetToolExecution");
    assert_eq!(handle["next_action"]["arguments"]["execution_id"], id.as_str());
    assert!(handle["next_action"]["arguments"]["wait_ms"].as_i64().is_some_and(|w| (1..=45_000).contains(&w)));
    let text = r["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("Baton_GetToolExecution") && text.contains(&id));
    let rendered = r.to_string();
    for leak in ["http://", "https://", "secret payload", "127.0.0.1"] {
        assert!(!rendered.contains(leak), "the handle leaks {leak}");
    }
    assert_eq!(h.fake.surface(&id), Surface::McpCompat as i32);
}

#[tokio::test]
async fn get_waits_for_the_result() {
    let h = harness().await;
    call(&h, "slow", json!({})).await;
    let id = h.fake.last_id();
    let seen = h.fake.waits();
    let request = modern_request(
        "alice",
        "tools/call",
        json!({"name": "Baton_GetToolExecution", "arguments": {"execution_id": id, "wait_ms": 45000}}),
        false,
    );
    let app = h.app.clone();
    let pending = tokio::spawn(async move {
        let response = tower::ServiceExt::oneshot(app, request).await.expect("router");
        axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body")
    });
    h.fake.until_waits_exceed(seen).await;
    h.fake.finish(&id, &text_result("triaged 18 messages", false));
    let body: Value = serde_json::from_slice(&pending.await.expect("join")).expect("json");
    let r = &body["result"];
    assert_eq!(r["structuredContent"]["state"], "completed");
    assert_eq!(r["structuredContent"]["result"]["content"][0]["text"], "triaged 18 messages");
    assert!(r["content"].as_array().expect("content").iter().any(|c| c["text"] == "triaged 18 messages"));
    assert_eq!(r["isError"], false);
}

#[tokio::test]
async fn get_answers_a_tools_failure_as_an_is_error_result_with_its_message() {
    let h = harness().await;
    call(&h, "slow", json!({})).await;
    let id = h.fake.last_id();
    h.fake.fail_with(&id, "tool_error", "planned failure 1 of 1", Some(r#"{"provider":"acme"}"#));
    let r = call(&h, "Baton_GetToolExecution", json!({"execution_id": id})).await.result().clone();
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["state"], "failed");
    assert_eq!(r["structuredContent"]["result"]["isError"], true);
    assert_eq!(r["structuredContent"]["result"]["structuredContent"]["provider"], "acme");
    assert_eq!(r["structuredContent"]["error"]["failure_reason"], "tool_error");
    let texts: Vec<&str> =
        r["content"].as_array().expect("content").iter().filter_map(|c| c["text"].as_str()).collect();
    assert_eq!(texts, [format!("Execution {id} failed.").as_str(), "planned failure 1 of 1"]);
}

#[tokio::test]
async fn get_refuses_long_waits_and_unknown_ids_alike() {
    let h = harness().await;
    call(&h, "slow", json!({})).await;
    let id = h.fake.last_id();
    let too_long = call(&h, "Baton_GetToolExecution", json!({"execution_id": id, "wait_ms": 45001})).await;
    assert_eq!(too_long.result()["isError"], true);
    assert!(too_long.result()["content"][0]["text"].as_str().is_some_and(|t| t.contains("45000")));

    let foreign = h
        .modern(
            "bob",
            "tools/call",
            json!({"name": "Baton_GetToolExecution", "arguments": {"execution_id": id}}),
            false,
        )
        .await;
    let unknown = call(&h, "Baton_GetToolExecution", json!({"execution_id": "te_000000000000000000000000999"})).await;
    let malformed = call(&h, "Baton_GetToolExecution", json!({"execution_id": "nope"})).await;
    assert_eq!(foreign.result()["isError"], true);
    assert_eq!(foreign.result(), unknown.result());
    assert_eq!(foreign.result(), malformed.result());
}

#[tokio::test]
async fn list_provide_and_cancel_work_on_the_callers_executions() {
    let h = harness().await;
    call(&h, "slow", json!({})).await;
    let id = h.fake.last_id();
    let listed = call(&h, "Baton_ListToolExecutions", json!({})).await;
    let items = listed.result()["structuredContent"]["executions"].as_array().expect("executions").clone();
    assert_eq!(items[0]["execution_id"], id.as_str());
    assert_eq!(items[0]["state"], "working");
    let bobs = h.modern("bob", "tools/call", json!({"name": "Baton_ListToolExecutions", "arguments": {}}), false).await;
    assert_eq!(bobs.result()["structuredContent"]["executions"], json!([]));
    // A cursor that is not one is refused, not read as the first page.
    let bad_cursor = call(&h, "Baton_ListToolExecutions", json!({"cursor": 5})).await;
    assert_eq!(bad_cursor.result()["isError"], true, "{:?}", bad_cursor.result());
    assert!(bad_cursor.result().get("structuredContent").and_then(|s| s.get("executions")).is_none());

    h.fake.ask(&id, "label", "Which label?");
    let got = call(&h, "Baton_GetToolExecution", json!({"execution_id": id})).await;
    let handle = &got.result()["structuredContent"];
    assert_eq!(handle["state"], "input_required");
    assert_eq!(handle["next_action"]["tool"], "Baton_ProvideToolExecutionInput");
    assert_eq!(handle["input_requests"][0]["request_key"], "label");

    let args = json!({"execution_id": id, "request_key": "label", "response": {"action": "accept", "content": {"label": "Receipts"}}});
    let provided = call(&h, "Baton_ProvideToolExecutionInput", args).await;
    assert_eq!(provided.result()["structuredContent"]["acknowledged"], true);
    assert_eq!(h.fake.provided()[0].1, "label");
    let bad = call(
        &h,
        "Baton_ProvideToolExecutionInput",
        json!({"execution_id": id, "request_key": "label", "response": {"action": "maybe"}}),
    )
    .await;
    assert_eq!(bad.result()["isError"], true);

    let cancelled = call(&h, "Baton_CancelToolExecution", json!({"execution_id": id})).await;
    assert_eq!(cancelled.result()["structuredContent"]["outcome"], "accepted");
    h.fake.finish(&id, &text_result("done", false));
    let again = call(&h, "Baton_CancelToolExecution", json!({"execution_id": id})).await;
    assert_eq!(again.result()["structuredContent"]["outcome"], "already_terminal");
}

#[tokio::test]
async fn forbidden_tools_are_waited_for_not_handed_off() {
    let h = harness().await;
    let (status, _, body) = h.open(modern_request("alice", "tools/call", json!({"name": "slow_fg"}), false)).await;
    assert_eq!(status, StatusCode::OK);
    let seen = h.fake.waits();
    let reader = tokio::spawn(async move { read_until(&mut sse_messages(body), |m| m.get("id").is_some()).await });
    h.fake.until_waits_exceed(seen).await;
    h.fake.finish(&h.fake.last_id(), &text_result("in the foreground", false));
    let message = reader.await.expect("reader");
    assert_eq!(message["result"]["content"][0]["text"], "in the foreground");
    assert!(message["result"].get("structuredContent").is_none());
}

#[tokio::test]
async fn compatibility_off_hides_the_tools() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let tools = h.modern("alice", "tools/list", json!({}), false).await;
    let names: Vec<&str> =
        tools.result()["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.iter().all(|n| !n.starts_with("Baton_")), "{names:?}");
    let a = call(&h, "Baton_GetToolExecution", json!({"execution_id": "te_000000000000000000000000001"})).await;
    assert_eq!(a.error_code(), -32602);
}

#[tokio::test]
async fn mcp_started_execution_is_visible_over_rest() {
    let h = harness().await;
    call(&h, "slow", json!({})).await;
    let id = h.fake.last_id();
    let request = Request::get(format!("/v1/orgs/org1/projects/proj1/tool-executions/{id}"))
        .header("authorization", "Bearer alice")
        .body(Body::empty())
        .expect("request");
    let response = tower::ServiceExt::oneshot(h.app.clone(), request).await.expect("router");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value =
        serde_json::from_slice(&axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body"))
            .expect("json");
    assert_eq!(body["execution_id"], id.as_str());
    assert_eq!(body["surface"], "mcp_compat");
}

#[tokio::test]
async fn the_prefix_names_tools_and_handle_type() {
    let h = harness_with(|o| o.compat_prefix = "Arcade".into()).await;
    let a = call(&h, "slow", json!({})).await;
    assert_eq!(a.result()["structuredContent"]["type"], "arcade.execution/v1");
    assert_eq!(a.result()["structuredContent"]["next_action"]["tool"], "Arcade_GetToolExecution");
    let got = call(&h, "Arcade_GetToolExecution", json!({"execution_id": h.fake.last_id()})).await;
    assert_eq!(got.result()["structuredContent"]["state"], "working");
    let old = call(&h, "Baton_GetToolExecution", json!({"execution_id": h.fake.last_id()})).await;
    assert_eq!(old.error_code(), -32602, "only the configured prefix is served");
}
