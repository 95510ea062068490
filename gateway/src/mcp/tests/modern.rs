//! The stateless 2026-07-28 era and the tasks extension, as a client sees them.

use super::fake::text_result;
use super::*;
use baton_proto::error::{ErrorCode, WireError};

#[tokio::test]
async fn discover_advertises_the_extension_with_result_type() {
    let h = harness().await;
    let a = h.modern("alice", "server/discover", json!({}), false).await;
    assert_eq!(a.status, StatusCode::OK);
    let r = a.result();
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    assert!(r["capabilities"]["extensions"][EXT].is_object());
    assert!(r["capabilities"].get("tasks").is_none(), "no v1 tasks slot on the modern wire");
    assert_eq!(r["cacheScope"], "public");
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "baton");
}

#[tokio::test]
async fn tools_list_is_private_and_complete() {
    let h = harness().await;
    let a = h.modern("alice", "tools/list", json!({}), true).await;
    let r = a.result();
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["cacheScope"], "private");
    let names: Vec<&str> = r["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"echo") && names.contains(&"Baton_GetToolExecution"));
    assert!(r["tools"][0].get("execution").is_none(), "taskSupport does not exist at 2026-07-28");
}

#[tokio::test]
async fn sync_tool_answers_inline() {
    let h = harness().await;
    let a = h.modern("alice", "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}), true).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.result()["resultType"], "complete");
    assert_eq!(a.result()["content"][0]["text"], "echo hi");
    assert!(a.result().get("taskId").is_none());
}

#[tokio::test]
async fn legacy_task_param_does_not_promote_a_sync_tool() {
    let h = harness().await;
    let params = json!({"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 60000}});
    let a = h.modern("alice", "tools/call", params, true).await;
    assert_eq!(a.result()["resultType"], "complete");
    assert!(a.result().get("taskId").is_none());
}

#[tokio::test]
async fn long_tool_becomes_a_flat_task_whose_result_is_inlined() {
    let h = harness().await;
    let a = h.modern("alice", "tools/call", json!({"name": "slow", "arguments": {}}), true).await;
    let created = a.result();
    assert_eq!(created["resultType"], "task");
    assert!(created.get("task").is_none(), "CreateTaskResult is flat");
    for absent in ["result", "error", "inputRequests", "ttl", "pollInterval", "requestState"] {
        assert!(created.get(absent).is_none(), "{absent} must be absent");
    }
    // The execution's time to live (to its deadline), not how long it is kept.
    assert_eq!(created["ttlMs"], 86_400_000, "{created}");
    assert_eq!(created["pollIntervalMs"], 500);
    let id = created["taskId"].as_str().expect("taskId").to_owned();

    // Durable before it was announced: an immediate tasks/get succeeds.
    let got = h.modern("alice", "tasks/get", json!({"taskId": id}), true).await;
    assert_eq!(got.result()["status"], "working");
    assert_eq!(got.result()["resultType"], "complete");

    h.fake.finish(&id, &text_result("done", false));
    let got = h.modern("alice", "tasks/get", json!({"taskId": id}), true).await;
    let r = got.result();
    assert_eq!(r["status"], "completed");
    assert_eq!(r["result"]["content"][0]["text"], "done");
    assert!(r["result"].get("_meta").is_none(), "no related-task meta inline");
    assert_eq!(h.fake.surface(&id), baton_proto::coordinator::v1::Surface::McpNative as i32);
}

#[tokio::test]
async fn a_tools_failure_ends_completed_with_is_error_and_a_system_failure_ends_failed() {
    let h = harness().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let created = h.modern("alice", "tools/call", json!({"name": "slow", "arguments": {}}), true).await;
        ids.push(created.result()["taskId"].as_str().expect("taskId").to_owned());
    }
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    h.fake.finish(a, &text_result("nope", true));
    h.fake.fail_with(b, "tool_error", "the tool crashed", Some(r#"{"hint":"retry with a smaller page"}"#));
    h.fake.fail_with(c, "deadline_exceeded", "the execution ran past its deadline", None);

    let got = h.modern("alice", "tasks/get", json!({"taskId": a}), true).await;
    assert_eq!(got.result()["status"], "completed");
    assert_eq!(got.result()["result"]["isError"], true);

    // The tool's own failure is a result the model reads, detail included.
    let got = h.modern("alice", "tasks/get", json!({"taskId": b}), true).await;
    assert_eq!(got.result()["status"], "completed");
    assert!(got.result().get("error").is_none());
    assert_eq!(got.result()["result"]["isError"], true);
    assert_eq!(got.result()["result"]["content"][0]["text"], "the tool crashed");
    assert_eq!(got.result()["result"]["structuredContent"]["hint"], "retry with a smaller page");

    let got = h.modern("alice", "tasks/get", json!({"taskId": c}), true).await;
    assert_eq!(got.result()["status"], "failed");
    assert!(got.result().get("result").is_none());
    assert!(got.result()["error"]["code"].is_i64());
    assert_eq!(got.result()["error"]["message"], "the execution ran past its deadline");
    assert_eq!(got.result()["error"]["data"]["failureReason"], "deadline_exceeded");
}

#[tokio::test]
async fn no_task_without_the_extension_the_call_waits() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let (status, headers, body) = h.open(modern_request("alice", "tools/call", json!({"name": "slow"}), false)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"].to_str().expect("ct").starts_with("text/event-stream"));
    let seen = h.fake.waits();
    let reader = tokio::spawn(async move { read_until(&mut sse_messages(body), |m| m.get("id").is_some()).await });
    h.fake.until_waits_exceed(seen).await;
    h.fake.finish(&h.fake.last_id(), &text_result("waited", false));
    let message = reader.await.expect("reader");
    assert_eq!(message["result"]["resultType"], "complete");
    assert_eq!(message["result"]["content"][0]["text"], "waited");
    assert!(message["result"].get("taskId").is_none());
}

#[tokio::test]
async fn a_waiting_call_whose_tool_fails_answers_an_is_error_result() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let (_, _, body) = h.open(modern_request("alice", "tools/call", json!({"name": "slow"}), false)).await;
    let seen = h.fake.waits();
    let reader = tokio::spawn(async move { read_until(&mut sse_messages(body), |m| m.get("id").is_some()).await });
    h.fake.until_waits_exceed(seen).await;
    h.fake.fail(&h.fake.last_id(), "planned failure 1 of 1");
    let message = reader.await.expect("reader");
    assert!(message.get("error").is_none(), "a tool's failure is no protocol error: {message}");
    assert_eq!(message["result"]["resultType"], "complete");
    assert_eq!(message["result"]["isError"], true);
    assert_eq!(message["result"]["content"][0]["text"], "planned failure 1 of 1");
}

#[tokio::test]
async fn required_tool_without_extension_is_32021() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let a = h.modern("alice", "tools/call", json!({"name": "long_only", "arguments": {}}), false).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), -32021);
    assert!(a.body()["error"]["data"]["requiredCapabilities"]["extensions"][EXT].is_object());
    assert_eq!(a.body()["id"], 1);
    assert_eq!(h.fake.count(), 0, "nothing was started");
}

#[tokio::test]
async fn a_tool_needing_an_undeclared_capability_is_32021_before_anything_starts() {
    let h = harness().await;
    let a = h.modern("alice", "tools/call", json!({"name": "asks_sampling", "arguments": {}}), false).await;
    assert_eq!((a.status, a.error_code()), (StatusCode::BAD_REQUEST, -32021));
    assert_eq!(a.body()["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}));
    assert_eq!(h.fake.count(), 0, "nothing was started");
    let mut meta = super::meta(false);
    meta["io.modelcontextprotocol/clientCapabilities"]["sampling"] = json!({});
    let declared = json!({"name": "asks_sampling", "arguments": {}, "_meta": meta});
    let (status, _, _) = h.open(modern_request("alice", "tools/call", declared, false)).await;
    assert_eq!(status, StatusCode::OK, "a client that declared sampling gets the call");
    assert_eq!(h.fake.count(), 1);
}

#[tokio::test]
async fn task_methods_need_the_extension() {
    let h = harness().await;
    for (method, params) in [
        ("tasks/get", json!({"taskId": "gate-test"})),
        ("tasks/update", json!({"taskId": "gate-test", "inputResponses": {}})),
        ("tasks/cancel", json!({"taskId": "gate-test"})),
    ] {
        let a = h.modern("alice", method, params, false).await;
        assert_eq!((a.status, a.error_code()), (StatusCode::BAD_REQUEST, -32021), "{method}");
    }
}

#[tokio::test]
async fn header_mismatches_are_400_32020() {
    let h = harness().await;
    let created = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    let id = created.result()["taskId"].as_str().expect("id").to_owned();
    let v = || post("alice").header("mcp-protocol-version", "2026-07-28");
    let cases = [
        ("method", v().header("mcp-method", "tools/list").header("mcp-name", &id), "tasks/get", json!({"taskId": id})),
        (
            "name",
            v().header("mcp-method", "tasks/get").header("mcp-name", "te_wrong"),
            "tasks/get",
            json!({"taskId": id}),
        ),
        ("missing name", v().header("mcp-method", "tools/call"), "tools/call", json!({"name": "echo"})),
        ("missing method", v(), "tools/list", json!({})),
        ("case", v().header("mcp-method", "TOOLS/LIST"), "tools/list", json!({})),
        (
            "version",
            post("alice").header("mcp-protocol-version", "2025-11-25").header("mcp-method", "tools/list"),
            "tools/list",
            json!({}),
        ),
    ];
    for (what, builder, method, params) in cases {
        let a = h.send(builder.body(modern_body(method, params, true)).expect("request")).await;
        assert_eq!((a.status, a.error_code()), (StatusCode::BAD_REQUEST, -32020), "{what}: {:?}", a.body());
        assert_eq!(a.body()["id"], 1, "{what}: the error carries the request id");
    }
}

#[tokio::test]
async fn whitespace_and_base64_header_values_are_accepted() {
    let h = harness().await;
    let params = json!({"name": "echo", "arguments": {"text": "a"}});
    let builder = post("alice")
        .header("mcp-protocol-version", "2026-07-28")
        .header("MCP-METHOD", " tools/call ")
        .header("mcp-name", "=?base64?ZWNobw==?=");
    let a = h.send(builder.body(modern_body("tools/call", params, true)).expect("request")).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body());
    assert_eq!(a.result()["content"][0]["text"], "echo a");
}

#[tokio::test]
async fn unsupported_version_is_400_32022() {
    let h = harness().await;
    let mut m = meta(true);
    m["io.modelcontextprotocol/protocolVersion"] = "v999.0.0".into();
    let builder = post("alice").header("mcp-protocol-version", "v999.0.0").header("mcp-method", "server/discover");
    let a = h.send(builder.body(modern_body("server/discover", json!({"_meta": m}), true)).expect("request")).await;
    assert_eq!((a.status, a.error_code()), (StatusCode::BAD_REQUEST, -32022));
    assert_eq!(a.body()["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(a.body()["error"]["data"]["requested"], "v999.0.0");
}

/// Arguments that are not an object are refused as invalid params, in either
/// era, before anything starts: never passed on as some stand-in input.
#[tokio::test]
async fn arguments_that_are_not_an_object_start_nothing() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", "2025-11-25", json!({})).await;
    for arguments in [json!("text=hi"), json!(["hi"]), json!(5), json!(true), json!("")] {
        let params = json!({"name": "echo", "arguments": arguments});
        let modern = h.modern("alice", "tools/call", params.clone(), true).await;
        assert_eq!(modern.error_code(), -32602, "{arguments}: {:?}", modern.body());
        assert_eq!(modern.body()["error"]["message"], "`arguments` must be an object");
        let legacy = h.legacy("alice", &session, "tools/call", params).await;
        assert_eq!(legacy.error_code(), -32602, "{arguments}: {:?}", legacy.body());
    }
    assert_eq!(h.fake.count(), 0, "a refused call starts nothing");
    let absent = h.modern("alice", "tools/call", json!({"name": "echo", "arguments": null}), true).await;
    assert_eq!(absent.result()["resultType"], "complete", "null arguments are no arguments: {:?}", absent.body());
    assert_eq!(h.fake.count(), 1);
}

#[tokio::test]
async fn incomplete_meta_is_400_32602() {
    let h = harness().await;
    let full = meta(false);
    let mut no_caps = full.clone();
    no_caps.as_object_mut().expect("meta").remove("io.modelcontextprotocol/clientCapabilities");
    let mut no_version = full.clone();
    no_version.as_object_mut().expect("meta").remove("io.modelcontextprotocol/protocolVersion");
    for params in [json!({"_meta": {}}), json!({"_meta": no_caps}), json!({"_meta": no_version})] {
        let builder =
            post("alice").header("mcp-protocol-version", "2026-07-28").header("mcp-method", "server/discover");
        let body =
            Body::from(json!({"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": params}).to_string());
        let a = h.send(builder.body(body).expect("request")).await;
        assert_eq!((a.status, a.error_code()), (StatusCode::BAD_REQUEST, -32602), "{params}");
        assert_eq!(a.body()["id"], 101);
    }
}

#[tokio::test]
async fn unknown_and_removed_methods_are_404_32601() {
    let h = harness().await;
    for method in ["unknown/method", "initialize", "ping", "tasks/result", "tasks/list", "resources/subscribe"] {
        let a = h.modern("alice", method, json!({"taskId": "tasks-conformance-isolation-probe"}), true).await;
        assert_eq!((a.status, a.error_code()), (StatusCode::NOT_FOUND, -32601), "{method}");
    }
}

#[tokio::test]
async fn update_forwards_only_open_keys_and_acks() {
    let h = harness().await;
    let created = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    let id = created.result()["taskId"].as_str().expect("id").to_owned();
    h.fake.ask(&id, "k1", "Your name?");
    h.fake.ask(&id, "k2", "Your city?");
    let got = h.modern("alice", "tasks/get", json!({"taskId": id}), true).await;
    assert_eq!(got.result()["status"], "input_required");
    let requests = got.result()["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 2);
    assert_eq!(requests["k1"]["method"], "elicitation/create");
    assert_eq!(requests["k1"]["params"]["message"], "Your name?");

    let responses = json!({"k1": {"action": "accept", "content": {"name": "Ada"}}, "unknown-key": {"ignored": true}});
    let ack = h.modern("alice", "tasks/update", json!({"taskId": id, "inputResponses": responses}), true).await;
    assert_eq!(ack.result(), &json!({"resultType": "complete"}));
    let provided = h.fake.provided();
    assert_eq!(provided.len(), 1);
    assert_eq!((provided[0].1.as_str(), provided[0].2.as_str()), ("k1", "accept"));

    // Partial answer: only the other key is still listed.
    let got = h.modern("alice", "tasks/get", json!({"taskId": id}), true).await;
    let requests = got.result()["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), vec!["k2"]);
}

#[tokio::test]
async fn cancel_is_an_ack_even_when_terminal() {
    let h = harness().await;
    let running = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    let id = running.result()["taskId"].as_str().expect("id").to_owned();
    let ack = h.modern("alice", "tasks/cancel", json!({"taskId": id}), true).await;
    // Nothing but the result type: rmcp 3.3.0 reads an ack with `_meta` as a tool result.
    assert_eq!(ack.result(), &json!({"resultType": "complete"}));
    h.fake.finish(&id, &text_result("late", false));
    let again = h.modern("alice", "tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.result()["resultType"], "complete");
}

#[tokio::test]
async fn foreign_unknown_and_malformed_ids_answer_alike() {
    let h = harness().await;
    let created = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    let id = created.result()["taskId"].as_str().expect("id").to_owned();
    let foreign = h.modern("bob", "tasks/get", json!({"taskId": id}), true).await;
    let unknown = h.modern("bob", "tasks/get", json!({"taskId": "te_000000000000000000000009999"}), true).await;
    let malformed = h.modern("bob", "tasks/get", json!({"taskId": "tasks-conformance-nonexistent-12345"}), true).await;
    assert_eq!(foreign.error_code(), -32602);
    for other in [&unknown, &malformed] {
        assert_eq!(other.status, foreign.status);
        assert_eq!(other.body(), foreign.body());
    }
    let cancel = h.modern("bob", "tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(cancel.body()["error"], foreign.body()["error"]);
    assert_eq!(h.fake.status(&id), "pending", "bob could not touch alice's task");
}

#[tokio::test]
async fn saturation_names_scope_and_retry() {
    let h = harness().await;
    let mut e = WireError::new(ErrorCode::CapacityExceeded, "too many running executions");
    e.scope = Some("principal".into());
    e.retry_after_ms = Some(1500);
    h.fake.fail_next_start(e);
    let a = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    assert_eq!(a.status, StatusCode::OK, "not 429: one official client ends its session on 429");
    assert_eq!(a.error_code(), -32025);
    let data = &a.body()["error"]["data"];
    assert_eq!(data["code"], "capacity_exceeded");
    assert_eq!(data["scope"], "principal");
    assert_eq!(data["retryAfterMs"], 1500);
    assert_eq!(a.headers["retry-after"], "2");
}

#[tokio::test]
async fn native_tasks_off_creates_no_task() {
    let h = harness_with(|o| o.native_mcp_tasks = false).await;
    let d = h.modern("alice", "server/discover", json!({}), true).await;
    assert!(d.result()["capabilities"].get("extensions").is_none());
    let a = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    assert_ne!(a.result()["resultType"], "task");
    assert_eq!(a.result()["structuredContent"]["type"], "baton.execution/v1", "the handle instead");
    let g = h.modern("alice", "tasks/get", json!({"taskId": h.fake.last_id()}), true).await;
    assert_eq!((g.status, g.error_code()), (StatusCode::NOT_FOUND, -32601));
}

/// Opens a non-task `tools/call` of `slow` (it waits on SSE) and makes the
/// fake ask one question once the stream waits; returns the stream's answer.
async fn call_until_asked(h: &Harness, params: Value) -> Value {
    let seen = h.fake.waits();
    let (status, _, body) = h.open(modern_request("alice", "tools/call", params, false)).await;
    assert_eq!(status, StatusCode::OK);
    // The stream only waits while it is read.
    let reader = tokio::spawn(async move { read_until(&mut sse_messages(body), |m| m.get("id").is_some()).await });
    h.fake.until_waits_exceed(seen).await;
    h.fake.ask(&h.fake.last_id(), "k1", "Your name?");
    reader.await.expect("reader")
}

#[tokio::test]
async fn a_call_without_a_task_gets_its_input_through_an_mrtr_round() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let first = call_until_asked(&h, json!({"name": "slow", "arguments": {}})).await;
    let round = &first["result"];
    assert_eq!(round["resultType"], "input_required", "{first}");
    assert_eq!(round["inputRequests"]["k1"]["method"], "elicitation/create");
    assert_eq!(round["inputRequests"]["k1"]["params"]["message"], "Your name?");
    let id = h.fake.last_id();
    let retry = json!({"name": "slow", "arguments": {}, "requestState": round["requestState"],
        "inputResponses": {"k1": {"action": "accept", "content": {"name": "Ada"}}, "stale": {"action": "accept"}}});
    let seen = h.fake.waits();
    let (status, _, body) = h.open(modern_request("alice", "tools/call", retry, false)).await;
    assert_eq!(status, StatusCode::OK);
    let reader = tokio::spawn(async move { read_until(&mut sse_messages(body), |m| m.get("id").is_some()).await });
    h.fake.until_waits_exceed(seen).await;
    h.fake.finish(&id, &text_result("Hello, Ada", false));
    let done = reader.await.expect("reader");
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada", "{done}");
    assert_eq!(h.fake.count(), 1, "the retry continued the first round's execution");
    let provided = h.fake.provided();
    assert_eq!(provided.len(), 1, "only the open key is relayed: {provided:?}");
    assert_eq!((provided[0].0.as_str(), provided[0].1.as_str(), provided[0].2.as_str()), (id.as_str(), "k1", "accept"));
}

#[tokio::test]
async fn a_request_state_of_another_user_or_tool_is_invalid_params() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let first = call_until_asked(&h, json!({"name": "slow", "arguments": {}})).await;
    let state = first["result"]["requestState"].clone();
    let other_tool = h.modern("alice", "tools/call", json!({"name": "oops", "requestState": state}), false).await;
    assert_eq!(other_tool.error_code(), -32602);
    let other_user = h.modern("bob", "tools/call", json!({"name": "slow", "requestState": state}), false).await;
    assert_eq!(other_user.error_code(), -32602);
    assert!(h.fake.provided().is_empty());
}

#[tokio::test]
async fn a_client_without_elicitation_is_refused_and_the_execution_cancelled() {
    let h = harness_with(|o| o.mcp_tasks_compatibility = false).await;
    let mut meta = super::meta(false);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let answer = call_until_asked(&h, json!({"name": "slow", "arguments": {}, "_meta": meta})).await;
    assert_eq!(answer["error"]["code"], -32021, "{answer}");
    assert_eq!(answer["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
    assert_eq!(h.fake.cancel_state(&h.fake.last_id()), "requested", "nobody could ever answer it");
}

#[tokio::test]
async fn a_native_cancel_acknowledges_only_what_it_can_prove() {
    use baton_proto::coordinator::v1::CancelOutcome;
    let h = harness().await;
    // Delivered, then already requested: the empty acknowledgement both times.
    let id = start(&h).await;
    for _ in 0..2 {
        let ack = cancel(&h, &id).await;
        assert!(ack.body()["error"].is_null(), "{}", ack.body());
        assert_eq!(ack.result()["resultType"], "complete");
    }
    // Delivery unknown: a distinct error that names the outcome and the task.
    let id = start(&h).await;
    h.fake.next_cancel_answers(CancelOutcome::StopDeliveryUnknown);
    let unknown = cancel(&h, &id).await;
    assert_eq!(unknown.error_code(), -32024);
    assert_eq!(unknown.body()["error"]["data"], json!({"outcome": "stop_delivery_unknown", "taskId": id}));
    // Cannot be cancelled: nothing was sent, another distinct error.
    let id = start(&h).await;
    h.fake.next_cancel_answers(CancelOutcome::Unsupported);
    let unsupported = cancel(&h, &id).await;
    assert_eq!(unsupported.error_code(), -32023);
    assert_eq!(unsupported.body()["error"]["data"]["outcome"], "unsupported");
}

async fn start(h: &Harness) -> String {
    let created = h.modern("alice", "tools/call", json!({"name": "slow"}), true).await;
    created.result()["taskId"].as_str().expect("id").to_owned()
}

async fn cancel(h: &Harness, id: &str) -> Answer {
    h.modern("alice", "tasks/cancel", json!({"taskId": id}), true).await
}

/// A credential seen before is not asked about again (`WhoAmI`) for calls the
/// coordinator authenticates itself; once revoked, its very next call is
/// refused 401, and so is its next malformed one (401 before 400).
#[tokio::test]
async fn a_known_credential_is_not_asked_about_again_and_its_revocation_refuses_the_next_call() {
    let h = harness().await;
    let call = json!({"name": "echo", "arguments": {"text": "hi"}});
    assert_eq!(h.modern("alice", "tools/call", call.clone(), true).await.status, StatusCode::OK);
    let asked = h.fake.who_am_i_calls();
    for _ in 0..3 {
        let a = h.modern("alice", "tools/call", call.clone(), true).await;
        assert_eq!(a.result()["content"][0]["text"], "echo hi");
    }
    let task = h.modern("alice", "tools/call", json!({"name": "long_only", "arguments": {}}), true).await;
    let task_id = task.result()["taskId"].as_str().expect("a task").to_owned();
    let got = h.modern("alice", "tasks/get", json!({"taskId": task_id}), true).await;
    assert_eq!(got.result()["status"], "working", "{:?}", got.body());
    assert_eq!(h.fake.who_am_i_calls(), asked, "a known credential's calls ask the coordinator nothing more");
    let malformed = json!({"name": "echo", "arguments": 7});
    assert_eq!(h.modern("alice", "tools/call", malformed.clone(), true).await.error_code(), -32602);

    h.fake.revoke("alice");
    let refused = h.modern("alice", "tools/call", call, true).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{:?}", refused.body());
    let refused = h.modern("alice", "tools/call", malformed, true).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "401 before the refusal of its arguments");
    let refused = h.modern("alice", "tasks/get", json!({"taskId": task_id}), true).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}

/// A token bound to another gateway, known from a call there, is refused here.
#[tokio::test]
async fn a_known_token_of_another_gateway_is_still_refused_here() {
    let h = harness().await;
    let mut there = modern_request("carol", "tools/call", json!({"name": "echo", "arguments": {}}), true);
    *there.uri_mut() = http::Uri::from_static("/mcp/gw2");
    let there = h.send(there).await;
    assert_eq!(there.status, StatusCode::OK, "{:?}", there.body());
    let here = h.modern("carol", "tools/call", json!({"name": "echo", "arguments": {}}), true).await;
    assert_eq!(here.status, StatusCode::FORBIDDEN, "{:?}", here.body());
}
