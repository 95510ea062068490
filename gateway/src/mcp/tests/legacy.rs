//! Legacy sessions (2025-11-25, 2025-06-18) and the 2025-11-25 tasks utility.

use super::fake::text_result;
use super::*;

const V1: &str = "2025-11-25";

async fn task(h: &Harness, session: &str, tool: &str) -> String {
    let a =
        h.legacy("alice", session, "tools/call", json!({"name": tool, "arguments": {}, "task": {"ttl": 60000}})).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body());
    a.result()["task"]["taskId"].as_str().expect("taskId").to_owned()
}

#[tokio::test]
async fn initialize_mints_a_session_and_advertises_tasks() {
    let h = harness().await;
    let (a, session) = h.initialize("alice", V1, json!({})).await;
    assert_eq!(a.status, StatusCode::OK);
    let r = a.result();
    assert_eq!(r["protocolVersion"], V1);
    assert!(r["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object());
    assert!(r["capabilities"]["tasks"]["list"].is_object() && r["capabilities"]["tasks"]["cancel"].is_object());
    assert!(r.get("resultType").is_none(), "legacy results carry no resultType");
    assert!(!session.is_empty() && session.bytes().all(|b| (0x21..=0x7e).contains(&b)));

    let tools = h.legacy("alice", &session, "tools/list", json!({})).await;
    let support: Vec<(String, String)> = tools.result()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["execution"]["taskSupport"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(support.contains(&("echo".into(), "forbidden".into())));
    assert!(support.contains(&("slow".into(), "optional".into())));
    assert!(support.contains(&("long_only".into(), "required".into())));
    let ping = h.legacy("alice", &session, "ping", json!({})).await;
    assert_eq!(ping.result(), &json!({}));
}

#[tokio::test]
async fn session_tokens_resist_tampering_theft_and_deletion() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    assert_eq!(h.legacy("alice", &session, "ping", json!({})).await.status, StatusCode::OK);

    let mut tampered = session.clone().into_bytes();
    let i = tampered.len() / 2;
    tampered[i] = if tampered[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    assert_eq!(h.legacy("alice", &tampered, "ping", json!({})).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        h.legacy("bob", &session, "ping", json!({})).await.status,
        StatusCode::NOT_FOUND,
        "bound to its principal"
    );

    let no_session = post("alice").header("mcp-protocol-version", V1);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    assert_eq!(h.send(no_session.body(Body::from(body)).expect("request")).await.status, StatusCode::BAD_REQUEST);

    // Another replica with the same key opens the same session.
    assert_eq!(h.replica().legacy("alice", &session, "ping", json!({})).await.status, StatusCode::OK);
    let foreign_key = harness_with(|o| o.session_key = [1u8; 32]).await;
    assert_eq!(foreign_key.legacy("alice", &session, "ping", json!({})).await.status, StatusCode::NOT_FOUND);

    let delete = Request::delete(URL)
        .header("host", "localhost")
        .header("authorization", "Bearer alice")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", V1)
        .body(Body::empty())
        .expect("delete");
    assert_eq!(h.send(delete).await.status, StatusCode::NO_CONTENT);
    assert_eq!(h.legacy("alice", &session, "tools/list", json!({})).await.status, StatusCode::NOT_FOUND);
    // The end is shared state: a replica that never saw the DELETE refuses it too.
    assert_eq!(h.replica().legacy("alice", &session, "ping", json!({})).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn v1_task_lifecycle_get_result_list_and_terminal_cancel() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let a = h
        .legacy("alice", &session, "tools/call", json!({"name": "slow", "arguments": {}, "task": {"ttl": 60000}}))
        .await;
    let t = &a.result()["task"];
    assert_eq!(t["status"], "working");
    assert!(t["ttl"].as_i64().is_some() && t["pollInterval"].as_i64().is_some());
    assert!(t["createdAt"].as_str().is_some_and(|s| s.ends_with('Z')));
    let id = t["taskId"].as_str().expect("id").to_owned();

    let got = h.legacy("alice", &session, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["taskId"], id.as_str());
    assert!(got.result().get("task").is_none(), "GetTaskResult is flat");

    h.fake.finish(&id, &text_result("n=7", false));
    let result = h.legacy("alice", &session, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "n=7");
    assert_eq!(result.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());

    let list = h.legacy("alice", &session, "tasks/list", json!({})).await;
    assert!(list.result()["tasks"].as_array().expect("tasks").iter().any(|t| t["taskId"] == id.as_str()));

    let cancel = h.legacy("alice", &session, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel.error_code(), -32602);
    assert!(cancel.body()["error"]["message"].as_str().is_some_and(|m| m.contains("completed")));
}

#[tokio::test]
async fn v1_is_error_result_ends_failed_and_replays_the_result() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let id = task(&h, &session, "slow").await;
    h.fake.finish(&id, &text_result("quota exhausted", true));
    let got = h.legacy("alice", &session, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "failed");
    let result = h.legacy("alice", &session, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["isError"], true);
    assert_eq!(result.result()["content"][0]["text"], "quota exhausted");
}

#[tokio::test]
async fn v1_a_tools_failure_ends_failed_and_its_result_says_is_error() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let tool = task(&h, &session, "slow").await;
    let system = task(&h, &session, "slow").await;
    h.fake.fail_with(&tool, "tool_error", "planned failure 1 of 1", None);
    h.fake.fail_with(&system, "owner_lost", "the worker running the tool was lost", None);

    let got = h.legacy("alice", &session, "tasks/get", json!({"taskId": tool})).await;
    assert_eq!(got.result()["status"], "failed");
    assert_eq!(got.result()["statusMessage"], "planned failure 1 of 1");
    let result = h.legacy("alice", &session, "tasks/result", json!({"taskId": tool})).await;
    assert_eq!(result.result()["isError"], true);
    assert_eq!(result.result()["content"][0]["text"], "planned failure 1 of 1");
    assert!(result.result().get("structuredContent").is_none(), "no detail was attached");
    assert_eq!(result.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], tool.as_str());

    // A failure of the system around the tool replays as the JSON-RPC error.
    let got = h.legacy("alice", &session, "tasks/get", json!({"taskId": system})).await;
    assert_eq!(got.result()["status"], "failed");
    let result = h.legacy("alice", &session, "tasks/result", json!({"taskId": system})).await;
    assert_eq!(result.error_code(), -32603);
    assert_eq!(result.body()["error"]["data"]["failureReason"], "owner_lost");
}

#[tokio::test]
async fn v1_result_streams_input_requests_and_takes_answers_anywhere() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({"elicitation": {}})).await;
    let id = task(&h, &session, "slow").await;
    h.fake.ask(&id, "name-1", "Your name?");
    let got = h.legacy("alice", &session, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "input_required");

    let (status, headers, body) =
        h.open(legacy_request("alice", &session, "tasks/result", json!({"taskId": id}))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"].to_str().expect("ct").starts_with("text/event-stream"));
    let mut messages = sse_messages(body);
    let ask = read_until(&mut messages, |m| m["method"] == "elicitation/create").await;
    assert_eq!(ask["params"]["message"], "Your name?");
    assert_eq!(ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());

    // The answer goes to another replica (same key, same coordinator).
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}});
    let replica = h.replica();
    let posted =
        replica.send(legacy_post("alice", &session, V1).body(Body::from(answer.to_string())).expect("answer")).await;
    assert_eq!(posted.status, StatusCode::ACCEPTED);
    let provided = h.fake.provided();
    assert_eq!(
        (provided[0].0.as_str(), provided[0].1.as_str(), provided[0].2.as_str()),
        (id.as_str(), "name-1", "accept")
    );
    assert_eq!(serde_json::from_str::<Value>(&provided[0].3).expect("content"), json!({"name": "Ada"}));

    h.fake.finish(&id, &text_result("Hello Ada", false));
    let last = read_until(&mut messages, |m| m.get("result").is_some() || m.get("error").is_some()).await;
    assert_eq!(last["id"], 7);
    assert_eq!(last["result"]["content"][0]["text"], "Hello Ada");
    assert_eq!(last["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
}

#[tokio::test]
async fn v1_cancel_of_a_running_task_reads_cancelled_from_then_on() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let id = task(&h, &session, "slow").await;
    let cancel = h.legacy("alice", &session, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel.result()["status"], "cancelled");
    h.fake.finish(&id, &text_result("finished anyway", false));
    let got = h.legacy("alice", &session, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "cancelled", "a cancelled task never changes in this dialect");
}

#[tokio::test]
async fn v1_list_is_paginated_and_scoped_to_the_caller() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let mut mine = vec![];
    for _ in 0..3 {
        mine.push(task(&h, &session, "slow").await);
    }
    let (_, bobs) = h.initialize("bob", V1, json!({})).await;
    let bob_task = h.legacy("bob", &bobs, "tools/call", json!({"name": "slow", "task": {}})).await;
    let bob_id = bob_task.result()["task"]["taskId"].as_str().expect("id").to_owned();

    let mut seen = vec![];
    let mut params = json!({});
    loop {
        let page = h.legacy("alice", &session, "tasks/list", params.clone()).await;
        seen.extend(
            page.result()["tasks"]
                .as_array()
                .expect("tasks")
                .iter()
                .map(|t| t["taskId"].as_str().unwrap_or("").to_owned()),
        );
        match page.result()["nextCursor"].as_str() {
            Some(c) => params = json!({"cursor": c}),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, mine);
    assert!(!seen.contains(&bob_id));
    let bad = h.legacy("alice", &session, "tasks/list", json!({"cursor": "not-a-cursor"})).await;
    assert_eq!(bad.error_code(), -32602);
}

#[tokio::test]
async fn v1_task_on_a_forbidden_tool_is_32601() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let a = h.legacy("alice", &session, "tools/call", json!({"name": "echo", "arguments": {}, "task": {}})).await;
    assert_eq!((a.status, a.error_code()), (StatusCode::OK, -32601));
}

#[tokio::test]
async fn older_sessions_and_native_off_have_no_tasks() {
    let h = harness().await;
    let (a, session) = h.initialize("alice", "2025-06-18", json!({})).await;
    assert_eq!(a.result()["protocolVersion"], "2025-06-18");
    assert!(a.result()["capabilities"].get("tasks").is_none());
    let request = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
        legacy_post("alice", &session, "2025-06-18").body(Body::from(body.to_string())).expect("request")
    };
    let tools = h.send(request("tools/list", json!({}))).await;
    assert!(tools.result()["tools"][0].get("execution").is_none());
    let get = h.send(request("tasks/get", json!({"taskId": "te_000000000000000000000000001"}))).await;
    assert_eq!(get.error_code(), -32601);
    // The `task` member is ignored: the caller gets the compatibility handle.
    let call = h.send(request("tools/call", json!({"name": "slow", "task": {}}))).await;
    assert_eq!(call.result()["structuredContent"]["type"], "baton.execution/v1");

    let h = harness_with(|o| o.native_mcp_tasks = false).await;
    let (a, _) = h.initialize("alice", V1, json!({})).await;
    assert!(a.result()["capabilities"].get("tasks").is_none());
}
